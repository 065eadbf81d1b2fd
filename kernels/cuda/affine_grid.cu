// AffineGrid (opset 20, 2-D) on CUDA: one thread per grid point; the base
// coordinates come from kernels/common/affine_grid_params.h, shared with the
// CPU reference.
#include "kernels/common/affine_grid_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T>
__global__ void affine_grid_kernel(const T* __restrict__ theta, T* __restrict__ y, int64_t total, int64_t H, int64_t W,
                                   bool align_corners) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t w = i % W, h = (i / W) % H, n = i / (W * H);
    const float x = dm::affine_base_coord(w, W, align_corners), yc = dm::affine_base_coord(h, H, align_corners);
    const T* t = theta + n * 6;
    const float gx = float(load_c(t[0])) * x + float(load_c(t[1])) * yc + float(load_c(t[2]));
    const float gy = float(load_c(t[3])) * x + float(load_c(t[4])) * yc + float(load_c(t[5]));
    y[2 * i] = store_c<T>(static_cast<compute_t<T>>(gx));
    y[2 * i + 1] = store_c<T>(static_cast<compute_t<T>>(gy));
  }
}

FUSEOPT_KERNEL(CudaAffineGrid, "", "AffineGrid", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& theta = req_input(ctx, 0);
  const dm::AffineGridParams p = dm::resolve_affine_grid(ctx, theta);
  RtTensor* y = ctx.output(0, theta.dtype, {p.N, p.H, p.W, 2});
  const int64_t total = p.N * p.H * p.W;
  if (!total) return;
  dispatch_float(ctx, theta.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    affine_grid_kernel<T><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(theta.ptr<T>(), y->ptr<T>(), total, p.H,
                                                                              p.W, p.align_corners);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
