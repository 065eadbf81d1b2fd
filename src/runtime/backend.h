// What the Session needs from a device: memory, copies, a stream, and graph
// capture. The CPU backend lives in src/runtime; the CUDA backend registers
// itself from kernels/cuda when the library is built with CUDA, so the core
// never includes CUDA headers.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "runtime/kernel.h"

namespace fuseopt {

class BackendImpl {
 public:
  virtual ~BackendImpl() = default;
  virtual Backend kind() const = 0;
  virtual std::string device_name() const = 0;

  virtual void* alloc(size_t bytes) = 0;  // throws Error when out of memory
  virtual void free(void* p) = 0;
  virtual void copy_to_host(void* dst_host, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src_host, size_t bytes) = 0;
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;
  virtual void* stream() = 0;  // cudaStream_t, or nullptr
  virtual void synchronize() = 0;
  // The device this backend runs on (CUDA ordinal); -1 for the CPU.
  virtual int device_ordinal() const { return -1; }

  // Memory handed out of the Session (Session::run_device's outputs, which
  // the caller owns): it may outlive the Session and this backend, and other
  // streams may use it, so it does not come from the stream-ordered pool
  // behind alloc(). The block is freed when the last copy of the pointer
  // goes; the deleter first waits for the device to finish using it.
  virtual std::shared_ptr<void> alloc_exported(size_t bytes) = 0;

  // Enqueues dst[i] = src[i] converted between Float, Float16 and BFloat16
  // (n elements, both buffers on this device; narrowing keeps finite values
  // finite). false when the backend cannot: the caller converts on the host.
  virtual bool convert_float(void* dst, DType to, const void* src, DType from, int64_t n) { return false; }

  // Errors kernels meet on the device (an out-of-range Gather index), which
  // cannot throw there. The Session calls reset_device_errors() before a
  // run's work is enqueued (so it precedes a replayed graph) and
  // raise_device_errors() after the run's synchronize; it throws an Error
  // naming the node.
  virtual void reset_device_errors() {}
  virtual void raise_device_errors() {}

  // Graph capture (CUDA graphs). capture() records everything `body` enqueues
  // on stream() and returns a handle; replay() launches it again.
  virtual bool supports_capture() const { return false; }
  virtual std::shared_ptr<void> capture(const std::function<void()>& body) { return nullptr; }
  virtual void replay(const std::shared_ptr<void>& handle) {}

  // Timing with device events (ms); CPU uses wall clock.
  virtual double elapsed_ms(const std::function<void()>& body) = 0;
};

using BackendFactory = std::function<std::unique_ptr<BackendImpl>()>;
// `available` says whether the backend can run here; on false it sets *why.
using BackendProbe = std::function<bool(std::string* why)>;

void register_backend(Backend b, BackendFactory make, BackendProbe available);
bool backend_available(Backend b, std::string* why = nullptr);
std::unique_ptr<BackendImpl> make_backend(Backend b);  // throws Error if unavailable

struct BackendRegistrar {
  BackendRegistrar(Backend b, BackendFactory make, BackendProbe available) {
    register_backend(b, std::move(make), std::move(available));
  }
};

}  // namespace fuseopt
