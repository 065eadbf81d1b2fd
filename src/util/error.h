// One error type for everything a user can cause: bad files, bad graphs, bad
// flags. Its message is a single line that names the file, node or op.
#pragma once
#include <stdexcept>
#include <string>

namespace fuseopt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// FUSE_CHECK(cond, "message " << x) throws fuseopt::Error with the streamed text.
#define FUSE_CHECK(cond, msg)                          \
  do {                                                 \
    if (!(cond)) {                                     \
      std::ostringstream fuse_check_os_;               \
      fuse_check_os_ << msg;                           \
      throw ::fuseopt::Error(fuse_check_os_.str());    \
    }                                                  \
  } while (0)

}  // namespace fuseopt

#include <sstream>
