// Programmatic dependent launch: the switch (FUSEOPT_PDL) and the per-device
// support check. See pdl.h.
#include "kernels/cuda/pdl.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace fuseopt::cuda_pdl {

namespace {

constexpr int kMaxDevices = 64;

// Per device: 0 = not probed yet, 1 = supported, 2 = not supported / disabled.
std::atomic<int> g_support[kMaxDevices];
// -1: environment; 0 / 1: forced by set_override.
std::atomic<int> g_override{-1};

bool env_on() {
  static const bool on = [] {
    const char* e = std::getenv("FUSEOPT_PDL");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

int probe(int device) {
  int major = 0, driver = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDriverGetVersion(&driver) != cudaSuccess) {
    (void)cudaGetLastError();
    return 2;
  }
  // griddepcontrol needs sm_90; programmatic edges in captured graphs need a
  // CUDA 12.3 driver. Older devices would ignore the attribute, but a plain
  // launch is the documented no-op, so they get that.
  return (major >= 9 && driver >= 12030) ? 1 : 2;
}

}  // namespace

bool trigger_first_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FUSEOPT_PDL_TRIGGER_FIRST");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

bool enabled() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o == 0 || (o < 0 && !env_on())) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (device < 0 || device >= kMaxDevices) return false;
  int s = g_support[device].load(std::memory_order_relaxed);
  if (s == 0) {
    s = probe(device);
    g_support[device].store(s, std::memory_order_relaxed);
  }
  return s == 1;
}

bool capture_allows(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  size_t n = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (status != cudaStreamCaptureStatusActive) return true;
  if (n == 0) return false;  // the graph's first node: nothing before it
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType t;
    if (cudaGraphNodeGetType(deps[i], &t) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    if (t != cudaGraphNodeTypeKernel) return false;
  }
  return true;
}

void set_override(int mode) { g_override.store(mode < 0 ? -1 : (mode ? 1 : 0), std::memory_order_relaxed); }

void disable_for_device(int device, int error_code) {
  if (device < 0 || device >= kMaxDevices) return;
  if (g_support[device].exchange(2) != 2)
    spdlog::warn("CUDA device {}: a launch with programmatic dependent launch failed ({}); "
                 "fuseopt's kernels use normal launches from now on",
                 device, cudaGetErrorString(static_cast<cudaError_t>(error_code)));
}

}  // namespace fuseopt::cuda_pdl
