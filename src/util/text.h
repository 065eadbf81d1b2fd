// Text that is always safe to print or to put in JSON, whatever bytes a
// corrupted model file carried into a name or a message.
#pragma once
#include <string>

namespace fuseopt {

// Bytes that are not valid UTF-8 become '?'.
std::string valid_utf8(const std::string& in);

// One printable line (how the CLIs and the Python errors show a message):
// control characters become spaces, invalid UTF-8 becomes '?', trailing
// spaces go.
std::string printable_line(const std::string& in);

}  // namespace fuseopt
