// The generic CUDA kernels' view of the CUDA helper stack (kernels/cuda/*.cu):
// the host half (fused_common.h: errors, stream, SM count) and the device half
// (fused_device.cuh: element conversions, reductions, float dispatch) under
// the names these kernels use, plus what only they need: launch geometry,
// errors naming the node, dispatch over every data dtype, and small by-value
// index descriptors so that no kernel needs a host-to-device copy of its
// parameters (everything stays capturable into a CUDA graph).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/cpu/dm_util.h"  // host-side helpers: inputs, read_ints, norm_axis, DM_CHECK
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda {

using dm::broadcast_shape;
using dm::broadcast_strides;
using dm::norm_axis;
using dm::opt_host_input;
using dm::opt_input;
using dm::read_ints;
using dm::req_input;
using dm::wants_output;

using cuda_fused::block_max;
using cuda_fused::block_sum;
using cuda_fused::compute_t;
using cuda_fused::ComputeOf;
using cuda_fused::load_c;
using cuda_fused::store_c;
using cuda_fused::stream_of;
using cuda_fused::Tag;
using cuda_fused::to_double;
using cuda_fused::warp_max;
using cuda_fused::warp_sum;

constexpr int kMaxDims = 10;
constexpr int kThreads = 256;

// Throws an Error naming the node when the last launch failed.
inline void check_launch(KernelContext& ctx, const char* what = "kernel") {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) cuda_fused::throw_cuda_error(e, ctx.node().label(), std::string("CUDA ") + what + " failed");
}
inline void check_cuda(KernelContext& ctx, cudaError_t e, const char* what) {
  if (e != cudaSuccess) cuda_fused::throw_cuda_error(e, ctx.node().label(), what);
}

// Grid for a grid-stride loop over n items: enough blocks to fill the chip,
// never more than the work needs.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int sms = cuda_fused::sm_count();
  const int64_t need = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(need, int64_t{sms} * 16)));
}

#define CUDA_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

// ---- dtypes ------------------------------------------------------------------------
// The float types a kernel may compute in: the GPU's three, and double (Cast).
inline bool is_float_dtype(DType t) { return cuda_fused::is_gpu_float(t) || t == DType::Double; }

inline std::string unsupported(KernelContext& ctx, DType t) {
  return ctx.node().label() + ": dtype " + dtype_name(t) + " is not supported by the CUDA kernel";
}

// f(Tag<T>) for the float storage types the GPU computes in (double only in Cast).
template <class F> void dispatch_float(KernelContext& ctx, DType t, F&& f) {
  if (!cuda_fused::visit_gpu_float(t, std::forward<F>(f))) throw Error(unsupported(ctx, t));
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

using dm::dense_strides;

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

}  // namespace fuseopt::cuda
