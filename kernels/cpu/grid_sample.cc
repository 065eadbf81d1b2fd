// GridSample (opset 16 / 20, 2-D: bilinear/linear and nearest; zeros,
// border and reflection padding; align_corners). The per-sample math lives
// in kernels/common/grid_sample_math.h, shared with the CUDA kernel.
#include "kernels/common/grid_sample_math.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_GridSample, "", "GridSample", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* grid = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  MATH_CHECK(ctx, x && grid, "needs X and grid");
  MATH_CHECK(ctx, grid->dtype == DType::Float, "grid must be float, got " << dtype_name(grid->dtype));
  std::vector<int64_t> out_shape;
  const gridsample::Params p = gridsample::resolve(ctx, x->shape, grid->shape, &out_shape);
  RtTensor* y = ctx.output(0, x->dtype, out_shape);
  const int64_t N = out_shape[0], C = out_shape[1], H = x->shape[2], W = x->shape[3];
  const int64_t HWo = out_shape[2] * out_shape[3];
  const float* px = x->ptr<float>();
  const float* pg = grid->ptr<float>();
  float* py = y->ptr<float>();
  parallel_for(N * C, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / C;
      const float* plane = px + r * H * W;
      auto load = [plane, W](int64_t yy, int64_t xx) { return plane[yy * W + xx]; };
      for (int64_t o = 0; o < HWo; ++o) {
        const float* g = pg + (n * HWo + o) * 2;
        py[r * HWo + o] = gridsample::sample(load, H, W, g[0], g[1], p);
      }
    }
  });
}

}  // namespace
}  // namespace fuseopt
