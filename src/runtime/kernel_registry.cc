// The kernel registry: a flat list filled by static registrars in kernel
// files. Lookups prefer a kernel that names the dtype over a catch-all one.
#include <deque>
#include <mutex>

#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::CPU: return "cpu";
    case Backend::CUDA: return "cuda";
  }
  return "?";
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
  }
  return "?";
}

namespace {
// Function-local statics: registrars in other translation units may run
// before this file's globals are initialised.
// A deque keeps the addresses find_kernel hands out stable.
std::deque<KernelInfo>& registry() {
  static std::deque<KernelInfo> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
bool same_domain(const std::string& a, const std::string& b) {
  auto norm = [](const std::string& d) { return d == "ai.onnx" ? std::string() : d; };
  return norm(a) == norm(b);
}
}  // namespace

void register_kernel(KernelInfo info) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(std::move(info));
}

const KernelInfo* find_kernel(const std::string& domain, const std::string& op, Backend b, DType dt) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const KernelInfo* any = nullptr;
  for (const KernelInfo& k : registry()) {
    if (k.backend != b || k.op != op || !same_domain(k.domain, domain)) continue;
    if (k.dtypes.empty()) {
      if (!any) any = &k;
      continue;
    }
    for (DType d : k.dtypes)
      if (d == dt) return &k;
  }
  return any;
}

std::vector<const KernelInfo*> all_kernels() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<const KernelInfo*> r;
  for (const KernelInfo& k : registry()) r.push_back(&k);
  return r;
}

}  // namespace fuseopt
