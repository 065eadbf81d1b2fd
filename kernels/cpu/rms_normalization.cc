// ONNX RMSNormalization (opset 23; the dynamo exporter's rms_norm):
//   y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale
// scale broadcasts to the normalised shape. The mean square is accumulated
// in double (stash_type only asks for at least fp32).
#include <array>
#include <cmath>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_RMSNormalization, "", "RMSNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  MATH_CHECK(ctx, x && scale, "needs X and scale");
  MATH_CHECK(ctx, x->rank() >= 1, "X must have rank >= 1");
  MATH_CHECK(ctx, scale->dtype == DType::Float, "scale must be float, got " << dtype_name(scale->dtype));
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = cpumath::prod(x->shape, 0, axis), D = cpumath::prod(x->shape, axis, x->rank());
  const std::vector<int64_t> norm_shape(x->shape.begin() + axis, x->shape.end());
  const std::vector<int64_t> bs = cpu::broadcast_shape({scale->shape, norm_shape}, ctx.node());
  MATH_CHECK(ctx, bs == norm_shape,
             "scale " << shape_str(scale->shape) << " does not broadcast to " << shape_str(norm_shape));
  const float* g = scale->ptr<float>();
  if (scale->numel() != D) {  // materialise a broadcast scale as a dense row
    float* d = static_cast<float*>(ctx.scratch(static_cast<size_t>(std::max<int64_t>(1, D)) * 4));
    std::array<std::vector<int64_t>, 1> st = {cpu::broadcast_strides(scale->shape, norm_shape)};
    cpu::for_each_broadcast<1>(norm_shape, st, [&](int64_t o, const std::array<int64_t, 1>& off) { d[o] = g[off[0]]; });
    g = d;
  }
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  if (D == 0) return;
  parallel_for(rows, std::max<int64_t>(1, 4096 / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * D;
      float* yr = py + r * D;
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += static_cast<double>(xr[i]) * xr[i];
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(D) + eps);
      for (int64_t i = 0; i < D; ++i) yr[i] = static_cast<float>(xr[i] * inv * g[i]);
    }
  });
}

}  // namespace
}  // namespace fuseopt
