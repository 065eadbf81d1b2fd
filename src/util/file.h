// Writing files without ever leaving a partial one behind: data goes to a
// temporary file in the target folder, renamed over the target on commit().
// A destroyed, uncommitted AtomicFile removes its temporary file.
#pragma once
#include <cstdio>
#include <string>

namespace fuseopt {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // empty path: a no-op file
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const std::string& bytes);
  void commit();

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// Whole file as bytes; throws Error naming the file.
std::string read_file(const std::string& path);

}  // namespace fuseopt
