// fuseopt.FusedMatMulLayerNorm on the CPU (the reference):
//
//   inputs : 0 A [..., K], 1 W [K, N] (transB=0) or [N, K], 2 bias [N]?, 3 gamma [N], 4 beta [N]?,
//            5 skip [..., N]? (Y's shape exactly)
//   output : 0 Y [..., N]
//   attrs  : transB (0/1), alpha (1), activation (gelu / gelu_tanh; none with skip), epsilon (1e-5)
//   h = act(alpha · A·op(W) + bias) (+ skip);  Y = (h − mean(h)) / sqrt(var(h) + eps) · gamma (+ beta)
//
// Row by row: the GEMM row in fp32 with FusedMatMul's loop order, the activation
// of fused_activation.h (or the skip row added in fp32), then the statistics as
// LayerNormalization and SkipLayerNorm compute them (row_stats.h, double,
// two-pass). Each step is therefore the same arithmetic as the unfused
// FusedMatMul + LayerNormalization (or + SkipLayerNorm) kernels, and the fused op
// reproduces that graph on the CPU to the bit.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cpu/fused_activation.h"
#include "kernels/cpu/row_stats.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

#define FMLN_CHECK(cond, msg) FUSE_CHECK(cond, ctx.node().label() << ": FusedMatMulLayerNorm " << msg)

const RtTensor* opt_input(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

void check_vector(KernelContext& ctx, const RtTensor* t, int64_t n, const char* what) {
  if (!t) return;
  FMLN_CHECK(t->numel() == n && t->rank() >= 1 && t->shape.back() == n,
             what << " " << shape_str(t->shape) << " is not [" << n << "]");
}

}  // namespace

FUSEOPT_KERNEL(CpuFusedMatMulLayerNorm, "fuseopt", "FusedMatMulLayerNorm", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* w = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  const RtTensor* gamma = opt_input(ctx, 3);
  const RtTensor* beta = opt_input(ctx, 4);
  const RtTensor* skip = opt_input(ctx, 5);
  FMLN_CHECK(a && w && gamma, "needs A, W and gamma");
  for (const RtTensor* t : {a, w, bias, gamma, beta, skip})
    FMLN_CHECK(!t || t->dtype == DType::Float, "CPU kernel supports float tensors only, got " << dtype_name(t->dtype));
  FMLN_CHECK(a->rank() >= 1, "needs A of rank >= 1");
  FMLN_CHECK(w->rank() == 2, "needs a 2-D W, got " << shape_str(w->shape));
  const bool trans_b = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.0f);
  const float eps = n.attr_float("epsilon", 1e-5f);
  const cpu::Activation act = cpu::parse_activation(n);
  if (skip)
    FMLN_CHECK(act == cpu::Activation::None,
               "with skip the activation must be none, got '" << n.attr_string("activation", "none") << "'");
  else
    FMLN_CHECK(act == cpu::Activation::Gelu || act == cpu::Activation::GeluTanh,
               "activation must be gelu or gelu_tanh (none only with skip), got '"
                   << n.attr_string("activation", "none") << "'");
  const int64_t K = a->shape.back();
  const int64_t N = trans_b ? w->shape[0] : w->shape[1];
  FMLN_CHECK((trans_b ? w->shape[1] : w->shape[0]) == K,
             "inner dims differ: A " << shape_str(a->shape) << ", W " << shape_str(w->shape) << (trans_b ? " (transB)" : ""));
  check_vector(ctx, bias, N, "bias");
  check_vector(ctx, gamma, N, "gamma");
  check_vector(ctx, beta, N, "beta");

  std::vector<int64_t> yshape = a->shape;
  yshape.back() = N;
  FMLN_CHECK(!skip || skip->shape == yshape,
             "skip " << shape_str(skip->shape) << " is not Y's shape " << shape_str(yshape) << " (no broadcast)");
  RtTensor* y = ctx.output(0, DType::Float, yshape);
  // Rows of Y (with K = 0 every row is the norm of act(bias)).
  const int64_t out_rows = shape_numel(yshape) / std::max<int64_t>(1, N);
  if (N == 0 || out_rows == 0) return;
  const float* pa = a->ptr<float>();
  const float* pw = w->ptr<float>();
  const float* pbias = bias ? bias->ptr<float>() : nullptr;
  const float* pg = gamma->ptr<float>();
  const float* pb = beta ? beta->ptr<float>() : nullptr;
  const float* pskip = skip ? skip->ptr<float>() : nullptr;
  float* py = y->ptr<float>();

  parallel_for(out_rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, N * std::max<int64_t>(1, K))),
               [&](int64_t lo, int64_t hi) {
                 std::vector<float> h(static_cast<size_t>(N));
                 for (int64_t r = lo; r < hi; ++r) {
                   const float* arow = pa + r * K;
                   // The GEMM row, accumulated as CpuFusedMatMul does (kernels/cpu/fused_matmul.cc).
                   if (trans_b) {
                     for (int64_t j = 0; j < N; ++j) {
                       const float* wrow = pw + j * K;
                       float s = 0.0f;
                       for (int64_t k = 0; k < K; ++k) s += arow[k] * wrow[k];
                       h[j] = s;
                     }
                   } else {
                     std::fill(h.begin(), h.end(), 0.0f);
                     for (int64_t k = 0; k < K; ++k) {
                       const float av = arow[k];
                       const float* wrow = pw + k * N;
                       for (int64_t j = 0; j < N; ++j) h[j] += av * wrow[j];
                     }
                   }
                   for (int64_t j = 0; j < N; ++j) {
                     float v = alpha == 1.0f ? h[j] : alpha * h[j];
                     if (pbias) v += pbias[j];
                     h[j] = cpu::apply_activation(act, v);
                   }
                   // Sum = h + skip, as CpuFusedSkipLayerNorm adds its summands (fp32; commutative).
                   if (pskip)
                     for (int64_t j = 0; j < N; ++j) h[j] += pskip[r * N + j];
                   // The norm, as the LayerNormalization and SkipLayerNorm CPU kernels compute it.
                   const cpu::RowStats st = cpu::row_stats(h.data(), N, eps);
                   float* yrow = py + r * N;
                   for (int64_t j = 0; j < N; ++j) {
                     const float v = static_cast<float>((h[j] - st.mean) * st.inv_std) * pg[j];
                     yrow[j] = pb ? v + pb[j] : v;
                   }
                 }
               });
}

}  // namespace fuseopt
