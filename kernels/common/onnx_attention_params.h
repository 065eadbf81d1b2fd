// ONNX Attention (opsets 23-25) parameter resolution shared by the CPU reference
// (kernels/cpu/onnx_attention.cc) and the CUDA kernel
// (kernels/cuda/onnx_attention.cu). Semantics (ONNX spec / reference):
//  - Q [B, Hq, Sq, D] | [B, Sq, Hq*D]; K [B, Hkv, Skv, D] | 3-D; V likewise
//    with head size Dv; 3-D inputs need q_num_heads / kv_num_heads;
//  - past_key/past_value [B, Hkv, P, D(v)] are prepended to K/V; present_key /
//    present_value (4-D) are the concatenations; total length T = P + Skv;
//  - GQA: query head h reads kv head h / (Hq / Hkv);
//  - scores = softcap(scale * Q.K) + bias, scale default 1/sqrt(D), softcap
//    c > 0: c * tanh(s / c);
//  - bias = attn_mask (bool: false -> -inf; float: added), broadcast to
//    [B, Hq, Sq, T], a last dim shorter than T padded with -inf; is_causal adds
//    -inf where key j > query i + P (bottom-right aligned); opset 25's sliding
//    window (left_window_size L, right_window_size R; -1 leaves a side open)
//    adds -inf where j < i + P - L or j > i + P + R, composed with both;
//  - softmax in fp32; a row whose bias is -inf everywhere gives Y = 0;
//  - Y like Q's layout: [B, Hq, Sq, Dv] or [B, Sq, Hq*Dv].
// Not supported (Error naming the node): the qk_matmul_output output,
// nonpad_kv_seqlen (opset 24 input 6).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct OnnxAttentionParams {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, T = 0, D = 0, Dv = 0;
  bool three_d = false, causal = false;
  int64_t left_window = -1, right_window = -1;  // opset 25; -1: that side unbounded
  float scale = 1.f, softcap = 0.f;
  // Element strides of Q/K/V as [b, h, s, d] views (3-D inputs are read in place).
  int64_t q_st[4] = {0, 0, 0, 0}, k_st[4] = {0, 0, 0, 0}, v_st[4] = {0, 0, 0, 0};
  // Mask broadcast strides over [B, Hq, Sq, mask_len] (0 on broadcast dims).
  bool has_mask = false, mask_bool = false;
  int64_t mask_len = 0;
  int64_t m_st[4] = {0, 0, 0, 0};
  std::vector<int64_t> y_shape, present_k_shape, present_v_shape;
};

// Whether the sliding window (opset 25) keeps key j for query i: its absolute position i + P
// minus j within [-right, left] where a side is bounded. Host and device (CUDA copies the bounds).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline bool window_keeps(int64_t left, int64_t right, int64_t i, int64_t P, int64_t j) {
  const int64_t diff = i + P - j;
  return (left < 0 || diff <= left) && (right < 0 || -diff <= right);
}

