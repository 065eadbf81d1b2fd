// Reductions (ReduceMean/Sum/Max/Min/Prod/SumSquare/L1/L2 over any axes) and
// Softmax/LogSoftmax on the GPU. Accumulation in fp32 for float types
// (int64 for integers); softmax subtracts the row max first.
// Layout: when the reduced axes are the innermost ones, one warp (short rows)
// or one block (long rows) reduces a contiguous row; otherwise one thread
// per output walks the reduced axes (adjacent threads read adjacent memory
// when the innermost axis is kept).
#include <cfloat>
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

enum class Red { Sum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSumExp };

template <class T> using acc_t = std::conditional_t<std::is_integral_v<compute_t<T>>, int64_t, float>;

template <Red OP, class A> __device__ __forceinline__ A red_init() {
  if constexpr (OP == Red::Max) {
    if constexpr (std::is_integral_v<A>) return INT64_MIN;
    else return -INFINITY;
  }
  if constexpr (OP == Red::Min) {
    if constexpr (std::is_integral_v<A>) return INT64_MAX;
    else return INFINITY;
  }
  if constexpr (OP == Red::Prod) return A(1);
  return A(0);
}
template <Red OP, class A> __device__ __forceinline__ A red_map(A v) {
  if constexpr (OP == Red::SumSquare || OP == Red::L2) return v * v;
  if constexpr (OP == Red::L1) return v < A(0) ? A(-v) : v;
  return v;
}
template <Red OP, class A> __device__ __forceinline__ A red_combine(A a, A b) {
  if constexpr (OP == Red::Max) {
    if constexpr (std::is_floating_point_v<A>) if (a != a || b != b) return NAN;
    return a > b ? a : b;
  } else if constexpr (OP == Red::Min) {
    if constexpr (std::is_floating_point_v<A>) if (a != a || b != b) return NAN;
    return a < b ? a : b;
  } else if constexpr (OP == Red::Prod) {
    return a * b;
  } else {
    return a + b;
  }
}
template <Red OP, class A> __device__ __forceinline__ A red_finish(A a, int64_t count) {
  if constexpr (OP == Red::Mean) {
    if constexpr (std::is_floating_point_v<A>) return a / A(count);
    else return count ? a / count : 0;
  }
  if constexpr (OP == Red::L2) {
    if constexpr (std::is_floating_point_v<A>) return sqrt(a);
    else return A(sqrt(double(a)));
  }
  return a;
}

template <Red OP, class A> __device__ __forceinline__ A warp_combine(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = red_combine<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per contiguous row of length R.
template <class T, Red OP>
__global__ void reduce_rows_warp(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t R) {
  using A = acc_t<T>;
  const int64_t warps_total = (int64_t)gridDim.x * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); row < rows; row += warps_total) {
    const T* p = x + row * R;
    A acc = red_init<OP, A>();
    for (int64_t j = lane; j < R; j += 32) acc = red_combine<OP>(acc, red_map<OP>(A(load_c(p[j]))));
    acc = warp_combine<OP>(acc);
    if (lane == 0) y[row] = store_c<T>(static_cast<compute_t<T>>(red_finish<OP>(acc, R)));
  }
}

// One block per contiguous row of length R.
template <class T, Red OP>
__global__ void reduce_rows_block(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t R) {
  using A = acc_t<T>;
  __shared__ A shm[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * R;
    A acc = red_init<OP, A>();
    for (int64_t j = threadIdx.x; j < R; j += blockDim.x) acc = red_combine<OP>(acc, red_map<OP>(A(load_c(p[j]))));
    acc = warp_combine<OP>(acc);
    __syncthreads();
    if (lane == 0) shm[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      A v = lane < nwarps ? shm[lane] : red_init<OP, A>();
      v = warp_combine<OP>(v);
      if (lane == 0) y[row] = store_c<T>(static_cast<compute_t<T>>(red_finish<OP>(v, R)));
    }
  }
}

// Kept dims (`kept`, strides into x) index the outputs; reduced dims
// (`red`) are walked by each thread.
struct ReduceGeom {
  int krank = 0, rrank = 0;
  int64_t kshape[kMaxDims], kstride[kMaxDims];
  int64_t rshape[kMaxDims], rstride[kMaxDims];
};

