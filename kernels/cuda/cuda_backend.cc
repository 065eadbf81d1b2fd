// The CUDA backend: device memory from a caching pool (cudaMalloc only when
// the pool has no block of the size class), copies and kernels on one
// non-blocking stream, CUDA graphs for capture/replay, CUDA events for timing.
// It registers itself; its probe fails with the CUDA runtime's reason when no
// usable GPU is present, so machines without a GPU skip it cleanly.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/float_convert.h"
#include "kernels/cuda/index_errors.h"
#include "runtime/backend.h"
#include "util/allocation.h"
#include "util/error.h"

namespace fuseopt {

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

// Size classes keep the number of distinct cached blocks small: 512-byte
// steps up to 1 MiB, 2 MiB steps above.
size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  if (bytes <= (size_t{1} << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

// A stream-ordered caching allocator for one stream: a block freed on the
// host can be handed out again at once, because every later use of it is
// enqueued on the same stream after the work that used it before.
class DevicePool {
 public:
  ~DevicePool() { release_cached(); }

  void* alloc(size_t bytes) {
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    auto& list = free_[cls];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      live_[p] = cls;
      return p;
    }
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, cls);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state of a failed malloc
      release_cached_locked();
      e = cudaMalloc(&p, cls);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw AllocationError("out of GPU memory allocating " + byte_size_text(bytes) + " (" +
                            byte_size_text(reserved_, false) + " already reserved): " + cudaGetErrorString(e));
    }
    reserved_ += cls;
    live_[p] = cls;
    return p;
  }

  void free(void* p) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours: ignore rather than corrupt the pool
    free_[it->second].push_back(p);
    live_.erase(it);
  }

  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

 private:
  void release_cached_locked() {
    cudaDeviceSynchronize();
    for (auto& [cls, list] : free_) {
      for (void* p : list) {
        cudaFree(p);
        reserved_ -= cls;
      }
      list.clear();
    }
  }

  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> live_;
  size_t reserved_ = 0;
};

// Makes `device` current for a scope (a deleter may run on any thread, with
// another device current).
struct DeviceScope {
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    int now = -1;
    if (prev_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != prev_) cudaSetDevice(prev_);
  }
  int prev_ = -1;
};

// Recycles the blocks of Session::run_device's outputs. A generation loop hands each step's
// presents back as the next step's pasts and drops them a step later; freeing each with
// cudaDeviceSynchronize + cudaFree and allocating the next with cudaMalloc cost more than the
// step's kernels (session 13). A dropped block waits in `pending_` (its consumer may still use
// it on any stream); the first allocation that wants one synchronizes the device once and moves
// every pending block to `free_`. Shared by the backend and every block's deleter, because a
// block may outlive the backend. At most kMaxCached bytes wait; beyond that a block is freed.
class ExportCache {
 public:
  explicit ExportCache(int device) : device_(device) {}
  ~ExportCache() {
    DeviceScope on(device_);
    if (!pending_.empty()) cudaDeviceSynchronize();
    for (auto* list : {&free_, &pending_})
      for (auto& [size, p] : *list) cudaFree(p);
  }

  // A block of at least `bytes`, and its size; nullptr when none is cached.
  void* take(size_t bytes, size_t* size) {
    const size_t cls = size_class(bytes);
    // A block up to a quarter larger (or 2 MiB) serves: a cache that grows by a row a step
    // keeps taking the same blocks.
    const size_t most = cls + std::max(cls / 4, size_t{2} << 20);
    std::lock_guard<std::mutex> lock(mu_);
    for (int round = 0; round < 2; ++round) {
      auto it = free_.lower_bound(cls);
      if (it != free_.end() && it->first <= most) {
        void* p = it->second;
        *size = it->first;
        cached_ -= it->first;
        free_.erase(it);
        return p;
      }
      auto pend = pending_.lower_bound(cls);
      if (round == 1 || pend == pending_.end() || pend->first > most) return nullptr;
      DeviceScope on(device_);
      cudaDeviceSynchronize();  // every consumer of every pending block is done
      free_.insert(pending_.begin(), pending_.end());
      pending_.clear();
    }
    return nullptr;
  }

  void give_back(void* p, size_t size) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + size <= kMaxCached) {
        pending_.emplace(size, p);
        cached_ += size;
        return;
      }
    }
    DeviceScope on(device_);
    cudaDeviceSynchronize();
    cudaFree(p);
  }

  // Everything cached back to the device (an allocation that failed may need the room).
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceScope on(device_);
    cudaDeviceSynchronize();
    for (auto* list : {&free_, &pending_}) {
      for (auto& [size, p] : *list) cudaFree(p);
      list->clear();
    }
    cached_ = 0;
  }

 private:
  static constexpr size_t kMaxCached = size_t{4} << 30;
  const int device_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_, pending_;
  size_t cached_ = 0;
};

