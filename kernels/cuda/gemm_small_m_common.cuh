// Device and host helpers shared by the weight-streaming GEMV kernels
// (gemm_small_m.cu: plain and [K, N] gated; gemv_nk_fused.cu: the [N, K]
// kernels with a norm prologue or a gate epilogue): 16-bit unpacking, the
// epilogue activations, the vector store, and the launch with PDL and an
// optional cluster dimension. nvcc only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
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

// n consecutive outputs (n = 8 or 4): alpha · v + bias, the activation, one
// rounding, one 16- or 8-byte store.
template <class T, int NV>
__device__ __forceinline__ void store_out(T* y, const T* bias, const float* v, GemvAct act, float alpha) {
  Vec<T, NV> o;
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const float b = bias ? to_f(bias[j]) : 0.f;
    o.v[j] = from_f<T>(activate<T>(act, alpha * v[j] + b));
  }
  *reinterpret_cast<Vec<T, NV>*>(y) = o;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Weight reads before the programmatic-launch wait. A decode step's GEMV follows a kernel
// that runs a few microseconds on a fraction of the GPU (a norm, the rotary, the attention of
// one token); its weights are constants no kernel writes, so once its blocks are resident
// (PDL: as soon as the previous kernel's blocks all are) they can request them at once and
// overlap that kernel instead of starting the stream when it ends (NOTES-perf.md v16).
//   early: the block's first weight loads go out before pdl_wait() (registers);
//   l2_stride / l2_waves: thread 0 also asks the L2 for the weights of the blocks l2_stride,
//   2 l2_stride, ... l2_waves strides on (the blocks of later waves, not resident yet): a block
//   of the first wave for every later wave up to l2_waves, any later block for the one wave
//   l2_waves on, so each block's weights are requested once, about l2_waves waves early.
struct WeightPrefetch {
  bool early = false;
  int l2_stride = 0;  // 0: no L2 prefetch
  int l2_waves = 0;
};

// FUSEOPT_GEMV_PREFETCH: "0" none, unset or "1" the early register loads, "2" those and the L2
// prefetch of later waves. Applies only where the caller proved B constant (b_const). H200,
// Llama-1B-shaped decode step (session 11, call 1, two runs each): 1 x 128 0.859 / 0.846 / 0.867
// ms for 0 / 1 / 2, 1 x 2048 1.158 / 1.140 / 1.147, 8 x 128 1.064 / 1.066 / 1.064: the L2
// requests compete with the stream they were meant to feed.
inline int weight_prefetch_mode() {
  static const int v = [] {
    const char* e = std::getenv("FUSEOPT_GEMV_PREFETCH");
    const int n = e && *e ? std::atoi(e) : 1;
    return n >= 0 && n <= 2 ? n : 1;
  }();
  return v;
}

// The plan for a grid of `blocks` blocks of which about `resident` run at once, each reading
// `block_bytes` of weights: the L2 prefetch stays within a quarter of a 50 MB L2 so the lines
// are still there when their blocks start.
inline WeightPrefetch plan_weight_prefetch(bool b_const, int blocks, int resident, size_t block_bytes) {
  WeightPrefetch wp;
  const int mode = b_const ? weight_prefetch_mode() : 0;
  if (mode == 0) return wp;
  wp.early = true;
  if (mode < 2 || resident <= 0 || blocks <= resident || block_bytes == 0 || block_bytes >= (size_t(1) << 31))
    return wp;
  constexpr size_t kL2Budget = size_t(12) << 20;
  const size_t wave_bytes = size_t(resident) * block_bytes;
  const int waves_left = (blocks - 1) / resident;  // waves after the first
  const int waves = static_cast<int>(std::min<size_t>(size_t(waves_left), std::max<size_t>(1, kL2Budget / wave_bytes)));
  wp.l2_stride = resident;
  wp.l2_waves = waves;
  return wp;
}

// One bulk request for `bytes` (a multiple of 16, 16-byte aligned) into the L2; no registers,
// no completion to wait for.
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

// The L2 part of WeightPrefetch for the [N, K] kernels: block b's weights are the kColsT rows
// from b kColsT (and, gated, as many from N + b kColsT); thread 0 requests them for the later
// blocks as the struct says.
template <class T, bool GATED>
__device__ __forceinline__ void prefetch_later_blocks(const T* B, int N, int K, const WeightPrefetch& wp) {
  if (wp.l2_stride <= 0 || threadIdx.x != 0) return;
  const unsigned bytes = unsigned(kColsT) * unsigned(K) * unsigned(sizeof(T));
  const int first = int(blockIdx.x) < wp.l2_stride ? 1 : wp.l2_waves;
  for (int w = first; w <= wp.l2_waves; ++w) {
    const int64_t b = int64_t(blockIdx.x) + int64_t(w) * wp.l2_stride;
    if (b >= int64_t(gridDim.x)) break;
    prefetch_l2(B + b * kColsT * K, bytes);
    if (GATED) prefetch_l2(B + (int64_t(N) + b * kColsT) * K, bytes);
  }
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

// Blocks of `kernel` (kThreads threads, smem bytes of dynamic shared memory) the GPU holds at
// once: the wave WeightPrefetch's L2 stride walks. Remembered for the last smem size asked
// (per kernel; the launches that ask are not the graph replays); 0 where the runtime cannot tell.
template <class... Params>
int resident_blocks(void (*kernel)(Params...), size_t smem) {
  static std::atomic<long long> last{-1};  // smem << 24 | blocks
  const long long l = last.load(std::memory_order_relaxed);
  if (l >= 0 && static_cast<size_t>(l >> 24) == smem) return static_cast<int>(l & 0xffffff);
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  const int blocks = std::min(per_sm * device_info().sms, 0xffffff);
  last.store(static_cast<long long>(smem) << 24 | blocks, std::memory_order_relaxed);
  return blocks;
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
