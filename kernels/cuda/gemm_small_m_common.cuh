// Device and host helpers shared by the weight-streaming GEMV kernels
// (gemm_small_m.cu: plain and [K, N] gated; gemv_nk_fused.cu: the [N, K]
// kernels with a norm prologue or a gate epilogue): 16-bit unpacking, the
// epilogue activations, the vector store, and the launch with PDL and an
// optional cluster dimension. nvcc only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/pdl.h"

namespace fuseopt::cuda_fused::small_m {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int kColsT = 4;  // [N, K]: columns (weight rows) per block

// 8 consecutive 16-bit values (one 16-byte load) as fp32.
template <class T> __device__ __forceinline__ void unpack8(const uint4& v, float* f);
template <> __device__ __forceinline__ void unpack8<__half>(const uint4& v, float* f) {
  const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
template <> __device__ __forceinline__ void unpack8<__nv_bfloat16>(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// The epilogue's activation in fp32; the CPU reference's formulas
// (kernels/cpu/fused_activation.h), the fast erf for 16-bit storage.
template <class T> __device__ __forceinline__ float activate(GemvAct act, float v) {
  switch (act) {
    case GemvAct::Relu: return v > 0.f ? v : 0.f;
    case GemvAct::GeluErf: return gelu_erf_for<T>(v);
    case GemvAct::GeluTanh: return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    case GemvAct::Tanh: return tanhf(v);
    case GemvAct::Relu2: return v > 0.f ? v * v : (v == v ? 0.f : v);  // squared ReLU; NaN stays NaN
    default: return v;
  }
}

// GatedMatMul's gate activations, as gated_matmul.cu's gate_act (fp32;
// ReLU keeps a NaN).
__device__ __forceinline__ float gate_activate(GateActivation a, float x) {
  switch (a) {
    case GateActivation::Silu: return x / (1.f + expf(-x));
    case GateActivation::Gelu: return gelu_erf(x);
    case GateActivation::GeluTanh: return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return x > 0.f ? x : (x == x ? 0.f : x);
  }
}

// n consecutive outputs (n = 8 or 4): alpha · v + bias, the activation, + the residual
// (FusedMatMul's input 3, the same positions of a tensor of Y's layout) where given, one
// rounding, one 16- or 8-byte store.
template <class T, int NV>
__device__ __forceinline__ void store_out(T* y, const T* bias, const float* v, GemvAct act, float alpha,
                                          const T* res = nullptr) {
  Vec<T, NV> o, r;
  if (res) r = *reinterpret_cast<const Vec<T, NV>*>(res);
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const float b = bias ? to_f(bias[j]) : 0.f;
    const float a = activate<T>(act, alpha * v[j] + b);
    o.v[j] = from_f<T>(res ? a + to_f(r.v[j]) : a);
  }
  *reinterpret_cast<Vec<T, NV>*>(y) = o;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Weight reads before the programmatic-launch wait. A decode step's GEMV follows a kernel
// that runs a few microseconds on a fraction of the GPU (a norm, the rotary, the attention of
// one token); its weights are constants no kernel writes, so once its blocks are resident
// (PDL: as soon as the previous kernel's blocks all are) they request their first weight
// chunk at once (early) and overlap that kernel instead of starting the stream when it ends
// (NOTES-perf.md v16). An L2 bulk prefetch of later waves' weights was measured too and lost
// (it competed with the stream it was meant to feed), so it is not here.
struct WeightPrefetch {
  bool early = false;
};

// FUSEOPT_GEMV_PREFETCH: "0" none, unset or "1" the early loads. Applies only where the caller
// proved B constant (b_const). H200, Llama-1B-shaped decode step (session 11, call 2, two runs
// each): 1 x 128 0.850 -> 0.840 ms, 1 x 2048 1.130 -> 1.122; bit-identical results.
inline WeightPrefetch plan_weight_prefetch(bool b_const) {
  static const bool on = [] {
    const char* e = std::getenv("FUSEOPT_GEMV_PREFETCH");
    return !(e && *e && std::atoi(e) == 0);
  }();
  return WeightPrefetch{b_const && on};
}

// Per-device facts, cached (device ordinals past 64 ask every time).
struct DeviceInfo {
  int sms = 0;
  bool clusters = false;
};
inline DeviceInfo device_info() {
  static std::atomic<int> cache[64];  // 0 = unknown, else sms * 2 + clusters
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  int v = dev >= 0 && dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    int sms = 0, cl = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return {};
    }
    v = sms * 2 + (cl ? 1 : 0);
    if (dev >= 0 && dev < 64) cache[dev].store(v, std::memory_order_relaxed);
  }
  return {v / 2, (v & 1) != 0};
}

// FUSEOPT_GEMV_BLOCKS_PER_SM (tuning, default 2): how many [K, N] blocks per
// SM the K split aims at.
inline int blocks_per_sm() {
  static const int v = [] {
    const char* e = std::getenv("FUSEOPT_GEMV_BLOCKS_PER_SM");
    const int n = e && *e ? std::atoi(e) : 2;
    return n >= 1 && n <= 32 ? n : 2;
  }();
  return v;
}

// pdl_launch with an optional cluster dimension (y = cluster_y) beside the
// PDL attribute. false: nothing launched (error cleared), use cuBLASLt.
template <class... Params, class... Args>
bool launch_ex(void (*kernel)(Params...), dim3 grid, size_t smem, unsigned cluster_y, cudaStream_t stream,
               Args... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_y > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 1;
    attr[n].val.clusterDim.y = cluster_y;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  const unsigned base = n;
  static std::atomic<bool> pdl_refused_with_cluster{false};
  const bool pdl = stream != nullptr && stream != cudaStreamLegacy && cuda_pdl::enabled() &&
                   !(cluster_y > 0 && pdl_refused_with_cluster.load(std::memory_order_relaxed)) &&
                   cuda_pdl::capture_allows(stream);
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  if (!pdl) return false;
  // As pdl_launch: if the launch works without PDL, PDL was the problem:
  // switched off for the device, or, beside a cluster dimension, only for
  // these cluster launches (the pair may be what the driver refused).
  cfg.numAttrs = base;
  if (cudaLaunchKernelEx(&cfg, kernel, args...) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  int device = 0;
  if (cluster_y > 0)
    pdl_refused_with_cluster.store(true, std::memory_order_relaxed);
  else if (cudaGetDevice(&device) == cudaSuccess)
    cuda_pdl::disable_for_device(device, static_cast<int>(e));
  return true;
}

}  // namespace fuseopt::cuda_fused::small_m