struct CapturedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~CapturedGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

class CudaBackend final : public BackendImpl {
 public:
  CudaBackend() {
    cuda_check(cudaGetDevice(&device_), "cudaGetDevice");
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ")";
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop_), "cudaEventCreate");
    cuda::attach_index_errors(stream_);  // the stream's out-of-range index slot
    exports_ = std::make_shared<ExportCache>(device_);
  }
  ~CudaBackend() override {
    if (stream_) cudaStreamSynchronize(stream_);
    if (stream_) cuda::detach_index_errors(stream_);
    pool_.release_cached();
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Backend kind() const override { return Backend::CUDA; }
  std::string device_name() const override { return name_; }

  void* alloc(size_t bytes) override {
    void* p = pool_.alloc(bytes);
    // Debugging aid: FUSEOPT_CUDA_POISON=1 fills every block handed out with
    // 0xFF bytes (NaN in every float type), so a kernel that reads memory
    // nobody wrote produces NaN at once (see fuserun --compare-cpu).
    static const bool poison = [] {
      const char* e = std::getenv("FUSEOPT_CUDA_POISON");
      return e && e[0] == '1';
    }();
    if (poison && p && bytes) cuda_check(cudaMemsetAsync(p, 0xFF, bytes, stream_), "poison");
    return p;
  }
  void free(void* p) override { pool_.free(p); }
  int device_ordinal() const override { return device_; }

  // Outside the pool: the caller's consumer may read the block on another
  // stream after this backend is gone. Recycled through ExportCache, which
  // synchronizes the device before a dropped block is handed out again.
  std::shared_ptr<void> alloc_exported(size_t bytes) override {
    DeviceScope on(device_);
    size_t size = 0;
    void* p = exports_->take(bytes, &size);
    if (!p) {
      size = size_class(bytes);
      cudaError_t e = cudaMalloc(&p, size);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        pool_.release_cached();  // cached blocks of this session may be what is missing
        exports_->release();
        e = cudaMalloc(&p, size);
      }
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        throw AllocationError("out of GPU memory allocating an output of " + byte_size_text(bytes) + ": " +
                              cudaGetErrorString(e));
      }
    }
    return std::shared_ptr<void>(p, [cache = exports_, size](void* q) { cache->give_back(q, size); });
  }

  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    cuda_check(cudaStreamSynchronize(stream_), "copy to host (synchronize)");
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    if (!bytes) return;
    // Pageable source: the call returns once the source has been staged, so
    // the caller may reuse it; ordering on the stream is kept.
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy from host");
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    if (!bytes || dst == src) return;
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "device copy");
  }
  bool convert_float(void* dst, DType to, const void* src, DType from, int64_t n) override {
    if (!cuda::launch_float_convert(dst, to, src, from, n, stream_)) return false;
    cuda_check(cudaGetLastError(), "float conversion");
    return true;
  }
  void* stream() override { return stream_; }
  void synchronize() override { cuda_check(cudaStreamSynchronize(stream_), "synchronize"); }
  void reset_device_errors() override { cuda::reset_index_errors(stream_); }
  void raise_device_errors() override { cuda::raise_index_errors(stream_); }

  bool supports_capture() const override { return true; }

  std::shared_ptr<void> capture(const std::function<void()>& body) override {
    auto g = std::make_shared<CapturedGraph>();
    // Relaxed: a first-time pool allocation inside the body must not abort
    // the capture (cudaMalloc is not recorded, only kernels and copies are).
    cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    try {
      body();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream_, &broken);
      if (broken) cudaGraphDestroy(broken);
      (void)cudaGetLastError();
      throw;
    }
    cuda_check(cudaStreamEndCapture(stream_, &g->graph), "cudaStreamEndCapture");
    cuda_check(cudaGraphInstantiate(&g->exec, g->graph, 0), "cudaGraphInstantiate");
    return std::static_pointer_cast<void>(g);
  }

  void replay(const std::shared_ptr<void>& handle) override {
    FUSE_CHECK(handle, "replay of an empty CUDA graph");
    auto* g = static_cast<CapturedGraph*>(handle.get());
    cuda_check(cudaGraphLaunch(g->exec, stream_), "cudaGraphLaunch");
  }

  double elapsed_ms(const std::function<void()>& body) override {
    cuda_check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    body();
    cuda_check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  int device_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  DevicePool pool_;
  std::shared_ptr<ExportCache> exports_;  // made once device_ is known
};

bool cuda_usable(std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  return true;
}

BackendRegistrar cuda_registrar(
    Backend::CUDA, [] { return std::unique_ptr<BackendImpl>(new CudaBackend()); }, cuda_usable);

}  // namespace

}  // namespace fuseopt
