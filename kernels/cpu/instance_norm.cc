// InstanceNormalization (opset 6+): X [N, C, D1, ...], scale [C], B [C];
// every (n, c) instance is normalised over its spatial elements:
//   y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c]
// with the biased variance. Statistics in double, two passes (mean, then the
// centred variance) so that a large common offset does not cancel. PyTorch
// exports GroupNorm with num_groups == C this way (wav2vec2 feature extractor).
#include <cmath>

#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_InstanceNormalization, "", "InstanceNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && scale && bias, "needs input, scale and B");
  MATH_CHECK(ctx, x->rank() >= 2, "input must have rank >= 2 (N, C, ...), got " << shape_str(x->shape));
  const int64_t N = x->shape[0], C = x->shape[1];
  const int64_t S = cpumath::prod(x->shape, 2, x->rank());
  MATH_CHECK(ctx, scale->dtype == DType::Float && bias->dtype == DType::Float, "scale and B must be float");
  MATH_CHECK(ctx, scale->numel() == C && scale->rank() == 1,
             "scale " << shape_str(scale->shape) << " must have shape [" << C << "] (the channel dim)");
  MATH_CHECK(ctx, bias->numel() == C && bias->rank() == 1,
             "B " << shape_str(bias->shape) << " must have shape [" << C << "] (the channel dim)");
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const float* px = x->ptr<float>();
  const float* g = scale->ptr<float>();
  const float* b = bias->ptr<float>();
  float* py = y->ptr<float>();
  if (S == 0) return;
  parallel_for(N * C, std::max<int64_t>(1, 4096 / S), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % C;
      const float* xr = px + r * S;
      float* yr = py + r * S;
      double sum = 0;
      for (int64_t i = 0; i < S; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(S);
      double sq = 0;
      for (int64_t i = 0; i < S; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(S) + eps);
      const double a = inv * g[c];
      for (int64_t i = 0; i < S; ++i) yr[i] = static_cast<float>((xr[i] - mean) * a + b[c]);
    }
  });
}

}  // namespace
}  // namespace fuseopt
