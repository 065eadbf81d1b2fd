// ONNX Attention (opset 23; the dynamo exporter's scaled_dot_product_attention
// at opset >= 23): reference kernel, one query row at a time, scores and
// softmax in fp32 (exp sums in double), GQA, past key/value with present
// outputs, bool/float masks, bottom-right causal, softcap, opset 25's sliding window. Semantics and
// parameter checks: kernels/common/onnx_attention_params.h (shared with CUDA).
#include <cmath>
#include <limits>

#include "kernels/common/onnx_attention_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_OnnxAttention, "", "Attention", Backend::CPU, {DType::Float}) {
  const RtTensor* q = ctx.input(0);
  const RtTensor* k = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* v = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, q && k && v, "needs Q, K and V");
  const RtTensor* mask = dm::opt_input(ctx, 3);
  const RtTensor* past_k = dm::opt_input(ctx, 4);
  const RtTensor* past_v = dm::opt_input(ctx, 5);
  for (const RtTensor* t : {k, v, past_k, past_v})
    MATH_CHECK(ctx, !t || t->dtype == DType::Float, "Q, K, V and the past tensors must be float");
  MATH_CHECK(ctx, !mask || mask->dtype == DType::Bool || mask->dtype == DType::Float,
             "attn_mask must be bool or float, got " << dtype_name(mask->dtype));
  const dm::OnnxAttentionParams p = dm::resolve_onnx_attention(ctx, *q, *k, *v, mask, past_k, past_v);
  float* y = ctx.output(0, q->dtype, p.y_shape)->ptr<float>();
  float* present_k = dm::wants_output(ctx, 1) ? ctx.output(1, q->dtype, p.present_k_shape)->ptr<float>() : nullptr;
  float* present_v = dm::wants_output(ctx, 2) ? ctx.output(2, q->dtype, p.present_v_shape)->ptr<float>() : nullptr;
  const float* pq = q->ptr<float>();
  const float* pk = k->ptr<float>();
  const float* pv = v->ptr<float>();
  const float* ppk = past_k ? past_k->ptr<float>() : nullptr;
  const float* ppv = past_v ? past_v->ptr<float>() : nullptr;
  // Key/value element (b, kv head, position j of T, d): past first, then K/V.
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    if (j < p.P) return ppk[((b * p.Hkv + h) * p.P + j) * p.D + d];
    j -= p.P;
    return pk[b * p.k_st[0] + h * p.k_st[1] + j * p.k_st[2] + d];
  };
  auto value = [&](int64_t b, int64_t h, int64_t j, int64_t d) {
    if (j < p.P) return ppv[((b * p.Hkv + h) * p.P + j) * p.Dv + d];
    j -= p.P;
    return pv[b * p.v_st[0] + h * p.v_st[1] + j * p.v_st[2] + d];
  };
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hkv; ++h)
      for (int64_t j = 0; j < p.T; ++j) {
        if (present_k)
          for (int64_t d = 0; d < p.D; ++d) present_k[((b * p.Hkv + h) * p.T + j) * p.D + d] = key(b, h, j, d);
        if (present_v)
          for (int64_t d = 0; d < p.Dv; ++d) present_v[((b * p.Hkv + h) * p.T + j) * p.Dv + d] = value(b, h, j, d);
      }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t group = p.Hq / p.Hkv;
  parallel_for(p.B * p.Hq * p.Sq, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> s(static_cast<size_t>(p.T));
    std::vector<double> acc(static_cast<size_t>(p.Dv));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r % p.Sq, h = (r / p.Sq) % p.Hq, b = r / (p.Sq * p.Hq), hk = h / group;
      const float* qr = pq + b * p.q_st[0] + h * p.q_st[1] + i * p.q_st[2];
      float mx = neg_inf;
      bool any_allowed = false;
      for (int64_t j = 0; j < p.T; ++j) {
        float bias = 0.f;
        if (p.has_mask) {
          if (j >= p.mask_len) {
            bias = neg_inf;
          } else {
            const int64_t off = b * p.m_st[0] + h * p.m_st[1] + i * p.m_st[2] + j * p.m_st[3];
            bias = p.mask_bool ? (mask->ptr<bool>()[off] ? 0.f : neg_inf) : mask->ptr<float>()[off];
          }
        }
        if (p.causal && j > i + p.P) bias = neg_inf;
        if (!dm::window_keeps(p.left_window, p.right_window, i, p.P, j)) bias = neg_inf;
        if (bias != neg_inf) any_allowed = true;
        float dot = 0.f;
        for (int64_t d = 0; d < p.D; ++d) dot += qr[d] * key(b, hk, j, d);
        float sc = dot * p.scale;
        if (p.softcap > 0.f) sc = p.softcap * std::tanh(sc / p.softcap);
        s[j] = sc + bias;
        mx = std::max(mx, s[j]);
      }
      float* yr = p.three_d ? y + (b * p.Sq + i) * p.Hq * p.Dv + h * p.Dv : y + ((b * p.Hq + h) * p.Sq + i) * p.Dv;
      if (!any_allowed) {  // fully masked row: Y = 0 (ONNX)
        for (int64_t d = 0; d < p.Dv; ++d) yr[d] = 0.f;
        continue;
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < p.T; ++j) {
        const double e = std::exp(static_cast<double>(s[j]) - mx);
        sum += e;
        if (e == 0) continue;
        for (int64_t d = 0; d < p.Dv; ++d) acc[d] += e * value(b, hk, j, d);
      }
      for (int64_t d = 0; d < p.Dv; ++d) yr[d] = static_cast<float>(acc[d] / sum);
    }
  });
}

}  // namespace
}  // namespace fuseopt
