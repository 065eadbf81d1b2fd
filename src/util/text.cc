#include "util/text.h"

namespace fuseopt {

namespace {
size_t utf8_length(const std::string& in, size_t i) {
  const unsigned char c = static_cast<unsigned char>(in[i]);
  const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  bool ok = len > 0 && i + len <= in.size();
  for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
  return ok ? len : 0;
}
}  // namespace

std::string valid_utf8(const std::string& in) {
  std::string s;
  for (size_t i = 0; i < in.size();) {
    const size_t len = utf8_length(in, i);
    if (len == 0) {
      s += '?';
      ++i;
    } else {
      s.append(in, i, len);
      i += len;
    }
  }
  return s;
}

std::string printable_line(const std::string& in) {
  std::string flat = in;
  for (char& ch : flat) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) ch = ' ';
  }
  std::string s = valid_utf8(flat);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace fuseopt
