// Conv (1-D and 2-D, groups, pads, strides, dilations, auto_pad) through
// im2col + GEMM; MaxPool / AveragePool (ceil_mode, count_include_pad);
// GlobalAveragePool / GlobalMaxPool; BatchNormalization (inference).
// 1-D cases run as 2-D with height 1.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/op_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

// Geometry of one spatial axis; pads/auto_pad/ceil_mode are resolved by
// dm::spatial_geometry, shared with the CUDA Conv and pooling kernels.
using Axis = dm::ConvAxis;
using dm::spatial_geometry;

// The output positions [lo, hi) of one axis whose window reaches the input: outside
// them every tap is padding and the output is the bias alone. Large pads
// (mutate_models.py seed 8 m534: pads 65536 on a 32-wide input) then cost the
// input's size, not the padded size (im2col and GEMM over 65567 columns ran past
// the timeout under ASan).
std::pair<int64_t, int64_t> touched(const Axis& a) {
  auto floor_div = [](int64_t n, int64_t d) { return n >= 0 ? n / d : -((-n + d - 1) / d); };
  // o * stride - pad_begin + (k - 1) * dil >= 0  and  o * stride - pad_begin <= in - 1
  int64_t lo = -floor_div(-(a.pad_begin - (a.k - 1) * a.dil), a.stride);  // ceil
  int64_t hi = floor_div(a.in - 1 + a.pad_begin, a.stride) + 1;
  lo = std::min(std::max<int64_t>(lo, 0), a.out);
  hi = std::min(std::max(hi, lo), a.out);
  return {lo, hi};
}

// As 2-D: returns {H axis, W axis}; 1-D inputs get a dummy H.
std::pair<Axis, Axis> as_2d(const std::vector<Axis>& axes) {
  if (axes.size() == 1) return {Axis{}, axes[0]};
  return {axes[0], axes[1]};
}

