// Weight files read through read-only memory maps, and an append-only scratch
// file for constants that should not stay in memory.
//
// A MappedFile is one open file (kept open so that writers can copy ranges
// out of it file to file, without touching the mapping). map() gives a
// MappedSpan: one mmap of the page-aligned range around [offset, offset+len),
// PROT_READ, unmapped when the last holder drops it. Pages enter memory only
// when read; release_resident() drops the ones read so far from this process
// (they come back from the file on the next read). A read-only private file
// mapping has no pages of its own to lose, so that is always safe.
//
// ScratchFile is an unlinked file (gone when the process ends, however it
// ends) that takes bytes once and hands them back as MappedSpans.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

namespace fuseopt {

class MappedSpan;

class MappedFile : public std::enable_shared_from_this<MappedFile> {
 public:
  // Throws Error naming the file when it cannot be opened or is not a regular file.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

  // Read-only view of [offset, offset + len); the range must lie inside the file.
  std::shared_ptr<const MappedSpan> map(uint64_t offset, size_t len);
  // Drops the resident pages of every live span of this file from the process.
  void release_resident() const;

 private:
  friend class MappedSpan;
  friend class ScratchFile;
  MappedFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  mutable std::mutex mu_;
  std::set<const MappedSpan*> live_;
};

class MappedSpan {
 public:
  ~MappedSpan();
  MappedSpan(const MappedSpan&) = delete;
  MappedSpan& operator=(const MappedSpan&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const MappedFile& file() const { return *file_; }
  uint64_t file_offset() const { return offset_; }
  void release_resident() const;

 private:
  friend class MappedFile;
  MappedSpan(std::shared_ptr<MappedFile> f, uint64_t offset, size_t size);
  std::shared_ptr<MappedFile> file_;
  uint64_t offset_ = 0;
  size_t size_ = 0;
  void* base_ = nullptr;  // page-aligned start of the mapping
  size_t map_len_ = 0;
  const uint8_t* data_ = nullptr;
};

class ScratchFile {
 public:
  // An unlinked file in `dir` (the output's folder, so that copies out of it
  // stay on one file system). Throws Error naming the folder.
  explicit ScratchFile(const std::string& dir);
  // Writes the bytes at the next 4 KiB boundary and maps them back read-only.
  std::shared_ptr<const MappedSpan> append(const void* bytes, size_t len);
  uint64_t bytes_written() const { return end_; }
  const std::shared_ptr<MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<MappedFile> file_;
  uint64_t end_ = 0;
};

// Writes [offset, offset + len) of src_fd to dst_fd at dst_fd's file position
// (advancing it): copy_file_range in the kernel where it works, otherwise
// pread/write through a bounded buffer. Neither maps the source. Returns
// false with errno set on an I/O error.
bool copy_file_bytes(int src_fd, uint64_t offset, uint64_t len, int dst_fd);

}  // namespace fuseopt
