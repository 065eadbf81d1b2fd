// See float_convert.h. Eight elements per thread through 16/32-byte vectors
// where the pointers allow it: a pass over the output is then bound by HBM
// bandwidth, not by instruction issue.
#include "kernels/cuda/float_convert.h"

#include "kernels/cuda/cuda_common.cuh"  // grid_for
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda {
namespace {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class D> __device__ __forceinline__ D from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) {
  if (isfinite(v)) v = fminf(65504.f, fmaxf(-65504.f, v));
  return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  constexpr float kMax = 3.38953139e38f;  // largest finite bfloat16
  if (isfinite(v)) v = fminf(kMax, fmaxf(-kMax, v));
  return __float2bfloat16_rn(v);
}

constexpr int kVec = 8;  // kThreads (256) from cuda_common.cuh

template <class D, class S>
__global__ void convert_kernel(D* __restrict__ y, const S* __restrict__ x, int64_t n, bool vec) {
  // Programmatic dependent launch (kernels/cuda/pdl.cuh): the output
  // conversion at the end of a run overlaps the last kernel's tail.
  cuda_pdl::pdl_begin();
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  int64_t i0 = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * kVec;
  if (vec) {
    struct alignas(sizeof(S) * kVec) SV { S v[kVec]; };
    struct alignas(sizeof(D) * kVec) DV { D v[kVec]; };
    for (; i0 + kVec <= n; i0 += stride * kVec) {
      const SV s = *reinterpret_cast<const SV*>(x + i0);
      DV d;
#pragma unroll
      for (int k = 0; k < kVec; ++k) d.v[k] = from_f<D>(to_f(s.v[k]));
      *reinterpret_cast<DV*>(y + i0) = d;
    }
    // The tail (< 8 elements) falls through to the scalar loop below.
  }
  for (; i0 < n; i0 += stride * kVec)
    for (int64_t i = i0; i < min(n, i0 + kVec); ++i) y[i] = from_f<D>(to_f(x[i]));
}

template <class D, class S> void launch(void* y, const void* x, int64_t n, cudaStream_t stream) {
  const bool vec = reinterpret_cast<uintptr_t>(y) % (sizeof(D) * kVec) == 0 &&
                   reinterpret_cast<uintptr_t>(x) % (sizeof(S) * kVec) == 0;
  cuda_pdl::pdl_launch(convert_kernel<D, S>, dim3(grid_for((n + kVec - 1) / kVec, kThreads)), dim3(kThreads), 0,
                       stream, static_cast<D*>(y), static_cast<const S*>(x), n, vec);
}

template <class S> bool dispatch_to(void* y, DType to, const void* x, int64_t n, cudaStream_t st) {
  switch (to) {
    case DType::Float: launch<float, S>(y, x, n, st); return true;
    case DType::Float16: launch<__half, S>(y, x, n, st); return true;
    case DType::BFloat16: launch<__nv_bfloat16, S>(y, x, n, st); return true;
    default: return false;
  }
}

}  // namespace

bool launch_float_convert(void* y, DType to, const void* x, DType from, int64_t n, void* stream) {
  if (n <= 0) return true;
  auto st = static_cast<cudaStream_t>(stream);
  switch (from) {
    case DType::Float: return dispatch_to<float>(y, to, x, n, st);
    case DType::Float16: return dispatch_to<__half>(y, to, x, n, st);
    case DType::BFloat16: return dispatch_to<__nv_bfloat16>(y, to, x, n, st);
    default: return false;
  }
}

}  // namespace fuseopt::cuda
