// The device half of the CUDA helper stack (nvcc only), shared by every CUDA
// kernel (the generic ops see it through cuda_common.cuh): conversions between
// the storage types and their arithmetic type, 16-byte vector access, warp and
// block reductions, GELU, and the dispatch over the float storage types.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "ir/tensor.h"
#include "kernels/common/gelu_erf_poly.h"
#include "util/error.h"

namespace fuseopt::cuda_fused {

// ---- element types ------------------------------------------------------------
// to_f / from_f: a float storage type to fp32 and back (round to nearest even).

template <class T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Arithmetic type of any storage type: fp16/bf16 compute in fp32, the others in
// themselves. load_c / store_c convert to and from it (to_f / from_f for halves).
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };
template <class T> using compute_t = typename ComputeOf<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> load_c(const T& v) { return v; }
template <> __device__ __forceinline__ float load_c<__half>(const __half& v) { return to_f(v); }
template <> __device__ __forceinline__ float load_c<__nv_bfloat16>(const __nv_bfloat16& v) { return to_f(v); }

template <class T, class C> __device__ __forceinline__ T store_c(C v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half store_c<__half, float>(float v) { return from_f<__half>(v); }
template <> __device__ __forceinline__ __nv_bfloat16 store_c<__nv_bfloat16, float>(float v) { return from_f<__nv_bfloat16>(v); }

// Any element as double (for Cast and mixed-type inputs).
template <class T> __device__ __forceinline__ double to_double(T v) { return static_cast<double>(v); }
template <> __device__ __forceinline__ double to_double<__half>(__half v) { return to_f(v); }
template <> __device__ __forceinline__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return to_f(v); }
template <> __device__ __forceinline__ double to_double<bool>(bool v) { return v ? 1.0 : 0.0; }

// N elements of T moved as one aligned access (N * sizeof(T) = 16 when vectorised).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }

// GELU (erf form) for a value stored as T: for 16-bit storage the polynomial form of
// kernels/common/gelu_erf_poly.h (one ex2 and ~8 FMA-pipe instructions; relative error
// <= 4.3e-6, far below fp16's half-ulp); erff for fp32 outputs.
template <class T> __device__ __forceinline__ float gelu_erf_for(float x) {
  if constexpr (sizeof(T) == 2) return dm::gelu_erf_poly(x);
  else return gelu_erf(x);
}

// ---- reductions (blockDim.x a multiple of 32, at most 1024) ----------------------
template <class T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}
// Sum over the block; every thread gets the result. `shm` holds 32 values.
template <class T> __device__ __forceinline__ T block_sum(T v, T* shm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shm` may still be read from a previous reduction
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? shm[lane] : T(0);
  return warp_sum(r);
}
template <class T> __device__ __forceinline__ T block_max(T v, T* shm, T lowest) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? shm[lane] : lowest;
  return warp_max(r);
}

// Two floats rounded to one 32-bit word of T pairs (the MMA kernels' fragments and stores:
// gemm_gelu.cu, the Hopper attention kernel).
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// ---- dispatch over the float storage types (host side) ---------------------------
template <class T> struct Tag { using type = T; };

// f(Tag<T>{}) with T the storage type of a float dtype (float, __half,
// __nv_bfloat16); false, calling nothing, for any other dtype.
template <class F> bool visit_gpu_float(DType t, F&& f) {
  switch (t) {
    case DType::Float: f(Tag<float>{}); return true;
    case DType::Float16: f(Tag<__half>{}); return true;
    case DType::BFloat16: f(Tag<__nv_bfloat16>{}); return true;
    default: return false;
  }
}

}  // namespace fuseopt::cuda_fused

// FUSED_DISPATCH_FLOAT(dt, T, body): body with T the storage type of dt (visit_gpu_float).
#define FUSED_DISPATCH_FLOAT(DT, T, ...)                                                                  \
  do {                                                                                                    \
    const ::fuseopt::DType fused_dt_ = (DT);                                                              \
    const bool fused_ok_ = ::fuseopt::cuda_fused::visit_gpu_float(fused_dt_, [&](auto fused_tag_) {       \
      using T = typename decltype(fused_tag_)::type;                                                      \
      __VA_ARGS__;                                                                                        \
    });                                                                                                   \
    FUSE_CHECK(fused_ok_, "fused CUDA kernel: unsupported dtype " << ::fuseopt::dtype_name(fused_dt_));   \
  } while (0)
