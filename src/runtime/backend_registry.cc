// Backends register a factory and a probe; the CPU backend always exists.
#include <map>
#include <mutex>

#include "runtime/backend.h"
#include "util/error.h"

namespace fuseopt {

namespace {
struct Entry {
  BackendFactory make;
  BackendProbe available;
};
std::map<Backend, Entry>& backends() {
  static std::map<Backend, Entry> r;
  return r;
}
std::mutex& backends_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

void register_backend(Backend b, BackendFactory make, BackendProbe available) {
  std::lock_guard<std::mutex> lock(backends_mutex());
  backends()[b] = Entry{std::move(make), std::move(available)};
}

bool backend_available(Backend b, std::string* why) {
  BackendProbe probe;
  {
    std::lock_guard<std::mutex> lock(backends_mutex());
    auto it = backends().find(b);
    if (it == backends().end()) {
      if (why) *why = std::string("this build has no ") + backend_name(b) + " backend";
      return false;
    }
    probe = it->second.available;
  }
  std::string reason;
  bool ok = probe ? probe(&reason) : true;
  if (!ok && why) *why = reason.empty() ? std::string(backend_name(b)) + " backend is not usable" : reason;
  return ok;
}

std::unique_ptr<BackendImpl> make_backend(Backend b) {
  std::string why;
  FUSE_CHECK(backend_available(b, &why), "backend " << backend_name(b) << " is not available: " << why);
  BackendFactory make;
  {
    std::lock_guard<std::mutex> lock(backends_mutex());
    make = backends()[b].make;
  }
  return make();
}

}  // namespace fuseopt
