// InstanceNormalization (opset 6+) and GroupNormalization (opset 18/21).
// InstanceNormalization: X [N, C, D1, ...], scale [C], B [C];
// every (n, c) instance is normalised over its spatial elements:
//   y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c]
// with the biased variance. Statistics in double, two passes (mean, then the
// centred variance) so that a large common offset does not cancel. PyTorch
// exports GroupNorm with num_groups == C this way (wav2vec2 feature extractor).
// GroupNormalization is the same over groups of C / num_groups channels.
#include <cmath>

#include "kernels/cpu/math_util.h"
#include "kernels/cpu/row_stats.h"

namespace fuseopt {
namespace {

// Normalises each of the N * G groups of Cg consecutive channels (Cg * S
// contiguous elements), then applies the per-channel (or per-group, when
// per_group_params) scale and B.
void group_norm(KernelContext& ctx, const RtTensor& x, const float* g, const float* b, int64_t G, bool per_group_params,
                float eps) {
  const int64_t N = x.shape[0], C = x.shape[1], Cg = C / G;
  const int64_t S = cpumath::prod(x.shape, 2, x.rank()), D = Cg * S;
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const float* px = x.ptr<float>();
  float* py = y->ptr<float>();
  if (D == 0) return;
  parallel_for(N * G, std::max<int64_t>(1, 4096 / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t grp = r % G;
      const float* xr = px + r * D;
      float* yr = py + r * D;
      const cpu::RowStats st = cpu::row_stats(xr, D, eps);
      const double mean = st.mean, inv = st.inv_std;
      for (int64_t cc = 0; cc < Cg; ++cc) {
        const int64_t p = per_group_params ? grp : grp * Cg + cc;
        const double a = inv * g[p], shift = b[p];
        for (int64_t i = cc * S; i < (cc + 1) * S; ++i) yr[i] = static_cast<float>((xr[i] - mean) * a + shift);
      }
    }
  });
}

void check_param(KernelContext& ctx, const RtTensor* t, const char* what, int64_t want, const char* dim) {
  MATH_CHECK(ctx, t->dtype == DType::Float, what << " must be float, got " << dtype_name(t->dtype));
  MATH_CHECK(ctx, t->numel() == want && t->rank() == 1,
             what << " " << shape_str(t->shape) << " must have shape [" << want << "] (" << dim << ")");
}

FUSEOPT_KERNEL(cpu_InstanceNormalization, "", "InstanceNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && scale && bias, "needs input, scale and B");
  MATH_CHECK(ctx, x->rank() >= 2, "input must have rank >= 2 (N, C, ...), got " << shape_str(x->shape));
  const int64_t C = x->shape[1];
  check_param(ctx, scale, "scale", C, "the channel dim");
  check_param(ctx, bias, "B", C, "the channel dim");
  group_norm(ctx, *x, scale->ptr<float>(), bias->ptr<float>(), C, false, ctx.node().attr_float("epsilon", 1e-5f));
}

// GroupNormalization: opset 21 has per-channel scale/bias [C]; opset 18 had
// per-group [num_groups]. The kernel does not see the opset, so the length
// decides (the two agree when num_groups == C).
FUSEOPT_KERNEL(cpu_GroupNormalization, "", "GroupNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && scale && bias, "needs X, scale and bias");
  MATH_CHECK(ctx, x->rank() >= 2, "X must have rank >= 2 (N, C, ...), got " << shape_str(x->shape));
  MATH_CHECK(ctx, ctx.node().has_attr("num_groups"), "missing attribute num_groups");
  const int64_t G = ctx.node().attr_int("num_groups", 0), C = x->shape[1];
  MATH_CHECK(ctx, G > 0 && C % G == 0, "num_groups " << G << " must be positive and divide the channels " << C);
  const bool per_group = scale->numel() != C;
  const int64_t want = per_group ? G : C;
  check_param(ctx, scale, "scale", want, per_group ? "num_groups (opset 18) or channels (opset 21)" : "the channel dim");
  check_param(ctx, bias, "bias", want, per_group ? "num_groups (opset 18) or channels (opset 21)" : "the channel dim");
  group_norm(ctx, *x, scale->ptr<float>(), bias->ptr<float>(), G, per_group, ctx.node().attr_float("epsilon", 1e-5f));
}

}  // namespace
}  // namespace fuseopt
