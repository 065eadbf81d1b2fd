// Writing files without ever leaving a partial one behind: data goes to a
// temporary file in the target folder, renamed over the target on commit().
// A destroyed, uncommitted AtomicFile removes its temporary file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace fuseopt {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // empty path: a no-op file
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }
  void write(const void* bytes, size_t len);
  // Appends [offset, offset + len) of another open file (`what` names it in
  // errors), in the kernel where it can: the bytes never pass through this
  // process's memory.
  void copy_from(int src_fd, uint64_t offset, uint64_t len, const std::string& what);
  void commit();
  int fd() const { return fd_; }  // -1 for the no-op file
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Whole file as bytes; throws Error naming the file.
std::string read_file(const std::string& path);

}  // namespace fuseopt
