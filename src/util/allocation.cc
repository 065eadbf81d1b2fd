#include "util/allocation.h"

#include <unistd.h>

#include <cstdio>

namespace fuseopt {

std::string byte_size_text(uint64_t bytes, bool exact) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, v == static_cast<double>(static_cast<uint64_t>(v)) ? "%.0f %s" : "%.1f %s", v,
                units[u]);
  return exact ? std::string(buf) + " (" + std::to_string(bytes) + " bytes)" : std::string(buf);
}

void check_host_capacity(const std::string& what, uint64_t bytes) {
  static const uint64_t total = [] {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  }();
  if (total > 0 && bytes > total)  // 0: unknown, the allocation decides
    throw AllocationError((what.empty() ? std::string() : what + ": ") + byte_size_text(bytes) +
                          " is more than this machine's memory (" +
                          byte_size_text(total, false) + ")");
}

}  // namespace fuseopt
