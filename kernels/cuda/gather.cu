// Indexed reads and writes on the GPU: Gather, GatherElements, GatherND,
// ScatterND, ScatterElements. Indices (int64 or int32) are read on the
// device, so a run never copies them to the host; negative indices count
// from the end. An out-of-range index cannot throw from a kernel: a gather
// then yields 0 bits for that element and a scatter skips it, and the kernel
// records the first bad index (kernels/cuda/index_errors.h); the Session then
// throws an Error naming the node at the end of the run, as the CPU backend
// does at once.
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/index_errors.h"

namespace fuseopt {
namespace cuda {
namespace {

// The index normalised into [0, dim); *ok false (and the index reported to
// `err`) when it is outside [-dim, dim-1].
template <class I>
__device__ __forceinline__ int64_t fix_index(I v, int64_t dim, bool* ok, const IndexErrorSink& err) {
  int64_t k = static_cast<int64_t>(v);
  if (k < 0) k += dim;
  *ok = k >= 0 && k < dim;
  if (!*ok) report_bad_index(err, static_cast<int64_t>(v), dim);
  return k;
}

template <class F> void dispatch_index(KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::Int64: return f(Tag<int64_t>{});
    case DType::Int32: return f(Tag<int32_t>{});
    default: throw Error(ctx.node().label() + ": indices must be int64 or int32, got " + dtype_name(t));
  }
}

// ---- Gather -----------------------------------------------------------------
// U: the index arithmetic type (uint32_t when everything fits: embedding
// lookups are in every transformer and 64-bit division dominates them).
template <class E, class I, class U>
__global__ void gather_kernel(const E* __restrict__ x, const I* __restrict__ idx, E* __restrict__ y, U total, U n,
                              U inner, int64_t axis_dim, IndexErrorSink err) {
  for (U i = blockIdx.x * (U)blockDim.x + threadIdx.x; i < total; i += (U)blockDim.x * gridDim.x) {
    const U t = i % inner, row = i / inner;
    const U j = row % n, o = row / n;
    bool ok;
    const int64_t k = fix_index(idx[j], axis_dim, &ok, err);
    y[i] = ok ? x[(static_cast<int64_t>(o) * axis_dim + k) * static_cast<int64_t>(inner) + t] : E(0);
  }
}

// Rows of whole 16-byte vectors (an embedding lookup: [vocab, hidden] rows of 768 fp16): one thread
// per vector, so a row moves in 16-byte loads and stores instead of one element a thread. The
// element kernel above took 15-16 us for BERT-base's word embeddings at 8 x 512 tokens (6.3 MB out,
// ~2 us of bandwidth; NOTES-perf.md v26). `inner` counts vectors here.
template <class I>
__global__ void gather_vec_kernel(const uint4* __restrict__ x, const I* __restrict__ idx, uint4* __restrict__ y,
                                  uint32_t total, uint32_t n, uint32_t inner, int64_t axis_dim, IndexErrorSink err) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += blockDim.x * gridDim.x) {
    const uint32_t t = i % inner, row = i / inner;
    const uint32_t j = row % n, o = row / n;
    bool ok;
    const int64_t k = fix_index(idx[j], axis_dim, &ok, err);
    y[i] = ok ? x[(static_cast<int64_t>(o) * axis_dim + k) * inner + t] : make_uint4(0, 0, 0, 0);
  }
}

