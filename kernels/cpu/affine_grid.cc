// AffineGrid (opset 20, 2-D): theta [N, 2, 3], size [N, C, H, W] -> grid
// [N, H, W, 2] with grid[n, h, w] = theta[n] @ (x_w, y_h, 1), where the base
// coordinates are pixel centres in [-1, 1] (align_corners = 0) or span the
// corner pixels (align_corners = 1; a size-1 axis gives -1, as the ONNX
// reference). Feeds GridSample (spatial transformers). The 3-D form is
// rejected with an Error. The CUDA kernel (kernels/cuda/affine_grid.cu)
// uses the same base_coord.
#include "kernels/common/affine_grid_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_AffineGrid, "", "AffineGrid", Backend::CPU, {DType::Float}) {
  const RtTensor* theta = ctx.input(0);
  MATH_CHECK(ctx, theta, "needs theta and size");
  const dm::AffineGridParams p = dm::resolve_affine_grid(ctx, *theta);
  float* y = ctx.output(0, theta->dtype, {p.N, p.H, p.W, 2})->ptr<float>();
  const float* t = theta->ptr<float>();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t w = 0; w < p.W; ++w) {
        const float x = dm::affine_base_coord(w, p.W, p.align_corners), yc = dm::affine_base_coord(h, p.H, p.align_corners);
        const float* tn = t + n * 6;
        float* out = y + ((n * p.H + h) * p.W + w) * 2;
        out[0] = tn[0] * x + tn[1] * yc + tn[2];
        out[1] = tn[3] * x + tn[4] * yc + tn[5];
      }
}

}  // namespace
}  // namespace fuseopt
