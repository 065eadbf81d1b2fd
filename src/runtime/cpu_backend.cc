// The CPU backend: host memory (64-byte aligned so vector loads never split
// cache lines), memcpy copies, wall-clock timing.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "runtime/backend.h"
#include "util/allocation.h"
#include "util/error.h"

namespace fuseopt {

namespace {
class CpuBackend final : public BackendImpl {
 public:
  Backend kind() const override { return Backend::CPU; }
  std::string device_name() const override { return "cpu"; }
  void* alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded == 0) rounded = 64;
    // More than the machine has could only "succeed" by overcommit and end in the OOM killer.
    check_host_capacity("", bytes);
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw AllocationError("out of host memory allocating " + byte_size_text(bytes));
    return p;
  }
  void free(void* p) override { std::free(p); }
  std::shared_ptr<void> alloc_exported(size_t bytes) override {
    return std::shared_ptr<void>(alloc(bytes), [](void* p) { std::free(p); });  // needs no backend
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { if (bytes) std::memcpy(dst, src, bytes); }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { if (bytes) std::memcpy(dst, src, bytes); }
  void copy_within(void* dst, const void* src, size_t bytes) override { if (bytes) std::memmove(dst, src, bytes); }
  void* stream() override { return nullptr; }
  void synchronize() override {}
  double elapsed_ms(const std::function<void()>& body) override {
    auto t0 = std::chrono::steady_clock::now();
    body();
    auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
};

BackendRegistrar cpu_registrar(
    Backend::CPU, [] { return std::unique_ptr<BackendImpl>(new CpuBackend()); },
    [](std::string*) { return true; });
}  // namespace

}  // namespace fuseopt