FUSEOPT_KERNEL(CudaGather, "", "Gather", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx = req_input(ctx, 1);
  DM_CHECK(ctx, x.rank() >= 1, "data must have rank >= 1, got a scalar");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank());
  std::vector<int64_t> out_shape(x.shape.begin(), x.shape.begin() + axis);
  out_shape.insert(out_shape.end(), idx.shape.begin(), idx.shape.end());
  out_shape.insert(out_shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  const int64_t inner = dm::prod(x.shape, axis + 1, x.rank());
  const IndexErrorSink err = index_error_sink(ctx);
  const int64_t elem = static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t row_bytes = inner * elem;
  const int64_t per_vec = elem > 0 && elem <= 16 ? 16 / elem : 1;  // elements in 16 bytes
  const int64_t vec_inner = row_bytes / 16, vec_total = total / per_vec;
  if (elem > 0 && row_bytes % 16 == 0 && vec_inner > 0 && (reinterpret_cast<uintptr_t>(x.data) & 15) == 0 &&
      (reinterpret_cast<uintptr_t>(y->data) & 15) == 0 && vec_total < (int64_t{1} << 31) &&
      x.numel() / per_vec < (int64_t{1} << 31)) {
    dispatch_index(ctx, idx.dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      gather_vec_kernel<I><<<grid_for(vec_total), kThreads, 0, stream_of(ctx)>>>(
          static_cast<const uint4*>(x.data), idx.ptr<I>(), static_cast<uint4*>(y->data),
          static_cast<uint32_t>(vec_total), static_cast<uint32_t>(idx.numel()), static_cast<uint32_t>(vec_inner),
          x.shape[axis], err);
    });
    check_launch(ctx);
    return;
  }
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dispatch_index(ctx, idx.dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      if (total < (int64_t{1} << 31) && x.numel() < (int64_t{1} << 31))
        gather_kernel<E, I, uint32_t><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
            x.ptr<E>(), idx.ptr<I>(), y->ptr<E>(), static_cast<uint32_t>(total), static_cast<uint32_t>(idx.numel()),
            static_cast<uint32_t>(inner), x.shape[axis], err);
      else
        gather_kernel<E, I, int64_t><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
            x.ptr<E>(), idx.ptr<I>(), y->ptr<E>(), total, idx.numel(), inner, x.shape[axis], err);
    });
  });
  check_launch(ctx);
}

// ---- GatherElements ---------------------------------------------------------
template <class E, class I>
__global__ void gather_elements_kernel(const E* __restrict__ x, const I* __restrict__ idx, E* __restrict__ y,
                                       int64_t total, BcastIndex<1> ix, int64_t axis_stride, int64_t axis_dim,
                                       IndexErrorSink err) {
  CUDA_GRID_STRIDE(i, total) {
    int64_t off[1];
    ix.offsets(i, off);
    bool ok;
    const int64_t k = fix_index(idx[i], axis_dim, &ok, err);
    y[i] = ok ? x[off[0] + k * axis_stride] : E(0);
  }
}

FUSEOPT_KERNEL(CudaGatherElements, "", "GatherElements", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx = req_input(ctx, 1);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1 && idx.rank() == x.rank(),
           "data " << shape_str(x.shape) << " and indices " << shape_str(idx.shape) << " must have the same rank >= 1");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    DM_CHECK(ctx, d == axis || idx.shape[d] <= x.shape[d],
             "indices " << shape_str(idx.shape) << " exceed data " << shape_str(x.shape) << " on axis " << d);
  RtTensor* y = ctx.output(0, x.dtype, idx.shape);
  const int64_t total = y->numel();
  if (!total) return;
  std::vector<int64_t> st = dense_strides(x.shape);
  const int64_t axis_stride = st[axis];
  st[axis] = 0;
  auto ix = make_index<1>(ctx, idx.shape, {st});
  const IndexErrorSink err = index_error_sink(ctx);
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dispatch_index(ctx, idx.dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      gather_elements_kernel<E, I><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<E>(), idx.ptr<I>(), y->ptr<E>(), total, ix, axis_stride, x.shape[axis], err);
    });
  });
  check_launch(ctx);
}

// ---- GatherND -----------------------------------------------------------------
template <class E, class I>
__global__ void gather_nd_kernel(const E* __restrict__ x, const I* __restrict__ idx, E* __restrict__ y, int64_t total,
                                 int64_t inner, int64_t per_batch, int64_t batch_stride, int k, I64s dims, I64s strides,
                                 IndexErrorSink err) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t t = i % inner, row = i / inner;
    const int64_t bi = row / per_batch;
    int64_t off = bi * batch_stride;
    bool all_ok = true;
    for (int d = 0; d < k; ++d) {
      bool ok;
      off += fix_index(idx[row * k + d], dims.v[d], &ok, err) * strides.v[d];
      all_ok = all_ok && ok;
    }
    y[i] = all_ok ? x[off + t] : E(0);
  }
}