template <class T, Red OP>
__global__ void reduce_generic(const T* __restrict__ x, T* __restrict__ y, int64_t nout, int64_t R, ReduceGeom g) {
  using A = acc_t<T>;
  CUDA_GRID_STRIDE(o, nout) {
    int64_t base = 0, rem = o;
    for (int d = g.krank - 1; d >= 0; --d) {
      const int64_t q = rem / g.kshape[d];
      base += (rem - q * g.kshape[d]) * g.kstride[d];
      rem = q;
    }
    A acc = red_init<OP, A>();
    for (int64_t r = 0; r < R; ++r) {
      int64_t off = base, rr = r;
      for (int d = g.rrank - 1; d >= 0; --d) {
        const int64_t q = rr / g.rshape[d];
        off += (rr - q * g.rshape[d]) * g.rstride[d];
        rr = q;
      }
      acc = red_combine<OP>(acc, red_map<OP>(A(load_c(x[off]))));
    }
    y[o] = store_c<T>(static_cast<compute_t<T>>(red_finish<OP>(acc, R)));
  }
}

// log(sum(exp(x - max))) + max per output, one thread per output.
template <class T>
__global__ void reduce_lse_generic(const T* __restrict__ x, T* __restrict__ y, int64_t nout, int64_t R, ReduceGeom g) {
  CUDA_GRID_STRIDE(o, nout) {
    int64_t base = 0, rem = o;
    for (int d = g.krank - 1; d >= 0; --d) {
      const int64_t q = rem / g.kshape[d];
      base += (rem - q * g.kshape[d]) * g.kstride[d];
      rem = q;
    }
    auto at = [&](int64_t r) {
      int64_t off = base;
      for (int d = g.rrank - 1; d >= 0; --d) {
        const int64_t q = r / g.rshape[d];
        off += (r - q * g.rshape[d]) * g.rstride[d];
        r = q;
      }
      return float(load_c(x[off]));
    };
    float m = -INFINITY;
    for (int64_t r = 0; r < R; ++r) m = fmaxf(m, at(r));
    float s = 0.f;
    for (int64_t r = 0; r < R; ++r) s += expf(at(r) - m);
    y[o] = store_c<T>(static_cast<compute_t<T>>(logf(s) + m));
  }
}

template <class T> __global__ void copy_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  CUDA_GRID_STRIDE(i, n) { y[i] = x[i]; }
}

