// ONNX RotaryEmbedding (opset 23) on the CPU reference backend; semantics in
// kernels/common/rotary_params.h (shared with the CUDA kernel).
#include "kernels/common/rotary_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_RotaryEmbedding, "", "RotaryEmbedding", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* cos_c = dm::opt_input(ctx, 1);
  const RtTensor* sin_c = dm::opt_input(ctx, 2);
  MATH_CHECK(ctx, x && cos_c && sin_c, "needs X, cos_cache and sin_cache");
  MATH_CHECK(ctx, cos_c->dtype == DType::Float && sin_c->dtype == DType::Float, "caches must be float");
  const RtTensor* pos = dm::opt_input(ctx, 3);
  const dm::RotaryParams p = dm::resolve_rotary(ctx, *x, *cos_c, *sin_c, pos);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const float* px = x->ptr<float>();
  const float* pc = cos_c->ptr<float>();
  const float* ps = sin_c->ptr<float>();
  float* py = y->ptr<float>();
  const int64_t half = p.R / 2;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t s = 0; s < p.S; ++s) {
      int64_t row = (p.cache_batch == 1 ? 0 : b) * p.S + s;
      if (p.has_pos) {
        row = pos->ptr<int64_t>()[b * p.S + s];
        MATH_CHECK(ctx, row >= 0 && row < p.max_pos,
                   "position id " << row << " is out of range [0, " << p.max_pos - 1 << "]");
      }
      const float* cr = pc + row * half;
      const float* sr = ps + row * half;
      for (int64_t h = 0; h < p.H; ++h) {
        const int64_t base = p.four_d ? ((b * p.H + h) * p.S + s) * p.D : ((b * p.S + s) * p.H + h) * p.D;
        const float* xv = px + base;
        float* yv = py + base;
        if (h >= p.rotated_heads) {  // fuseopt's packed form: V (and any head past rotated_heads) passes
          for (int64_t d = 0; d < p.D; ++d) yv[d] = xv[d];
          continue;
        }
        for (int64_t d = p.R; d < p.D; ++d) yv[d] = xv[d];
        for (int64_t i = 0; i < half; ++i) {
          const int64_t i1 = p.interleaved ? 2 * i : i, i2 = p.interleaved ? 2 * i + 1 : i + half;
          const float x1 = xv[i1], x2 = xv[i2];
          yv[i1] = cr[i] * x1 - sr[i] * x2;
          yv[i2] = sr[i] * x1 + cr[i] * x2;
        }
      }
    }
}

// fuseopt.RotaryEmbedding (the rotary fusion's op): the same kernel, whose
// caches may also broadcast over the batch (kernels/common/rotary_params.h).
KernelRegistrar cpu_fuseopt_rotary_registrar(
    KernelInfo{"fuseopt", "RotaryEmbedding", Backend::CPU, {DType::Float}, cpu_RotaryEmbedding});

}  // namespace
}  // namespace fuseopt
