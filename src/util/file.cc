#include "util/file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"
#include "util/mapped_file.h"

namespace fs = std::filesystem;

namespace fuseopt {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  fs::path p(path_);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string tmpl = (dir / ("." + p.filename().string() + ".tmp.XXXXXX")).string();
  fd_ = mkstemp(tmpl.data());
  FUSE_CHECK(fd_ >= 0, path_ << ": cannot write in folder '" << dir.string() << "': " << std::strerror(errno));
  tmp_ = tmpl;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* bytes, size_t len) {
  if (fd_ < 0) return;
  const char* p = static_cast<const char*>(bytes);
  while (len > 0) {
    ssize_t w = ::write(fd_, p, std::min<size_t>(len, size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    FUSE_CHECK(w > 0, path_ << ": write failed: " << std::strerror(errno));
    p += w;
    len -= static_cast<size_t>(w);
  }
}

void AtomicFile::copy_from(int src_fd, uint64_t offset, uint64_t len, const std::string& what) {
  if (fd_ < 0) return;
  FUSE_CHECK(copy_file_bytes(src_fd, offset, len, fd_),
             path_ << ": copying " << len << " bytes from '" << what << "' failed: " << std::strerror(errno));
}

void AtomicFile::commit() {
  if (path_.empty()) return;
  bool ok = ::fsync(fd_) == 0;
  ok = (::close(fd_) == 0) && ok;
  fd_ = -1;
  FUSE_CHECK(ok, path_ << ": write failed: " << std::strerror(errno));
  // mkstemp creates 0600; give the file the usual permissions.
  std::error_code ec;
  fs::permissions(tmp_, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read, ec);
  FUSE_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, path_ << ": cannot rename into place: " << std::strerror(errno));
  committed_ = true;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  FUSE_CHECK(f, path << ": cannot open for reading");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace fuseopt
