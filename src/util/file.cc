#include "util/file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace fs = std::filesystem;

namespace fuseopt {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  fs::path p(path_);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string tmpl = (dir / ("." + p.filename().string() + ".tmp.XXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  FUSE_CHECK(fd >= 0, path_ << ": cannot write in folder '" << dir.string() << "': " << std::strerror(errno));
  tmp_ = tmpl;
  f_ = fdopen(fd, "wb");
  if (!f_) {
    ::close(fd);
    ::unlink(tmp_.c_str());
    throw Error(path_ + ": cannot open temporary file: " + std::strerror(errno));
  }
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const std::string& bytes) {
  if (path_.empty() || bytes.empty()) return;
  FUSE_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f_) == bytes.size(),
             path_ << ": write failed: " << std::strerror(errno));
}

void AtomicFile::commit() {
  if (path_.empty()) return;
  bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
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
