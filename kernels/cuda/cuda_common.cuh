// Helpers shared by the generic CUDA kernels (kernels/cuda/*.cu): launch
// geometry, error checks naming the node, dtype dispatch (fp16/bf16 compute
// in fp32), and small by-value index descriptors so that no kernel needs a
// host-to-device copy of its parameters (everything stays capturable into a
// CUDA graph).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/dm_util.h"  // host-side helpers: inputs, read_ints, norm_axis, DM_CHECK
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda {

using dm::norm_axis;
using dm::opt_host_input;
using dm::opt_input;
using dm::read_ints;
using dm::req_input;
using dm::wants_output;

constexpr int kMaxDims = 10;
constexpr int kThreads = 256;

inline cudaStream_t stream_of(KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// Throws an Error naming the node when the last launch failed.
inline void check_launch(KernelContext& ctx, const char* what = "kernel") {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(ctx.node().label() + ": CUDA " + what + " failed: " + cudaGetErrorString(e));
}
inline void check_cuda(KernelContext& ctx, cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(ctx.node().label() + ": " + what + ": " + cudaGetErrorString(e));
}

// Grid for a grid-stride loop over n items: enough blocks to fill the chip,
// never more than the work needs.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  static const int sms = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return v;
  }();
  const int64_t need = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(need, int64_t{sms} * 16)));
}

#define CUDA_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

// ---- element types --------------------------------------------------------
// Arithmetic type of a storage type: fp16/bf16 compute in fp32.
template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };
template <class T> using compute_t = typename ComputeOf<T>::type;

template <class T> __device__ __forceinline__ compute_t<T> load_c(const T& v) { return v; }
template <> __device__ __forceinline__ float load_c<__half>(const __half& v) { return __half2float(v); }
template <> __device__ __forceinline__ float load_c<__nv_bfloat16>(const __nv_bfloat16& v) { return __bfloat162float(v); }

template <class T, class C> __device__ __forceinline__ T store_c(C v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half store_c<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 store_c<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

// Any element as float / double (for Cast and mixed-type inputs).
template <class T> __device__ __forceinline__ double to_double(T v) { return static_cast<double>(v); }
template <> __device__ __forceinline__ double to_double<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ double to_double<bool>(bool v) { return v ? 1.0 : 0.0; }

template <class T> struct Tag { using type = T; };

inline bool is_float_dtype(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16 || t == DType::Double;
}

inline std::string unsupported(KernelContext& ctx, DType t) {
  return ctx.node().label() + ": dtype " + dtype_name(t) + " is not supported by the CUDA kernel";
}

// f(Tag<T>) for the float storage types the GPU computes in (double only in Cast).
template <class F> void dispatch_float(KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::Float: return f(Tag<float>{});
    case DType::Float16: return f(Tag<__half>{});
    case DType::BFloat16: return f(Tag<__nv_bfloat16>{});
    default: throw Error(unsupported(ctx, t));
  }
}
// Float types plus the integer types exporters use for data (not shapes only).
template <class F> void dispatch_numeric(KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::Float: return f(Tag<float>{});
    case DType::Float16: return f(Tag<__half>{});
    case DType::BFloat16: return f(Tag<__nv_bfloat16>{});
    case DType::Int64: return f(Tag<int64_t>{});
    case DType::Int32: return f(Tag<int32_t>{});
    case DType::Int8: return f(Tag<int8_t>{});
    case DType::UInt8: return f(Tag<uint8_t>{});
    default: throw Error(unsupported(ctx, t));
  }
}
// Numeric plus bool.
template <class F> void dispatch_all(KernelContext& ctx, DType t, F&& f) {
  if (t == DType::Bool) return f(Tag<bool>{});
  dispatch_numeric(ctx, t, std::forward<F>(f));
}
// Data movement only cares about the element size.
template <class F> void dispatch_bytes(KernelContext& ctx, DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    case 8: return f(Tag<uint64_t>{});
    default: throw Error(unsupported(ctx, t));
  }
}

