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

}  // namespace fuseopt::cuda_fused

// Dispatch a templated launch over the three float storage types.
#define FUSED_DISPATCH_FLOAT(DT, T, ...)                                                  \
  switch (DT) {                                                                           \
    case ::fuseopt::DType::Float: { using T = float; __VA_ARGS__; break; }                \
    case ::fuseopt::DType::Float16: { using T = __half; __VA_ARGS__; break; }             \
    case ::fuseopt::DType::BFloat16: { using T = __nv_bfloat16; __VA_ARGS__; break; }     \
    default: FUSE_CHECK(false, "fused CUDA kernel: unsupported dtype " << ::fuseopt::dtype_name(DT)); \
  }
