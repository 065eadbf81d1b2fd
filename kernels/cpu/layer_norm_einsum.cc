// LayerNormalization (opset 17: axis, epsilon, stats in fp32/double,
// optional Mean / InvStdDev outputs) and Einsum (any explicit or implicit
// equation, ellipsis, repeated letters; summed by a direct index walk, with
// the summed combinations' offsets precomputed once per call).
#include <array>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/common/einsum_equation.h"
#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"
#include "kernels/cpu/row_stats.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_LayerNormalization, "", "LayerNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && scale, "needs X and Scale");
  MATH_CHECK(ctx, x->rank() >= 1, "X must have rank >= 1");
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = cpumath::prod(x->shape, 0, axis), D = cpumath::prod(x->shape, axis, x->rank());
  std::vector<int64_t> norm_shape(x->shape.begin() + axis, x->shape.end());
  // Scale and B broadcast to the normalised shape.
  auto check_param = [&](const RtTensor* t, const char* what) {
    if (!t) return;
    std::vector<int64_t> bs = cpu::broadcast_shape({t->shape, norm_shape}, ctx.node());
    MATH_CHECK(ctx, bs == norm_shape, what << " " << shape_str(t->shape) << " does not broadcast to "
                                           << shape_str(norm_shape));
  };
  check_param(scale, "Scale");
  check_param(bias, "B");
  // Materialise broadcast Scale/B as dense [D] rows (usually they already are).
  auto dense = [&](const RtTensor* t) -> const float* {
    if (!t) return nullptr;
    if (t->numel() == D) return t->ptr<float>();
    float* d = static_cast<float*>(ctx.scratch(static_cast<size_t>(D) * 4));
    std::array<std::vector<int64_t>, 1> st = {cpu::broadcast_strides(t->shape, norm_shape)};
    const float* p = t->ptr<float>();
    cpu::for_each_broadcast<1>(norm_shape, st, [&](int64_t o, const std::array<int64_t, 1>& off) { d[o] = p[off[0]]; });
    return d;
  };
  const float* g = dense(scale);
  const float* b = dense(bias);
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  std::vector<int64_t> stat_shape = x->shape;
  for (size_t i = axis; i < stat_shape.size(); ++i) stat_shape[i] = 1;
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  if (ctx.num_outputs() > 1 && ctx.node().output(1)) mean_out = ctx.output(1, DType::Float, stat_shape)->ptr<float>();
  if (ctx.num_outputs() > 2 && ctx.node().output(2)) inv_out = ctx.output(2, DType::Float, stat_shape)->ptr<float>();
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, D)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * D;
      float* yr = py + r * D;
      const cpu::RowStats st = cpu::row_stats(xr, D, eps);
      const double mean = st.mean, inv = st.inv_std;
      for (int64_t i = 0; i < D; ++i) {
        float v = static_cast<float>((xr[i] - mean) * inv) * g[i];
        yr[i] = b ? v + b[i] : v;
      }
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
    }
  });
}

// ---- Einsum -------------------------------------------------------------------

// The equation (letters, ellipsis, implicit output) and the index strides come
// from kernels/common/einsum_equation.h, shared with the CUDA kernel.
FUSEOPT_KERNEL(cpu_Einsum, "", "Einsum", Backend::CPU, {DType::Float}) {
  std::vector<const RtTensor*> ops;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    MATH_CHECK(ctx, ctx.input(i) && ctx.input(i)->dtype == DType::Float, "operands must be float32");
    ops.push_back(ctx.input(i));
    shapes.push_back(ctx.input(i)->shape);
  }
  MATH_CHECK(ctx, !ops.empty(), "needs at least one operand");
  const einsum::Plan plan = einsum::plan(ctx.node().label(), ctx.node().attr_string("equation", ""), shapes);
  const std::vector<int64_t>& out_shape = plan.out_shape;
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  const auto& out_st = plan.out_strides;
  const auto& sum_st = plan.sum_strides;
  const std::vector<int64_t>& sum_dims = plan.sum_shape;
  const int64_t n_sum = shape_numel(sum_dims);
  // Offsets of every summed combination per operand, precomputed once.
  std::vector<std::vector<int64_t>> sum_off(ops.size(), std::vector<int64_t>(static_cast<size_t>(n_sum), 0));
  for (int64_t s = 0; s < n_sum; ++s) {
    int64_t rem = s;
    for (int64_t d = static_cast<int64_t>(sum_dims.size()) - 1; d >= 0; --d) {
      int64_t idx = rem % sum_dims[d];
      rem /= sum_dims[d];
      for (size_t t = 0; t < ops.size(); ++t) sum_off[t][s] += idx * sum_st[t][d];
    }
  }
  float* py = y->ptr<float>();
  const int64_t n_out = y->numel();
  parallel_for(n_out, 64, [&](int64_t o0, int64_t o1) {
    std::vector<int64_t> base(ops.size());
    for (int64_t o = o0; o < o1; ++o) {
      std::fill(base.begin(), base.end(), 0);
      int64_t rem = o;
      for (int64_t d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
        int64_t idx = rem % out_shape[d];
        rem /= out_shape[d];
        for (size_t t = 0; t < ops.size(); ++t) base[t] += idx * out_st[t][d];
      }
      float acc = 0.f;
      for (int64_t s = 0; s < n_sum; ++s) {
        float p = 1.f;
        for (size_t t = 0; t < ops.size(); ++t) p *= ops[t]->ptr<float>()[base[t] + sum_off[t][s]];
        acc += p;
      }
      py[o] = acc;
    }
  });
}

}  // namespace
}  // namespace fuseopt
