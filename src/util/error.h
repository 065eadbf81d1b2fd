// One error type for everything a user can cause: bad files, bad graphs, bad
// flags. Its message is a single line that names the file, node or op.
#pragma once
#include <stdexcept>
#include <string>

namespace fuseopt {

// Text from a model (names, op types, attribute strings) as it goes into a
// message: line breaks, other control characters and backslashes escaped
// (\n, \x01, \\), so a crafted name cannot make a message span lines or
// hide what follows it. Printable bytes, UTF-8 included, stay as they are.
inline std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) { out += "\\x"; out += hex[c >> 4]; out += hex[c & 15]; }
    else out += static_cast<char>(c);
  }
  return out;
}
// 'name', escaped as printable() does: how messages quote a model's names.
inline std::string quoted(const std::string& s) { return "'" + printable(s) + "'"; }

class Error : public std::runtime_error {
 public:
  // The last guard of the one-line rule: a line break that reached the message
  // unescaped (text from a model quoted without printable()) is escaped here.
  explicit Error(const std::string& msg) : std::runtime_error(one_line(msg)) {}

 private:
  static std::string one_line(const std::string& msg) {
    if (msg.find_first_of("\r\n") == std::string::npos) return msg;
    std::string out;
    for (char c : msg) out += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
    return out;
  }
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