FUSEOPT_KERNEL(cpu_Conv, "", "Conv", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* w = ctx.input(1);
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && w, "needs X and W");
  MATH_CHECK(ctx, x->rank() == 3 || x->rank() == 4, "only 1-D and 2-D convolutions are supported, got X "
                                                        << shape_str(x->shape));
  MATH_CHECK(ctx, w->rank() == x->rank(), "W " << shape_str(w->shape) << " does not match X " << shape_str(x->shape));
  const int64_t group = ctx.node().attr_int("group", 1);
  const int64_t N = x->shape[0], C = x->shape[1], OC = w->shape[0], Cg = w->shape[1];
  MATH_CHECK(ctx, group >= 1 && C == Cg * group && OC % group == 0,
             "channels do not match: X " << shape_str(x->shape) << ", W " << shape_str(w->shape) << ", group " << group);
  std::vector<int64_t> in_sp(x->shape.begin() + 2, x->shape.end());
  std::vector<int64_t> k_sp(w->shape.begin() + 2, w->shape.end());
  std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape", k_sp);
  MATH_CHECK(ctx, ks == k_sp, "kernel_shape " << shape_str(ks) << " differs from W " << shape_str(w->shape));
  std::vector<Axis> axes = spatial_geometry(ctx, in_sp, k_sp, false);
  // Not a structured binding: the parallel_for lambda below captures them (clang < 16 cannot).
  const std::pair<Axis, Axis> hw = as_2d(axes);
  const Axis &ah = hw.first, &aw = hw.second;
  std::vector<int64_t> out_shape{N, OC};
  for (const Axis& a : axes) out_shape.push_back(a.out);
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  if (y->numel() == 0) return;
  if (bias) MATH_CHECK(ctx, bias->numel() == OC, "bias " << shape_str(bias->shape) << " must have " << OC << " elements");
  const int64_t OCg = OC / group, KK = Cg * ah.k * aw.k, P = ah.out * aw.out, HW = ah.in * aw.in;
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  // The window positions that reach the input, [h0, h1) x [w0, w1) (Pt of them);
  // the rest of Y is the bias (or 0).
  const std::pair<int64_t, int64_t> th = touched(ah), tw = touched(aw);
  const int64_t h0 = th.first, w0 = tw.first, nh = th.second - th.first, nw = tw.second - tw.first, Pt = nh * nw;
  const bool whole = Pt == P;
  if (!whole) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oc = 0; oc < OC; ++oc)
        std::fill_n(py + (n * OC + oc) * P, P, bias ? bias->ptr<float>()[oc] : 0.f);
    if (Pt == 0) return;
  }
  const float* pw = w->ptr<float>();
  const bool direct = ah.k == 1 && aw.k == 1 && ah.stride == 1 && aw.stride == 1 && ah.pad_begin == 0 &&
                      aw.pad_begin == 0 && ah.pad_end == 0 && aw.pad_end == 0;
  float* col = direct ? nullptr : static_cast<float*>(ctx.scratch(static_cast<size_t>(KK * Pt) * 4));
  float* part = whole ? nullptr : static_cast<float*>(ctx.scratch(static_cast<size_t>(OCg * Pt) * 4));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      const float* xg = px + (n * C + g * Cg) * HW;
      const float* B = xg;
      if (!direct) {
        // im2col: row (c, kh, kw), column (oh, ow) of the touched positions; zeros
        // where the window hits padding.
        parallel_for(Cg * ah.k * aw.k, 4, [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            int64_t c = r / (ah.k * aw.k), kh = (r / aw.k) % ah.k, kw = r % aw.k;
            float* dst = col + r * Pt;
            for (int64_t oh = h0; oh < h0 + nh; ++oh) {
              int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil;
              for (int64_t ow = w0; ow < w0 + nw; ++ow) {
                int64_t iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
                bool inside = ih >= 0 && ih < ah.in && iw >= 0 && iw < aw.in;
                dst[(oh - h0) * nw + (ow - w0)] = inside ? xg[c * HW + ih * aw.in + iw] : 0.f;
              }
            }
          }
        });
        B = col;
      }
      float* yg = py + (n * OC + g * OCg) * P;
      float* dst = whole ? yg : part;
      cpumath::gemm(OCg, Pt, KK, pw + g * OCg * KK, KK, B, Pt, dst, Pt, false);
      if (bias) {
        const float* pb = bias->ptr<float>() + g * OCg;
        for (int64_t oc = 0; oc < OCg; ++oc)
          for (int64_t p = 0; p < Pt; ++p) dst[oc * Pt + p] += pb[oc];
      }
      if (!whole)  // the touched rectangle into Y, whose other positions hold the bias already
        for (int64_t oc = 0; oc < OCg; ++oc)
          for (int64_t oh = 0; oh < nh; ++oh)
            std::memcpy(yg + oc * P + (h0 + oh) * aw.out + w0, part + oc * Pt + oh * nw, static_cast<size_t>(nw) * 4);
    }
  }
}

void pool_impl(KernelContext& ctx, bool is_max) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x && x->dtype == DType::Float, "expects a float32 input");
  MATH_CHECK(ctx, x->rank() == 3 || x->rank() == 4, "only 1-D and 2-D pooling is supported, got " << shape_str(x->shape));
  const Node& node = ctx.node();
  std::vector<int64_t> ks = node.attr_ints("kernel_shape");
  std::vector<int64_t> in_sp(x->shape.begin() + 2, x->shape.end());
  MATH_CHECK(ctx, ks.size() == in_sp.size(), "kernel_shape " << shape_str(ks) << " does not match input " << shape_str(x->shape));
  std::vector<Axis> axes = spatial_geometry(ctx, in_sp, ks, true);
  // Not a structured binding: the parallel_for lambda below captures them (clang < 16 cannot).
  const std::pair<Axis, Axis> hw = as_2d(axes);
  const Axis &ah = hw.first, &aw = hw.second;
  const bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  std::vector<int64_t> out_shape{x->shape[0], x->shape[1]};
  for (const Axis& a : axes) out_shape.push_back(a.out);
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  const int64_t planes = x->shape[0] * x->shape[1], HW = ah.in * aw.in, P = ah.out * aw.out;
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  parallel_for(planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* xp = px + pl * HW;
      for (int64_t oh = 0; oh < ah.out; ++oh)
        for (int64_t ow = 0; ow < aw.out; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          double sum = 0;
          int64_t count = 0, padded_count = 0;
          for (int64_t kh = 0; kh < ah.k; ++kh) {
            int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil;
            for (int64_t kw = 0; kw < aw.k; ++kw) {
              int64_t iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
              // Padded positions count for count_include_pad only inside the declared pads.
              if (ih >= -ah.pad_begin && ih < ah.in + ah.pad_end && iw >= -aw.pad_begin && iw < aw.in + aw.pad_end)
                ++padded_count;
              if (ih < 0 || ih >= ah.in || iw < 0 || iw >= aw.in) continue;
              float v = xp[ih * aw.in + iw];
              if (v > best || std::isnan(v)) best = std::isnan(best) ? best : v;
              sum += v;
              ++count;
            }
          }
          float r;
          if (is_max) r = best;
          else r = static_cast<float>(sum / static_cast<double>(include_pad ? padded_count : std::max<int64_t>(count, 1)));
          py[pl * P + oh * aw.out + ow] = r;
        }
    }
  });
}