FUSEOPT_KERNEL(CudaGatherND, "", "GatherND", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx = req_input(ctx, 1);
  const int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(idx.rank());
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  DM_CHECK(ctx, q >= 1 && r >= 1, "data and indices must have rank >= 1");
  const int64_t k = idx.shape[q - 1];
  DM_CHECK(ctx, b >= 0 && b < q && b < r && b + k <= r,
           "batch_dims " << b << " and index depth " << k << " do not fit data " << shape_str(x.shape) << " and indices "
                         << shape_str(idx.shape));
  for (int64_t d = 0; d < b; ++d)
    DM_CHECK(ctx, idx.shape[d] == x.shape[d],
             "batch dims of data " << shape_str(x.shape) << " and indices " << shape_str(idx.shape) << " differ");
  std::vector<int64_t> out_shape(idx.shape.begin(), idx.shape.end() - 1);
  out_shape.insert(out_shape.end(), x.shape.begin() + b + k, x.shape.end());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  const std::vector<int64_t> st = dense_strides(x.shape);
  std::vector<int64_t> kd(x.shape.begin() + b, x.shape.begin() + b + k), ks(st.begin() + b, st.begin() + b + k);
  const int64_t per_batch = std::max<int64_t>(1, dm::prod(idx.shape, b, q - 1));
  const int64_t batch_stride = dm::prod(x.shape, b, r);
  const int64_t inner = dm::prod(x.shape, b + k, r);
  const IndexErrorSink err = index_error_sink(ctx);
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dispatch_index(ctx, idx.dtype, [&](auto itag) {
      using I = typename decltype(itag)::type;
      gather_nd_kernel<E, I><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<E>(), idx.ptr<I>(), y->ptr<E>(), total, inner, per_batch, batch_stride, static_cast<int>(k),
          to_i64s(ctx, kd), to_i64s(ctx, ks), err);
    });
  });
  check_launch(ctx);
}

// ---- ScatterND / ScatterElements ----------------------------------------------
enum Reduction { kNone = 0, kAdd, kMul, kMax, kMin };

int read_reduction(KernelContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return kNone;
  if (r == "add") return kAdd;
  if (r == "mul") return kMul;
  if (r == "max") return kMax;
  if (r == "min") return kMin;
  DM_CHECK(ctx, false, "unknown reduction '" << r << "'");
  return kNone;
}

template <class T> __device__ __forceinline__ T combine(T a, T b, int red) {
  using C = compute_t<T>;
  const C x = load_c(a), y = load_c(b);
  C r;
  switch (red) {
    case kAdd: r = x + y; break;
    case kMul: r = x * y; break;
    case kMax: r = x < y ? y : x; break;
    case kMin: r = y < x ? y : x; break;
    default: r = y;
  }
  return store_c<T>(r);
}

// Parallel over every (index row, inner element); no reduction.
template <class E, class I>
__global__ void scatter_nd_set(E* __restrict__ y, const I* __restrict__ idx, const E* __restrict__ u, int64_t total,
                               int64_t inner, int k, I64s dims, I64s strides, IndexErrorSink err) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t t = i % inner, row = i / inner;
    int64_t off = 0;
    bool all_ok = true;
    for (int d = 0; d < k; ++d) {
      bool ok;
      off += fix_index(idx[row * k + d], dims.v[d], &ok, err) * strides.v[d];
      all_ok = all_ok && ok;
    }
    if (all_ok) y[off + t] = u[i];
  }
}
// Parallel over inner elements, index rows applied in order (deterministic).
template <class T, class I>
__global__ void scatter_nd_reduce(T* __restrict__ y, const I* __restrict__ idx, const T* __restrict__ u, int64_t rows,
                                  int64_t inner, int k, I64s dims, I64s strides, int red, IndexErrorSink err) {
  CUDA_GRID_STRIDE(t, inner) {
    for (int64_t row = 0; row < rows; ++row) {
      int64_t off = 0;
      bool all_ok = true;
      for (int d = 0; d < k; ++d) {
        bool ok;
        off += fix_index(idx[row * k + d], dims.v[d], &ok, err) * strides.v[d];
        all_ok = all_ok && ok;
      }
      if (all_ok) y[off + t] = combine(y[off + t], u[row * inner + t], red);
    }
  }
}

