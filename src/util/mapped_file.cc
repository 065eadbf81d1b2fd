#include "util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "util/error.h"

namespace fs = std::filesystem;

namespace fuseopt {

namespace {

uint64_t page_size() {
  static const uint64_t p = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return p;
}

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FUSE_CHECK(fd >= 0, path << ": cannot open: " << std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  return std::shared_ptr<MappedFile>(new MappedFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

MappedFile::~MappedFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::shared_ptr<const MappedSpan> MappedFile::map(uint64_t offset, size_t len) {
  FUSE_CHECK(offset <= size_ && len <= size_ - offset,
             path_ << ": bytes " << offset << ".." << offset + len << " lie beyond the end of the file (" << size_
                   << " bytes)");
  auto span = std::shared_ptr<MappedSpan>(new MappedSpan(shared_from_this(), offset, len));
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert(span.get());
  return span;
}

void MappedFile::release_resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const MappedSpan* s : live_) s->release_resident();
}

MappedSpan::MappedSpan(std::shared_ptr<MappedFile> f, uint64_t offset, size_t size)
    : file_(std::move(f)), offset_(offset), size_(size) {
  if (size_ == 0) {
    static const uint8_t kNothing = 0;
    data_ = &kNothing;  // never dereferenced; not null, so memcpy(dst, data(), 0) stays defined
    return;
  }
  const uint64_t start = offset_ / page_size() * page_size();
  map_len_ = static_cast<size_t>(offset_ + size_ - start);
  base_ = ::mmap(nullptr, map_len_, PROT_READ, MAP_PRIVATE, file_->fd(), static_cast<off_t>(start));
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    throw Error(file_->path() + ": cannot map " + std::to_string(size_) + " bytes at offset " +
                std::to_string(offset_) + ": " + std::strerror(errno));
  }
  data_ = static_cast<const uint8_t*>(base_) + (offset_ - start);
}

MappedSpan::~MappedSpan() {
  if (base_) ::munmap(base_, map_len_);
  std::lock_guard<std::mutex> lock(file_->mu_);
  file_->live_.erase(this);
}

void MappedSpan::release_resident() const {
  // MADV_DONTNEED on a read-only private file mapping: the pages leave this
  // process's resident set; a later read faults them in again from the file.
  if (base_) ::madvise(base_, map_len_, MADV_DONTNEED);
}

ScratchFile::ScratchFile(const std::string& dir) {
  std::string d = dir.empty() ? "." : dir;
  // O_TMPFILE: never visible in the folder; else a named file unlinked at once.
  int fd = ::open(d.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string tmpl = (fs::path(d) / ".fuseopt-constants.XXXXXX").string();
    fd = ::mkstemp(tmpl.data());
    if (fd >= 0) ::unlink(tmpl.c_str());
  }
  FUSE_CHECK(fd >= 0, "cannot create a scratch file for constants in '" << d << "': " << std::strerror(errno));
  file_ = std::shared_ptr<MappedFile>(new MappedFile(d + "/(scratch constants)", fd, 0));
}

std::shared_ptr<const MappedSpan> ScratchFile::append(const void* bytes, size_t len) {
  const uint64_t at = (end_ + 4095) / 4096 * 4096;
  FUSE_CHECK(::lseek(file_->fd_, static_cast<off_t>(at), SEEK_SET) == static_cast<off_t>(at) &&
                 write_all(file_->fd_, static_cast<const uint8_t*>(bytes), len),
             "writing " << len << " bytes of constants to the scratch file in '" << file_->path()
                        << "' failed: " << std::strerror(errno) << " (disk full?)");
  end_ = at + len;
  file_->size_ = std::max(file_->size_, end_);
  return file_->map(at, len);
}

bool copy_file_bytes(int src_fd, uint64_t offset, uint64_t len, int dst_fd) {
  loff_t in = static_cast<loff_t>(offset);
  bool kernel_copy = true;
  while (len > 0 && kernel_copy) {
    ssize_t n = ::copy_file_range(src_fd, &in, dst_fd, nullptr, std::min<uint64_t>(len, uint64_t(1) << 30), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // Not supported here (another file system, an old kernel, a pipe):
      // fall back to plain reads; a real I/O error shows up there too.
      kernel_copy = false;
      break;
    }
    len -= static_cast<uint64_t>(n);
  }
  if (len == 0) return true;
  std::vector<uint8_t> buf(std::min<uint64_t>(len, uint64_t(8) << 20));
  while (len > 0) {
    ssize_t r = ::pread(src_fd, buf.data(), std::min<uint64_t>(len, buf.size()), static_cast<off_t>(in));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  // the source ended early
      return false;
    }
    if (!write_all(dst_fd, buf.data(), static_cast<size_t>(r))) return false;
    in += r;
    len -= static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace fuseopt