template <Red OP> void run_reduce(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  const Node& node = ctx.node();
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes;
  bool have_axes = false;
  if (const RtTensor* a = opt_host_input(ctx, 1)) {
    axes = read_ints(ctx, *a);
    have_axes = true;
  } else if (node.has_attr("axes")) {
    axes = node.attr_ints("axes");
    have_axes = true;
  }
  const bool keepdims = node.attr_int("keepdims", 1) != 0;
  const bool noop_empty = node.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(rank, false);
  if (axes.empty()) {
    if (noop_empty) {  // empty axes with noop_with_empty_axes: the identity
      RtTensor* y = ctx.output(0, x.dtype, x.shape);
      if (x.numel() == 0) return;
      dispatch_bytes(ctx, x.dtype, [&](auto tag) {
        using B = typename decltype(tag)::type;
        copy_kernel<B><<<grid_for(x.numel()), kThreads, 0, stream_of(ctx)>>>(x.ptr<B>(), y->ptr<B>(), x.numel());
      });
      check_launch(ctx);
      return;
    }
    std::fill(reduced.begin(), reduced.end(), true);
  } else {
    for (int64_t a : axes) reduced[norm_axis(ctx, a, rank)] = true;
  }
  std::vector<int64_t> out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) out_shape.push_back(x.shape[d]);
    else if (keepdims) out_shape.push_back(1);
  }
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t nout = shape_numel(out_shape);
  if (nout == 0) return;

  // Merge adjacent dims of the same kind; drop size-1 dims.
  const std::vector<int64_t> st = dense_strides(x.shape);
  std::vector<int64_t> ks, kst, rs, rst;
  int last_kind = -1;  // 0 kept, 1 reduced
  bool inner_reduced_only = true;  // reduced dims form one trailing block
  bool seen_reduced = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (x.shape[d] == 1) continue;
    const int kind = reduced[d] ? 1 : 0;
    auto& sh = kind ? rs : ks;
    auto& sd = kind ? rst : kst;
    if (kind == last_kind) {
      sh.back() *= x.shape[d];
      sd.back() = st[d];
    } else {
      sh.push_back(x.shape[d]);
      sd.push_back(st[d]);
    }
    if (kind == 1) seen_reduced = true;
    else if (seen_reduced) inner_reduced_only = false;
    last_kind = kind;
  }
  const int64_t R = shape_numel(rs);
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (OP == Red::LogSumExp) {
      FUSE_CHECK(ks.size() <= kMaxDims && rs.size() <= kMaxDims, node.label() << ": too many dims for the CUDA reduction");
      ReduceGeom g{};
      g.krank = static_cast<int>(ks.size());
      g.rrank = static_cast<int>(rs.size());
      for (size_t i = 0; i < ks.size(); ++i) g.kshape[i] = ks[i], g.kstride[i] = kst[i];
      for (size_t i = 0; i < rs.size(); ++i) g.rshape[i] = rs[i], g.rstride[i] = rst[i];
      reduce_lse_generic<T><<<grid_for(nout), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), nout, R, g);
    } else if (inner_reduced_only && rs.size() <= 1) {
      const int64_t rows = nout;
      if (R >= 2048) {
        reduce_rows_block<T, OP><<<static_cast<unsigned>(std::min<int64_t>(rows, 65535)), 512, 0, stream_of(ctx)>>>(
            x.ptr<T>(), y->ptr<T>(), rows, R);
      } else {
        const int64_t blocks = (rows + 7) / 8;
        reduce_rows_warp<T, OP><<<static_cast<unsigned>(std::min<int64_t>(blocks, 65535)), 256, 0, stream_of(ctx)>>>(
            x.ptr<T>(), y->ptr<T>(), rows, R);
      }
    } else {
      FUSE_CHECK(ks.size() <= kMaxDims && rs.size() <= kMaxDims, node.label() << ": too many dims for the CUDA reduction");
      ReduceGeom g{};
      g.krank = static_cast<int>(ks.size());
      g.rrank = static_cast<int>(rs.size());
      for (size_t i = 0; i < ks.size(); ++i) g.kshape[i] = ks[i], g.kstride[i] = kst[i];
      for (size_t i = 0; i < rs.size(); ++i) g.rshape[i] = rs[i], g.rstride[i] = rst[i];
      reduce_generic<T, OP><<<grid_for(nout), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), nout, R, g);
    }
  };
  if constexpr (OP == Red::Max || OP == Red::Min || OP == Red::Sum || OP == Red::Prod)
    dispatch_numeric(ctx, x.dtype, launch);
  else
    dispatch_float(ctx, x.dtype, launch);
  check_launch(ctx);
}

#define FLOATS {DType::Float, DType::Float16, DType::BFloat16}
#define NUMS {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Int8, DType::UInt8}

FUSEOPT_KERNEL(CudaReduceMean, "", "ReduceMean", Backend::CUDA, FLOATS) { run_reduce<Red::Mean>(ctx); }
FUSEOPT_KERNEL(CudaReduceSum, "", "ReduceSum", Backend::CUDA, NUMS) { run_reduce<Red::Sum>(ctx); }
FUSEOPT_KERNEL(CudaReduceMax, "", "ReduceMax", Backend::CUDA, NUMS) { run_reduce<Red::Max>(ctx); }
FUSEOPT_KERNEL(CudaReduceMin, "", "ReduceMin", Backend::CUDA, NUMS) { run_reduce<Red::Min>(ctx); }
FUSEOPT_KERNEL(CudaReduceProd, "", "ReduceProd", Backend::CUDA, NUMS) { run_reduce<Red::Prod>(ctx); }
FUSEOPT_KERNEL(CudaReduceSumSquare, "", "ReduceSumSquare", Backend::CUDA, FLOATS) { run_reduce<Red::SumSquare>(ctx); }
FUSEOPT_KERNEL(CudaReduceL1, "", "ReduceL1", Backend::CUDA, FLOATS) { run_reduce<Red::L1>(ctx); }
FUSEOPT_KERNEL(CudaReduceLogSumExp, "", "ReduceLogSumExp", Backend::CUDA, FLOATS) { run_reduce<Red::LogSumExp>(ctx); }
FUSEOPT_KERNEL(CudaReduceL2, "", "ReduceL2", Backend::CUDA, FLOATS) { run_reduce<Red::L2>(ctx); }

// ---- Softmax / LogSoftmax ------------------------------------------------------
// x viewed as [outer, L, inner]; softmax along L.

