// Device-side helpers for the fused kernels (nvcc only): conversions between
// the storage types and fp32, and 16-byte vector access.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace fuseopt::cuda_fused {

template <class T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// N elements of T moved as one aligned access (N * sizeof(T) = 16 when vectorised).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }

// erf by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 absolute, one exp,
// no branches): several times fewer instructions than erff, whose branchy
// polynomial made the erf-GELU pass compute-bound. Used where the result is
// stored as fp16/bf16 (ulp >= 1e-3 relative), never for fp32 outputs.
__device__ __forceinline__ float erf_as(float x) {
  const float ax = fabsf(x);
  const float t = __fdividef(1.f, fmaf(0.3275911f, ax, 1.f));
  float poly = fmaf(1.061405429f, t, -1.453152027f);
  poly = fmaf(poly, t, 1.421413741f);
  poly = fmaf(poly, t, -0.284496736f);
  poly = fmaf(poly, t, 0.254829592f);
  const float r = 1.f - poly * t * __expf(-ax * ax);
  return copysignf(r, x);
}

// GELU (erf form) for a value stored as T: the fast erf for 16-bit storage.
template <class T> __device__ __forceinline__ float gelu_erf_for(float x) {
  if constexpr (sizeof(T) == 2) return 0.5f * x * (1.f + erf_as(x * 0.70710678118654752f));
  else return gelu_erf(x);
}

}  // namespace fuseopt::cuda_fused

// Dispatch a templated launch over the three float storage types.
#define FUSED_DISPATCH_FLOAT(DT, T, ...)                                                  \
  switch (DT) {                                                                           \
    case ::fuseopt::DType::Float: { using T = float; __VA_ARGS__; break; }                \
    case ::fuseopt::DType::Float16: { using T = __half; __VA_ARGS__; break; }             \
    case ::fuseopt::DType::BFloat16: { using T = __nv_bfloat16; __VA_ARGS__; break; }     \
    default: FUSE_CHECK(false, "fused CUDA kernel: unsupported dtype " << ::fuseopt::dtype_name(DT)); \
  }