// ---- index descriptors ----------------------------------------------------
// Row-major shape and per-input strides, passed by value to kernels.
template <int N> struct BcastIndex {
  int rank = 0;
  // Every index and offset fits in 32 bits: 64-bit division costs several
  // times more than the memory traffic of these kernels.
  bool small = false;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];

  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    if (small) {
      uint32_t ii = static_cast<uint32_t>(i);
      int32_t o[N];
#pragma unroll
      for (int k = 0; k < N; ++k) o[k] = 0;
      for (int d = rank - 1; d >= 0; --d) {
        const uint32_t s = static_cast<uint32_t>(shape[d]);
        const uint32_t q = ii / s;
        const int32_t r = static_cast<int32_t>(ii - q * s);
        ii = q;
#pragma unroll
        for (int k = 0; k < N; ++k) o[k] += r * static_cast<int32_t>(strides[k][d]);
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = o[k];
      return;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t s = shape[d];
      const int64_t q = i / s;
      const int64_t r = i - q * s;
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
  }
};

// Broadcast output shape; throws naming the node.
inline std::vector<int64_t> broadcast_shapes(KernelContext& ctx, const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t lead = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[lead + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " vs ") + shape_str(t);
      throw Error(ctx.node().label() + ": shapes cannot be broadcast: " + all);
    }
  }
  return out;
}

// Builds an index over `out` where input k (shape ins[k], dense) is read with
// broadcast strides; or, with explicit strides, any strided view. Size-1 dims
// are dropped and dims that are contiguous for every input are merged, so
// most cases end with rank 1 to 3.
template <int N>
BcastIndex<N> make_index(KernelContext& ctx, const std::vector<int64_t>& out,
                         const std::vector<std::vector<int64_t>>& strides_in) {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> st(N);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    shape.push_back(out[d]);
    for (int k = 0; k < N; ++k) st[k].push_back(strides_in[k][d]);
  }
  // Merge dim d into d-1 when every input walks them as one.
  std::vector<int64_t> ms;
  std::vector<std::vector<int64_t>> mst(N);
  for (size_t d = 0; d < shape.size(); ++d) {
    bool merge = !ms.empty();
    for (int k = 0; k < N && merge; ++k) merge = mst[k].back() == st[k][d] * shape[d];
    if (merge) {
      ms.back() *= shape[d];
      for (int k = 0; k < N; ++k) mst[k].back() = st[k][d];
    } else {
      ms.push_back(shape[d]);
      for (int k = 0; k < N; ++k) mst[k].push_back(st[k][d]);
    }
  }
  FUSE_CHECK(ms.size() <= static_cast<size_t>(kMaxDims),
             ctx.node().label() << ": rank " << ms.size() << " after merging dims exceeds the CUDA kernels' limit of "
                                << kMaxDims);
  BcastIndex<N> ix;
  ix.rank = static_cast<int>(ms.size());
  constexpr int64_t kLimit = int64_t{1} << 31;
  int64_t total = 1;
  std::vector<int64_t> span(N, 0);  // largest |offset| per input
  for (int d = 0; d < ix.rank; ++d) {
    ix.shape[d] = ms[d];
    total *= ms[d];
    for (int k = 0; k < N; ++k) {
      ix.strides[k][d] = mst[k][d];
      span[k] += (ms[d] - 1) * (mst[k][d] < 0 ? -mst[k][d] : mst[k][d]);
    }
  }
  ix.small = total < kLimit;
  for (int k = 0; k < N; ++k) ix.small = ix.small && span[k] < kLimit;
  return ix;
}

// Strides of dense `in` read as broadcast to `out` (0 on broadcast dims).
inline std::vector<int64_t> bcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t i = in.size() - 1 - k, o = out.size() - 1 - k;
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

inline std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) { return dm::dense_strides(shape); }

// Small fixed arrays by value.
struct I64s {
  int64_t v[kMaxDims];
};
inline I64s to_i64s(KernelContext& ctx, const std::vector<int64_t>& v) {
  FUSE_CHECK(v.size() <= static_cast<size_t>(kMaxDims),
             ctx.node().label() << ": rank " << v.size() << " exceeds the CUDA kernels' limit of " << kMaxDims);
  I64s r{};
  for (size_t i = 0; i < v.size(); ++i) r.v[i] = v[i];
  return r;
}

// Row-wise reduction helpers (blockDim.x a multiple of 32, at most 1024).
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
  __syncthreads();
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

}  // namespace fuseopt::cuda