// inner == 1, one warp per row (rows up to a few thousand long).
template <class T, bool LOG>
__global__ void softmax_rows_warp(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t L) {
  const int64_t warps_total = (int64_t)gridDim.x * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t row = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); row < rows; row += warps_total) {
    const T* p = x + row * L;
    T* q = y + row * L;
    float m = -INFINITY;
    for (int64_t j = lane; j < L; j += 32) m = fmaxf(m, float(load_c(p[j])));
    m = warp_max(m);
    float s = 0.f;
    for (int64_t j = lane; j < L; j += 32) s += __expf(float(load_c(p[j])) - m);
    s = warp_sum(s);
    if constexpr (LOG) {
      const float ls = logf(s);
      for (int64_t j = lane; j < L; j += 32) q[j] = store_c<T>(static_cast<compute_t<T>>(float(load_c(p[j])) - m - ls));
    } else {
      const float inv = 1.f / s;
      for (int64_t j = lane; j < L; j += 32) q[j] = store_c<T>(static_cast<compute_t<T>>(__expf(float(load_c(p[j])) - m) * inv));
    }
  }
}

template <class T, bool LOG>
__global__ void softmax_rows_block(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t L) {
  __shared__ float shm[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* p = x + row * L;
    T* q = y + row * L;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, float(load_c(p[j])));
    m = block_max(m, shm, -INFINITY);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < L; j += blockDim.x) s += __expf(float(load_c(p[j])) - m);
    s = block_sum(s, shm);
    if constexpr (LOG) {
      const float ls = logf(s);
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) q[j] = store_c<T>(static_cast<compute_t<T>>(float(load_c(p[j])) - m - ls));
    } else {
      const float inv = 1.f / s;
      for (int64_t j = threadIdx.x; j < L; j += blockDim.x) q[j] = store_c<T>(static_cast<compute_t<T>>(__expf(float(load_c(p[j])) - m) * inv));
    }
    __syncthreads();  // shm is reused by the next row
  }
}

// inner > 1: one thread per (outer, inner) column.
template <class T, bool LOG>
__global__ void softmax_strided(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t L, int64_t inner) {
  CUDA_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, in = c - o * inner;
    const T* p = x + o * L * inner + in;
    T* q = y + o * L * inner + in;
    float m = -INFINITY;
    for (int64_t j = 0; j < L; ++j) m = fmaxf(m, float(load_c(p[j * inner])));
    float s = 0.f;
    for (int64_t j = 0; j < L; ++j) s += __expf(float(load_c(p[j * inner])) - m);
    const float ls = logf(s), inv = 1.f / s;
    for (int64_t j = 0; j < L; ++j) {
      const float v = float(load_c(p[j * inner]));
      q[j * inner] = store_c<T>(static_cast<compute_t<T>>(LOG ? v - m - ls : __expf(v - m) * inv));
    }
  }
}

template <bool LOG> void run_softmax(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (x.numel() == 0) return;
  if (rank == 0) {  // softmax of a scalar: a single-element row
    dispatch_float(ctx, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      softmax_rows_warp<T, LOG><<<1, 32, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), 1, 1);
    });
    check_launch(ctx);
    return;
  }
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  int64_t outer = dm::prod(x.shape, 0, axis), L = x.shape[axis], inner = dm::prod(x.shape, axis + 1, rank);
  // Opset < 13 (the Session marks such nodes): the input is seen as 2-D
  // [prod(dims before axis), prod(dims from axis)], normalised per row.
  if (ctx.node().attr_int("__fuseopt_softmax_2d", 0) != 0) {
    L = dm::prod(x.shape, axis, rank);
    inner = 1;
  }
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (inner == 1) {
      if (L > 1024) {
        softmax_rows_block<T, LOG><<<static_cast<unsigned>(std::min<int64_t>(outer, 65535)), 512, 0, stream_of(ctx)>>>(
            x.ptr<T>(), y->ptr<T>(), outer, L);
      } else {
        softmax_rows_warp<T, LOG><<<static_cast<unsigned>(std::min<int64_t>((outer + 7) / 8, 65535)), 256, 0,
                                    stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), outer, L);
      }
    } else {
      softmax_strided<T, LOG><<<grid_for(outer * inner), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), outer, L, inner);
    }
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaSoftmax, "", "Softmax", Backend::CUDA, FLOATS) { run_softmax<false>(ctx); }
FUSEOPT_KERNEL(CudaLogSoftmax, "", "LogSoftmax", Backend::CUDA, FLOATS) { run_softmax<true>(ctx); }

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
