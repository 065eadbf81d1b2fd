// LpNormalization, MeanVarianceNormalization and LRN on the CPU reference
// backend (semantics: kernels/common/norm_extra_params.h). Sums in double.
#include <cmath>

#include "kernels/common/norm_extra_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_LpNormalization, "", "LpNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x && x->rank() >= 1, "needs an input of rank >= 1");
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  const int64_t p = ctx.node().attr_int("p", 2);
  MATH_CHECK(ctx, p == 1 || p == 2, "p must be 1 or 2, got " << p);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const int64_t outer = cpumath::prod(x->shape, 0, axis), n = x->shape[axis];
  const int64_t inner = cpumath::prod(x->shape, axis + 1, x->rank());
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double norm = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double v = px[base + k * inner];
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      for (int64_t k = 0; k < n; ++k)
        py[base + k * inner] = norm == 0 ? 0.f : static_cast<float>(px[base + k * inner] / norm);
    }
}

FUSEOPT_KERNEL(cpu_MeanVarianceNormalization, "", "MeanVarianceNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  const dm::ReduceGroups g = dm::resolve_mvn(ctx, x->shape);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  if (!g.group_size) return;
  for (int64_t k = 0; k < g.groups; ++k) {
    const int64_t base = dm::radix_offset(k, g.kept_dims, g.kept_strides);
    double sum = 0;
    for (int64_t r = 0; r < g.group_size; ++r) sum += px[base + dm::radix_offset(r, g.red_dims, g.red_strides)];
    const double mean = sum / static_cast<double>(g.group_size);
    double sq = 0;
    for (int64_t r = 0; r < g.group_size; ++r) {
      const double d = px[base + dm::radix_offset(r, g.red_dims, g.red_strides)] - mean;
      sq += d * d;
    }
    const double denom = std::sqrt(sq / static_cast<double>(g.group_size)) + 1e-9;
    for (int64_t r = 0; r < g.group_size; ++r) {
      const int64_t off = base + dm::radix_offset(r, g.red_dims, g.red_strides);
      py[off] = static_cast<float>((px[off] - mean) / denom);
    }
  }
}

FUSEOPT_KERNEL(cpu_LRN, "", "LRN", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  const dm::LrnParams p = dm::resolve_lrn(ctx, x->shape);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t s = 0; s < p.S; ++s) {
        double sq = 0;
        for (int64_t j = std::max<int64_t>(0, c - p.before); j <= std::min(p.C - 1, c + p.after); ++j) {
          const double v = px[(n * p.C + j) * p.S + s];
          sq += v * v;
        }
        const int64_t i = (n * p.C + c) * p.S + s;
        py[i] = static_cast<float>(px[i] / std::pow(p.bias + p.alpha / static_cast<double>(p.size) * sq, p.beta));
      }
}

}  // namespace
}  // namespace fuseopt
