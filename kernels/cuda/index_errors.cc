// Host side of the device-side index error reports (see index_errors.h):
// per-stream slots owned by the CUDA backend, and the site table that maps a
// report back to the node that launched the kernel.
#include "kernels/cuda/index_errors.h"

#include <cuda_runtime.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda {
namespace {

struct Slot {
  unsigned int* gate = nullptr;         // device memory
  IndexErrorRecord* host = nullptr;     // mapped pinned memory, host address
  IndexErrorRecord* device = nullptr;   // the same memory, device address
};

struct Registry {
  std::mutex mu;
  std::unordered_map<void*, Slot> slots;  // by stream
  std::vector<std::string> sites;         // site id - 1 -> node label
  std::unordered_map<std::string, int32_t> site_ids;
};

// Never destroyed: backends held in static objects may detach after the
// other statics of this library are gone.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
  }
}

}  // namespace

IndexErrorSink index_error_sink(KernelContext& ctx) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.slots.find(ctx.stream());
  if (it == r.slots.end()) return {nullptr, nullptr, 0};
  auto [site, inserted] = r.site_ids.try_emplace(ctx.node().label(), 0);
  if (inserted) {
    r.sites.push_back(site->first);
    site->second = static_cast<int32_t>(r.sites.size());
  }
  return {it->second.gate, it->second.device, site->second};
}

void attach_index_errors(void* stream) {
  Slot s;
  cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&s.gate), sizeof(unsigned int));
  if (e == cudaSuccess) e = cudaHostAlloc(reinterpret_cast<void**>(&s.host), sizeof(IndexErrorRecord), cudaHostAllocMapped);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.device), s.host, 0);
  if (e == cudaSuccess) e = cudaMemsetAsync(s.gate, 0, sizeof(unsigned int), static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess) e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) {  // no slot: the stream's kernels skip reporting, the backend still works
    (void)cudaGetLastError();
    cudaFree(s.gate);
    if (s.host) cudaFreeHost(s.host);
    return;
  }
  *s.host = IndexErrorRecord{0, 0, 0, 0};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.slots[stream] = s;
}

void detach_index_errors(void* stream) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.slots.find(stream);
  if (it == r.slots.end()) return;
  cudaFree(it->second.gate);
  cudaFreeHost(it->second.host);
  r.slots.erase(it);
}

void reset_index_errors(void* stream) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.slots.find(stream);
  if (it == r.slots.end()) return;
  // The previous run ended with a synchronization: no kernel writes the
  // record now, and the gate's reset precedes every kernel of this run.
  static_cast<volatile IndexErrorRecord*>(it->second.host)->site = 0;
  check(cudaMemsetAsync(it->second.gate, 0, sizeof(unsigned int), static_cast<cudaStream_t>(stream)),
        "index error reset (cudaMemsetAsync)");
}

void raise_index_errors(void* stream) {
  Registry& r = registry();
  std::string label;
  int64_t index = 0, dim = 0;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.slots.find(stream);
    if (it == r.slots.end()) return;
    volatile IndexErrorRecord* rec = it->second.host;
    const int32_t site = rec->site;
    if (site == 0) return;
    index = rec->index;
    dim = rec->dim;
    rec->site = 0;  // reported once; the gate stays closed until the next reset
    label = site >= 1 && static_cast<size_t>(site) <= r.sites.size() ? r.sites[site - 1] : "a CUDA kernel";
  }
  if (dim <= 0) throw Error(label + ": index " + std::to_string(index) + " out of range (the indexed dim is empty)");
  throw Error(label + ": index " + std::to_string(index) + " out of range [" + std::to_string(-dim) + ", " +
              std::to_string(dim - 1) + "]");
}

}  // namespace fuseopt::cuda