FUSEOPT_KERNEL(CudaScatterND, "", "ScatterND", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx = req_input(ctx, 1);
  const RtTensor& upd = req_input(ctx, 2);
  const int red = read_reduction(ctx);
  const int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(idx.rank());
  DM_CHECK(ctx, q >= 1, "indices must have rank >= 1");
  const int64_t k = idx.shape[q - 1];
  DM_CHECK(ctx, k <= r, "index depth " << k << " exceeds data rank " << r);
  std::vector<int64_t> want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  DM_CHECK(ctx, upd.shape == want && upd.dtype == x.dtype,
           "updates " << shape_str(upd.shape) << " must have shape " << shape_str(want) << " and the data's dtype (data "
                      << shape_str(x.shape) << ", indices " << shape_str(idx.shape) << ")");
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (x.nbytes())
    check_cuda(ctx, cudaMemcpyAsync(y->data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, stream_of(ctx)), "device copy");
  const int64_t rows = dm::prod(idx.shape, 0, q - 1), inner = dm::prod(x.shape, k, r);
  if (!rows || !inner) return;
  const std::vector<int64_t> st = dense_strides(x.shape);
  const I64s dims = to_i64s(ctx, std::vector<int64_t>(x.shape.begin(), x.shape.begin() + k));
  const I64s strides = to_i64s(ctx, std::vector<int64_t>(st.begin(), st.begin() + k));
  const IndexErrorSink err = index_error_sink(ctx);
  dispatch_index(ctx, idx.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    if (red == kNone) {
      dispatch_bytes(ctx, x.dtype, [&](auto tag) {
        using E = typename decltype(tag)::type;
        scatter_nd_set<E, I><<<grid_for(rows * inner), kThreads, 0, stream_of(ctx)>>>(
            y->ptr<E>(), idx.ptr<I>(), upd.ptr<E>(), rows * inner, inner, static_cast<int>(k), dims, strides, err);
      });
    } else {
      dispatch_numeric(ctx, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        scatter_nd_reduce<T, I><<<grid_for(inner), kThreads, 0, stream_of(ctx)>>>(
            y->ptr<T>(), idx.ptr<I>(), upd.ptr<T>(), rows, inner, static_cast<int>(k), dims, strides, red, err);
      });
    }
  });
  check_launch(ctx);
}

template <class T, class I>
__global__ void scatter_elements_kernel(T* __restrict__ y, const I* __restrict__ idx, const T* __restrict__ u,
                                        int64_t total, BcastIndex<1> ix, int64_t axis_stride, int64_t axis_dim, int red,
                                        bool serial, IndexErrorSink err) {
  // serial: one thread applies every update in order (reductions with
  // possibly repeated targets stay deterministic and race-free).
  const int64_t step = serial ? 1 : (int64_t)blockDim.x * gridDim.x;
  const int64_t first = serial ? 0 : blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (serial && (blockIdx.x != 0 || threadIdx.x != 0)) return;
  for (int64_t i = first; i < total; i += step) {
    int64_t off[1];
    ix.offsets(i, off);
    bool ok;
    const int64_t k = fix_index(idx[i], axis_dim, &ok, err);
    if (!ok) continue;
    T* dst = y + off[0] + k * axis_stride;
    *dst = red == kNone ? u[i] : combine(*dst, u[i], red);
  }
}

FUSEOPT_KERNEL(CudaScatterElements, "", "ScatterElements", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx = req_input(ctx, 1);
  const RtTensor& upd = req_input(ctx, 2);
  const int red = read_reduction(ctx);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1 && idx.shape == upd.shape && idx.rank() == x.rank() && upd.dtype == x.dtype,
           "indices " << shape_str(idx.shape) << " and updates " << shape_str(upd.shape)
                      << " must match and have the rank of data " << shape_str(x.shape));
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (x.nbytes())
    check_cuda(ctx, cudaMemcpyAsync(y->data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, stream_of(ctx)), "device copy");
  const int64_t total = idx.numel();
  if (!total) return;
  std::vector<int64_t> st = dense_strides(x.shape);
  const int64_t axis_stride = st[axis];
  st[axis] = 0;
  auto ix = make_index<1>(ctx, idx.shape, {st});
  const IndexErrorSink err = index_error_sink(ctx);
  dispatch_index(ctx, idx.dtype, [&](auto itag) {
    using I = typename decltype(itag)::type;
    if (red == kNone) {
      dispatch_bytes(ctx, x.dtype, [&](auto tag) {
        using E = typename decltype(tag)::type;
        scatter_elements_kernel<E, I><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
            y->ptr<E>(), idx.ptr<I>(), upd.ptr<E>(), total, ix, axis_stride, x.shape[axis], kNone, false, err);
      });
    } else {
      dispatch_numeric(ctx, x.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        scatter_elements_kernel<T, I><<<1, 1, 0, stream_of(ctx)>>>(y->ptr<T>(), idx.ptr<I>(), upd.ptr<T>(), total, ix,
                                                                   axis_stride, x.shape[axis], red, true, err);
      });
    }
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
