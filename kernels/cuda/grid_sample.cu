// GridSample on CUDA: one thread per output element; the sampling math is
// kernels/common/grid_sample_math.h, shared with the CPU reference (fp32
// coordinates and blending whatever the storage type).
#include "kernels/common/grid_sample_math.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T, class G>
__global__ void grid_sample_kernel(const T* __restrict__ x, const G* __restrict__ grid, T* __restrict__ y,
                                   int64_t total, int64_t C, int64_t H, int64_t W, int64_t HWo, gridsample::Params p) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t o = i % HWo, r = i / HWo, n = r / C;
    const T* plane = x + r * H * W;
    auto load = [plane, W](int64_t yy, int64_t xx) { return float(load_c(plane[yy * W + xx])); };
    const G* g = grid + (n * HWo + o) * 2;
    const float v = gridsample::sample(load, H, W, float(load_c(g[0])), float(load_c(g[1])), p);
    y[i] = store_c<T>(static_cast<compute_t<T>>(v));
  }
}

FUSEOPT_KERNEL(CudaGridSample, "", "GridSample", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* grid = opt_input(ctx, 1);
  DM_CHECK(ctx, grid, "needs X and grid");
  std::vector<int64_t> out_shape;
  const gridsample::Params p = gridsample::resolve(ctx, x.shape, grid->shape, &out_shape);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, grid->dtype, [&](auto gtag) {
      using G = typename decltype(gtag)::type;
      grid_sample_kernel<T, G><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), grid->ptr<G>(), y->ptr<T>(), total, out_shape[1], x.shape[2], x.shape[3],
          out_shape[2] * out_shape[3], p);
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
