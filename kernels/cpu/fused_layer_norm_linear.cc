// fuseopt.LayerNormLinear on the CPU: normalise each row, then one GEMM.
//
//   inputs : 0 X [..., K], 1 gamma [K], 2 beta [K]?, 3 W [K, N] (transB=0) or [N, K],
//            4 bias [N]?, 5 skip (shape of X)?
//   outputs: 0 Y [..., N], 1 Sum (shape of X)? = X + skip
//   attrs  : epsilon (1e-5), rms (0/1), transB (0/1),
//            activation (none/relu/gelu/gelu_tanh/tanh/relu2/quick_gelu/silu)
//   Z = X (+ skip); Y = act(norm(Z) · op(W) + bias)
// Statistics and dot products accumulate in fp32; the variance is computed
// from the centred values (two passes), like ONNX LayerNormalization.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/fused_activation.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

#define LNL_CHECK(cond, msg) FUSE_CHECK(cond, ctx.node().label() << ": " << msg)

// The activations come from kernels/cpu/fused_activation.h (shared with FusedMatMul).
using cpu::Activation;
using cpu::apply_activation;

}  // namespace

FUSEOPT_KERNEL(FusedLayerNormLinearCpu, "fuseopt", "LayerNormLinear", Backend::CPU, {DType::Float}) {
  const Node& node = ctx.node();
  auto in = [&](size_t i) { return ctx.num_inputs() > i ? ctx.input(i) : nullptr; };
  const RtTensor* x = in(0);
  const RtTensor* gamma = in(1);
  const RtTensor* beta = in(2);
  const RtTensor* w = in(3);
  const RtTensor* bias = in(4);
  const RtTensor* skip = in(5);
  LNL_CHECK(x && gamma && w, "X, gamma and W are required");
  LNL_CHECK(x->rank() >= 1, "X must have rank >= 1");
  const int64_t K = x->shape.back();
  const bool transB = node.attr_int("transB", 0) != 0;
  const bool rms = node.attr_int("rms", 0) != 0;
  const float eps = node.attr_float("epsilon", 1e-5f);
  const Activation act = cpu::parse_activation(node);
  LNL_CHECK(w->rank() == 2, "W must be 2-D, got rank " << w->rank());
  const int64_t N = transB ? w->shape[0] : w->shape[1];
  LNL_CHECK((transB ? w->shape[1] : w->shape[0]) == K, "W " << shape_str(w->shape) << " does not match K=" << K);
  LNL_CHECK(gamma->numel() == K, "gamma has " << gamma->numel() << " elements, expected " << K);
  LNL_CHECK(!beta || beta->numel() == K, "beta has " << beta->numel() << " elements, expected " << K);
  LNL_CHECK(!bias || bias->numel() == N, "bias has " << bias->numel() << " elements, expected " << N);
  // Z = X + skip broadcasts like numpy (a [1, S, K] position table, a [S, K] skip).
  std::vector<int64_t> zshape = x->shape;
  std::vector<int64_t> xstride, sstride;  // element strides of X / skip over zshape (0 = broadcast)
  if (skip) {
    const size_t r = std::max(x->rank(), skip->rank());
    zshape.assign(r, 1);
    for (size_t i = 0; i < r; ++i) {
      const int64_t a = i + x->rank() >= r ? x->shape[i + x->rank() - r] : 1;
      const int64_t b = i + skip->rank() >= r ? skip->shape[i + skip->rank() - r] : 1;
      LNL_CHECK(a == b || a == 1 || b == 1, "skip shape " << shape_str(skip->shape) << " does not broadcast with X shape "
                                                           << shape_str(x->shape));
      zshape[i] = a == 1 ? b : a;
    }
    LNL_CHECK(zshape.back() == K && skip->shape.back() == K, "skip must have the last dim K=" << K);
    auto strides = [&](const RtTensor* t) {
      std::vector<int64_t> st(r, 0);
      int64_t acc = 1;
      for (size_t i = r; i-- > 0;) {
        const size_t ti = i + t->rank() - r;
        if (i + t->rank() < r) break;
        st[i] = t->shape[ti] == 1 ? 0 : acc;
        acc *= t->shape[ti];
      }
      return st;
    };
    xstride = strides(x);
    sstride = strides(skip);
  }
  const int64_t rows = K == 0 ? 0 : shape_numel(zshape) / K;
  for (const RtTensor* t : {gamma, beta, w, bias, skip})
    LNL_CHECK(!t || t->dtype == DType::Float, "all inputs must be float");

  std::vector<int64_t> yshape = zshape;
  yshape.back() = N;
  RtTensor* y = ctx.output(0, DType::Float, yshape);
  RtTensor* sum = ctx.num_outputs() > 1 && node.output(1) ? ctx.output(1, DType::Float, zshape) : nullptr;

  const float* xp = x->ptr<float>();
  const float* sp = skip ? skip->ptr<float>() : nullptr;
  const float* gp = gamma->ptr<float>();
  const float* bp = beta ? beta->ptr<float>() : nullptr;
  const float* wp = w->ptr<float>();
  const float* biasp = bias ? bias->ptr<float>() : nullptr;
  float* yp = y->ptr<float>();
  float* sump = sum ? sum->ptr<float>() : nullptr;

  parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> z(static_cast<size_t>(K)), acc(static_cast<size_t>(N));
    for (int64_t r = begin; r < end; ++r) {
      if (sp) {
        // Offsets of this row's first element in X and skip (row index -> leading indices).
        int64_t xo = 0, so = 0, rem = r;
        for (size_t d = zshape.size() - 1; d-- > 0;) {
          const int64_t idx = rem % zshape[d];
          rem /= zshape[d];
          xo += idx * xstride[d];
          so += idx * sstride[d];
        }
        const int64_t xs = xstride.back(), ss = sstride.back();
        for (int64_t c = 0; c < K; ++c) z[c] = xp[xo + c * xs] + sp[so + c * ss];
      } else {
        const float* xr = xp + r * K;
        for (int64_t c = 0; c < K; ++c) z[c] = xr[c];
      }
      if (sump)
        for (int64_t c = 0; c < K; ++c) sump[r * K + c] = z[c];
      float mean = 0.0f;
      if (!rms) {
        for (int64_t c = 0; c < K; ++c) mean += z[c];
        mean /= static_cast<float>(K);
      }
      float var = 0.0f;
      for (int64_t c = 0; c < K; ++c) {
        const float d = z[c] - mean;
        var += d * d;
      }
      var /= static_cast<float>(K);
      const float inv = 1.0f / std::sqrt(var + eps);
      for (int64_t c = 0; c < K; ++c) z[c] = (z[c] - mean) * inv * gp[c] + (bp ? bp[c] : 0.0f);
      // GEMM row: acc[n] = sum_k z[k] * W[k, n]
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (!transB) {
        for (int64_t c = 0; c < K; ++c) {
          const float zc = z[c];
          const float* wr = wp + c * N;
          for (int64_t n = 0; n < N; ++n) acc[n] += zc * wr[n];
        }
      } else {
        for (int64_t n = 0; n < N; ++n) {
          const float* wr = wp + n * K;
          float s = 0.0f;
          for (int64_t c = 0; c < K; ++c) s += z[c] * wr[c];
          acc[n] = s;
        }
      }
      float* yr = yp + r * N;
      for (int64_t n = 0; n < N; ++n) yr[n] = apply_activation(act, acc[n] + (biasp ? biasp[n] : 0.0f));
    }
  });
}

}  // namespace fuseopt
