// LpNormalization (one thread per normalised line), MeanVarianceNormalization
// (one block per group of reduced elements, two-pass fp32 statistics) and
// LRN (one thread per element) on CUDA; semantics in
// kernels/common/norm_extra_params.h, shared with the CPU reference.
#include "kernels/common/norm_extra_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T>
__global__ void lp_norm_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t lines, int64_t n, int64_t inner,
                               bool p1) {
  CUDA_GRID_STRIDE(l, lines) {
    const int64_t base = (l / inner) * n * inner + l % inner;
    float norm = 0.f;
    for (int64_t k = 0; k < n; ++k) {
      const float v = float(load_c(x[base + k * inner]));
      norm += p1 ? fabsf(v) : v * v;
    }
    if (!p1) norm = sqrtf(norm);
    for (int64_t k = 0; k < n; ++k) {
      const float v = float(load_c(x[base + k * inner]));
      y[base + k * inner] = store_c<T>(static_cast<compute_t<T>>(norm == 0.f ? 0.f : v / norm));
    }
  }
}

FUSEOPT_KERNEL(CudaLpNormalization, "", "LpNormalization", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 1, "needs an input of rank >= 1");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), static_cast<int64_t>(x.rank()));
  const int64_t p = ctx.node().attr_int("p", 2);
  DM_CHECK(ctx, p == 1 || p == 2, "p must be 1 or 2, got " << p);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.shape[axis], inner = dm::prod(x.shape, axis + 1, x.rank());
  const int64_t lines = n ? x.numel() / n : 0;
  if (!lines) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lp_norm_kernel<T><<<grid_for(lines), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), lines, n, inner, p == 1);
  });
  check_launch(ctx);
}

struct Radix {
  int rank = 0;
  int64_t dims[kMaxDims], strides[kMaxDims];
  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (i % dims[d]) * strides[d];
      i /= dims[d];
    }
    return off;
  }
};

Radix to_radix(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  Radix r;
  r.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size() && d < static_cast<size_t>(kMaxDims); ++d) r.dims[d] = dims[d], r.strides[d] = strides[d];
  return r;
}

template <class T>
__global__ void mvn_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t groups, int64_t size, Radix kept,
                           Radix red) {
  __shared__ float shm[32];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t base = kept.offset(g);
    float s = 0.f;
    for (int64_t r = threadIdx.x; r < size; r += blockDim.x) s += float(load_c(x[base + red.offset(r)]));
    const float mean = block_sum(s, shm) / float(size);
    float sq = 0.f;
    for (int64_t r = threadIdx.x; r < size; r += blockDim.x) {
      const float d = float(load_c(x[base + red.offset(r)])) - mean;
      sq += d * d;
    }
    const float denom = sqrtf(block_sum(sq, shm) / float(size)) + 1e-9f;
    for (int64_t r = threadIdx.x; r < size; r += blockDim.x) {
      const int64_t off = base + red.offset(r);
      y[off] = store_c<T>(static_cast<compute_t<T>>((float(load_c(x[off])) - mean) / denom));
    }
    __syncthreads();
  }
}

FUSEOPT_KERNEL(CudaMeanVarianceNormalization, "", "MeanVarianceNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() <= static_cast<size_t>(kMaxDims), "rank " << x.rank() << " exceeds " << kMaxDims);
  const dm::ReduceGroups g = dm::resolve_mvn(ctx, x.shape);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (!g.groups || !g.group_size) return;
  const int threads = g.group_size >= 4096 ? 512 : g.group_size >= 512 ? 256 : g.group_size >= 128 ? 128 : 32;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    mvn_kernel<T><<<static_cast<unsigned>(std::min<int64_t>(g.groups, 65535)), threads, 0, stream_of(ctx)>>>(
        x.ptr<T>(), y->ptr<T>(), g.groups, g.group_size, to_radix(g.kept_dims, g.kept_strides),
        to_radix(g.red_dims, g.red_strides));
  });
  check_launch(ctx);
}

template <class T>
__global__ void lrn_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t C, int64_t S,
                           int64_t before, int64_t after, float scale, float bias, float beta) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t s = i % S, c = (i / S) % C, n = i / (S * C);
    float sq = 0.f;
    const int64_t lo = c - before < 0 ? 0 : c - before, hi = c + after > C - 1 ? C - 1 : c + after;
    for (int64_t j = lo; j <= hi; ++j) {
      const float v = float(load_c(x[(n * C + j) * S + s]));
      sq += v * v;
    }
    y[i] = store_c<T>(static_cast<compute_t<T>>(float(load_c(x[i])) / powf(bias + scale * sq, beta)));
  }
}

FUSEOPT_KERNEL(CudaLRN, "", "LRN", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::LrnParams p = dm::resolve_lrn(ctx, x.shape);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t total = x.numel();
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lrn_kernel<T><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), total, p.C, p.S, p.before,
                                                                     p.after, p.alpha / static_cast<float>(p.size),
                                                                     p.bias, p.beta);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