inline OnnxAttentionParams resolve_onnx_attention(KernelContext& ctx, const RtTensor& q, const RtTensor& k,
                                                  const RtTensor& v, const RtTensor* mask, const RtTensor* past_k,
                                                  const RtTensor* past_v) {
  const Node& n = ctx.node();
  OnnxAttentionParams p;
  DM_CHECK(ctx, q.rank() == k.rank() && q.rank() == v.rank() && (q.rank() == 3 || q.rank() == 4),
           "Q, K, V must all be 3-D or all 4-D, got " << shape_str(q.shape) << ", " << shape_str(k.shape) << ", "
                                                       << shape_str(v.shape));
  DM_CHECK(ctx, !wants_output(ctx, 3), "the qk_matmul_output output is not supported");
  DM_CHECK(ctx, ctx.num_inputs() <= 6 || !opt_input(ctx, 6), "nonpad_kv_seqlen (opset 24) is not supported");
  DM_CHECK(ctx, (past_k == nullptr) == (past_v == nullptr), "past_key and past_value must be given together");
  p.three_d = q.rank() == 3;
  p.B = q.shape[0];
  DM_CHECK(ctx, k.shape[0] == p.B && v.shape[0] == p.B, "Q, K, V batch sizes differ");
  if (p.three_d) {
    p.Hq = n.attr_int("q_num_heads", 0);
    p.Hkv = n.attr_int("kv_num_heads", 0);
    DM_CHECK(ctx, p.Hq > 0 && p.Hkv > 0, "3-D Q/K/V need the q_num_heads and kv_num_heads attributes");
    DM_CHECK(ctx, q.shape[2] % p.Hq == 0 && k.shape[2] % p.Hkv == 0 && v.shape[2] % p.Hkv == 0,
             "hidden sizes must divide by the head counts");
    p.Sq = q.shape[1];
    p.Skv = k.shape[1];
    DM_CHECK(ctx, v.shape[1] == p.Skv, "K and V sequence lengths differ");
    p.D = q.shape[2] / p.Hq;
    p.Dv = v.shape[2] / p.Hkv;
    DM_CHECK(ctx, k.shape[2] / p.Hkv == p.D, "Q and K head sizes differ");
    // [b, h, s, d] strides of [B, S, H*D].
    const int64_t qs[4] = {p.Sq * p.Hq * p.D, p.D, p.Hq * p.D, 1};
    const int64_t ks[4] = {p.Skv * p.Hkv * p.D, p.D, p.Hkv * p.D, 1};
    const int64_t vs[4] = {p.Skv * p.Hkv * p.Dv, p.Dv, p.Hkv * p.Dv, 1};
    for (int i = 0; i < 4; ++i) p.q_st[i] = qs[i], p.k_st[i] = ks[i], p.v_st[i] = vs[i];
  } else {
    p.Hq = q.shape[1];
    p.Hkv = k.shape[1];
    DM_CHECK(ctx, v.shape[1] == p.Hkv, "K and V head counts differ");
    p.Sq = q.shape[2];
    p.Skv = k.shape[2];
    DM_CHECK(ctx, v.shape[2] == p.Skv, "K and V sequence lengths differ");
    p.D = q.shape[3];
    p.Dv = v.shape[3];
    DM_CHECK(ctx, k.shape[3] == p.D, "Q and K head sizes differ");
    const int64_t qs[4] = {p.Hq * p.Sq * p.D, p.Sq * p.D, p.D, 1};
    const int64_t ks[4] = {p.Hkv * p.Skv * p.D, p.Skv * p.D, p.D, 1};
    const int64_t vs[4] = {p.Hkv * p.Skv * p.Dv, p.Skv * p.Dv, p.Dv, 1};
    for (int i = 0; i < 4; ++i) p.q_st[i] = qs[i], p.k_st[i] = ks[i], p.v_st[i] = vs[i];
  }
  DM_CHECK(ctx, p.Hkv > 0 && p.Hq % p.Hkv == 0,
           "q heads " << p.Hq << " must be a multiple of kv heads " << p.Hkv);
  if (past_k) {
    DM_CHECK(ctx, past_k->rank() == 4 && past_v->rank() == 4 && past_k->shape[0] == p.B && past_k->shape[1] == p.Hkv &&
                      past_k->shape[3] == p.D && past_v->shape[0] == p.B && past_v->shape[1] == p.Hkv &&
                      past_v->shape[3] == p.Dv && past_v->shape[2] == past_k->shape[2],
             "past_key " << shape_str(past_k->shape) << " / past_value " << shape_str(past_v->shape)
                         << " must be [" << p.B << ", " << p.Hkv << ", P, head size]");
    p.P = past_k->shape[2];
  }
  p.T = p.P + p.Skv;
  p.causal = n.attr_int("is_causal", 0) != 0;
  p.left_window = n.attr_int("left_window_size", -1);
  p.right_window = n.attr_int("right_window_size", -1);
  DM_CHECK(ctx, p.left_window >= -1 && p.right_window >= -1,
           "left_window_size / right_window_size must be -1 or >= 0, got " << p.left_window << " / " << p.right_window);
  p.scale = n.has_attr("scale") ? n.attr_float("scale", 1.f) : 1.f / std::sqrt(static_cast<float>(p.D));
  p.softcap = n.attr_float("softcap", 0.f);
  if (mask) {
    p.has_mask = true;
    p.mask_bool = mask->dtype == DType::Bool;
    DM_CHECK(ctx, mask->rank() >= 1 && mask->rank() <= 4, "attn_mask must have rank 1..4, got " << shape_str(mask->shape));
    p.mask_len = mask->shape.back();
    DM_CHECK(ctx, p.mask_len <= p.T, "attn_mask's last dim " << p.mask_len << " exceeds the total sequence " << p.T);
    const int64_t full[4] = {p.B, p.Hq, p.Sq, p.mask_len};
    int64_t stride = 1;
    for (int i = 3, j = static_cast<int>(mask->rank()) - 1; i >= 0; --i, --j) {
      if (j < 0) {
        p.m_st[i] = 0;
        continue;
      }
      const int64_t d = mask->shape[j];
      DM_CHECK(ctx, d == full[i] || d == 1,
               "attn_mask " << shape_str(mask->shape) << " does not broadcast to [" << p.B << ", " << p.Hq << ", "
                            << p.Sq << ", " << p.mask_len << "]");
      p.m_st[i] = d == 1 ? 0 : stride;
      stride *= d;
    }
  }
  p.y_shape = p.three_d ? std::vector<int64_t>{p.B, p.Sq, p.Hq * p.Dv} : std::vector<int64_t>{p.B, p.Hq, p.Sq, p.Dv};
  p.present_k_shape = {p.B, p.Hkv, p.T, p.D};
  p.present_v_shape = {p.B, p.Hkv, p.T, p.Dv};
  return p;
}

}  // namespace fuseopt::dm
