// MaxPool / AveragePool (1-D and 2-D: pads, strides, dilations, ceil_mode,
// count_include_pad; NaN propagates through max) and GlobalAveragePool /
// GlobalMaxPool (one warp per plane).
#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/spatial_geometry.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// ---- MaxPool / AveragePool ---------------------------------------------------------
template <class T, bool MAX>
__global__ void pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, Axis ah, Axis aw, bool include_pad) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t ow = i % aw.out;
    const int64_t oh = (i / aw.out) % ah.out;
    const int64_t plane = i / (aw.out * ah.out);
    const T* xp = x + plane * ah.in * aw.in;
    float best = -INFINITY, sum = 0.f;
    int64_t count = 0, padded = 0;
    bool nan = false;
    for (int64_t kh = 0; kh < ah.k; ++kh) {
      const int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil;
      for (int64_t kw = 0; kw < aw.k; ++kw) {
        const int64_t iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
        if (ih >= -ah.pad_begin && ih < ah.in + ah.pad_end && iw >= -aw.pad_begin && iw < aw.in + aw.pad_end) ++padded;
        if (ih < 0 || ih >= ah.in || iw < 0 || iw >= aw.in) continue;
        const float v = float(load_c(xp[ih * aw.in + iw]));
        nan = nan || v != v;
        best = v > best ? v : best;
        sum += v;
        ++count;
      }
    }
    float r;
    if (MAX) r = nan ? NAN : best;
    else r = sum / float(include_pad ? padded : (count > 0 ? count : 1));
    y[i] = store_c<T>(static_cast<compute_t<T>>(r));
  }
}

template <bool MAX> void run_pool(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() == 3 || x.rank() == 4, "only 1-D and 2-D pooling is supported, got " << shape_str(x.shape));
  if (MAX) DM_CHECK(ctx, !wants_output(ctx, 1), "the Indices output of MaxPool is not supported");
  const std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape");
  const std::vector<int64_t> in_sp(x.shape.begin() + 2, x.shape.end());
  DM_CHECK(ctx, ks.size() == in_sp.size(), "kernel_shape " << shape_str(ks) << " does not match input " << shape_str(x.shape));
  const std::vector<Axis> axes = spatial_geometry_2d(ctx, in_sp, ks, true);
  const bool include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  std::vector<int64_t> out_shape{x.shape[0], x.shape[1]};
  for (size_t i = x.rank() == 3 ? 1 : 0; i < axes.size(); ++i) out_shape.push_back(axes[i].out);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool2d_kernel<T, MAX><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), total, axes[0],
                                                                           axes[1], include_pad);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaMaxPool, "", "MaxPool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_pool<true>(ctx);
}
FUSEOPT_KERNEL(CudaAveragePool, "", "AveragePool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_pool<false>(ctx);
}

// One warp per plane.
template <class T, bool MAX>
__global__ void global_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t S) {
  const int64_t warps_total = (int64_t)gridDim.x * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t p = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); p < planes; p += warps_total) {
    const T* xp = x + p * S;
    float acc = MAX ? -INFINITY : 0.f;
    bool nan = false;
    for (int64_t i = lane; i < S; i += 32) {
      const float v = float(load_c(xp[i]));
      nan = nan || v != v;
      acc = MAX ? (v > acc ? v : acc) : acc + v;
    }
    acc = MAX ? warp_max(acc) : warp_sum(acc);
    nan = __any_sync(0xffffffffu, nan);
    if (lane == 0) {
      float r = MAX ? (nan ? NAN : acc) : (S ? acc / float(S) : NAN);
      y[p] = store_c<T>(static_cast<compute_t<T>>(r));
    }
  }
}

template <bool MAX> void run_global_pool(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 2, "expects an input [N, C, ...], got " << shape_str(x.shape));
  std::vector<int64_t> out_shape{x.shape[0], x.shape[1]};
  for (size_t i = 2; i < x.rank(); ++i) out_shape.push_back(1);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t planes = x.shape[0] * x.shape[1], S = dm::prod(x.shape, 2, x.rank());
  if (!planes) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    global_pool_kernel<T, MAX><<<static_cast<unsigned>(std::min<int64_t>((planes + 7) / 8, 65535)), 256, 0,
                                 stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), planes, S);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaGlobalAveragePool, "", "GlobalAveragePool", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  run_global_pool<false>(ctx);
}
FUSEOPT_KERNEL(CudaGlobalMaxPool, "", "GlobalMaxPool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_global_pool<true>(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