FUSEOPT_KERNEL(cpu_MaxPool, "", "MaxPool", Backend::CPU, {DType::Float}) {
  MATH_CHECK(ctx, ctx.num_outputs() < 2 || !ctx.node().output(1), "the Indices output of MaxPool is not supported");
  pool_impl(ctx, true);
}
FUSEOPT_KERNEL(cpu_AveragePool, "", "AveragePool", Backend::CPU, {DType::Float}) { pool_impl(ctx, false); }

void global_pool(KernelContext& ctx, bool is_max) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x && x->dtype == DType::Float && x->rank() >= 2, "expects a float32 input [N, C, ...]");
  std::vector<int64_t> out_shape{x->shape[0], x->shape[1]};
  for (size_t i = 2; i < x->rank(); ++i) out_shape.push_back(1);
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  const int64_t planes = x->shape[0] * x->shape[1], S = cpumath::prod(x->shape, 2, x->rank());
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = px + p * S;
    if (is_max) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < S; ++i) m = std::isnan(xp[i]) || xp[i] > m ? xp[i] : m;
      py[p] = m;
    } else {
      double s = 0;
      for (int64_t i = 0; i < S; ++i) s += xp[i];
      py[p] = S ? static_cast<float>(s / static_cast<double>(S)) : std::nanf("");
    }
  }
}
FUSEOPT_KERNEL(cpu_GlobalAveragePool, "", "GlobalAveragePool", Backend::CPU, {DType::Float}) { global_pool(ctx, false); }
FUSEOPT_KERNEL(cpu_GlobalMaxPool, "", "GlobalMaxPool", Backend::CPU, {DType::Float}) { global_pool(ctx, true); }

// Inference form: y = (x - mean) / sqrt(var + eps) * scale + B, per channel (axis 1).
FUSEOPT_KERNEL(cpu_BatchNormalization, "", "BatchNormalization", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = ctx.input(1);
  const RtTensor* b = ctx.input(2);
  const RtTensor* mean = ctx.input(3);
  const RtTensor* var = ctx.input(4);
  MATH_CHECK(ctx, x && scale && b && mean && var, "needs X, scale, B, input_mean, input_var");
  MATH_CHECK(ctx, ctx.node().attr_int("training_mode", 0) == 0, "training_mode=1 is not supported");
  MATH_CHECK(ctx, x->rank() >= 2, "X must have rank >= 2, got " << shape_str(x->shape));
  const int64_t N = x->shape[0], C = x->shape[1], S = cpumath::prod(x->shape, 2, x->rank());
  for (const RtTensor* t : {scale, b, mean, var})
    MATH_CHECK(ctx, t->numel() == C && t->dtype == DType::Float, "per-channel inputs must be float32 [" << C << "], got "
                                                                                                  << shape_str(t->shape));
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  RtTensor* y = ctx.output(0, DType::Float, x->shape);
  const float* px = x->ptr<float>();
  float* py = y->ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      float inv = scale->ptr<float>()[c] / std::sqrt(var->ptr<float>()[c] + eps);
      float shift = b->ptr<float>()[c] - mean->ptr<float>()[c] * inv;
      const float* xs = px + (n * C + c) * S;
      float* ys = py + (n * C + c) * S;
      for (int64_t i = 0; i < S; ++i) ys[i] = xs[i] * inv + shift;
    }
}

}  // namespace
}  // namespace fuseopt
