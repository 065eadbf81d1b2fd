// Host-side checks of fuseopt.Attention's inputs, shared by the CPU reference
// (kernels/cpu/fused_attention.cc) and the CUDA kernel
// (kernels/cuda/fused_attention_kernel.cc): one set of layout rules and error
// messages; only the dtypes each backend accepts differ (AttentionDtypeRule).
// The shape function shares the head-count rule (attention_heads.h); it keeps
// its own shape checks because it must accept unknown (symbolic) dims.
//   inputs : 0 query — packed QKV [B, S, (H + 2·Hkv)·Dh] when key/value are
//            absent, else Q [B, S, H·Dh]; 1 key [B, S_kv, Hkv·Dh]?, 2 value
//            [B, S_kv, Hkv·Dv]?, 3 mask [B, S_kv]?, 4 attn_bias (broadcastable to
//            [B, H, S, S_kv])?, 5 past_key [B, Hkv, S_past, Dh]?, 6 past_value
//            [B, Hkv, S_past, Dv]? (both or neither), 7 sinks [H]? (one logit per query
//            head that joins each row's softmax and whose probability is dropped: GPT-OSS)
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/attention_heads.h"
#include "kernels/common/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct AttentionInputs {
  const RtTensor* q = nullptr;
  const RtTensor* k = nullptr;
  const RtTensor* v = nullptr;
  const RtTensor* mask = nullptr;
  const RtTensor* bias = nullptr;
  const RtTensor* past_k = nullptr;
  const RtTensor* past_v = nullptr;
  const RtTensor* sinks = nullptr;
};

// The node's inputs (absent ones null); query required, key and value together.
inline AttentionInputs attention_inputs(KernelContext& ctx) {
  auto in = [&](size_t i) { return ctx.num_inputs() > i ? ctx.input(i) : nullptr; };
  AttentionInputs a;
  a.q = ctx.input(0);
  a.k = in(1);
  a.v = in(2);
  a.mask = in(3);
  a.bias = in(4);
  a.past_k = in(5);
  a.past_v = in(6);
  a.sinks = in(7);
  DM_CHECK(ctx, a.q, "query input is required");
  DM_CHECK(ctx, (a.k == nullptr) == (a.v == nullptr), "key and value must both be given or both be omitted");
  return a;
}

// The dtype key/value and past_key/past_value must have, and what the error says.
struct AttentionDtypeRule {
  DType dtype = DType::Float;
  const char* kv_message = "";
  const char* past_message = "";
};

struct AttentionLayout {
  int64_t B = 0, S = 0, H = 0, Hkv = 0, Dh = 0, Dv = 0;
  int64_t Skv = 0;  // keys of this call (S when packed)
  int64_t Sp = 0;   // past keys (0 without a past)
  bool packed = false;
};

// Head counts, head dims and sequence lengths, every shape checked against them.
inline AttentionLayout resolve_attention_layout(KernelContext& ctx, const AttentionInputs& in,
                                                const AttentionDtypeRule& rule) {
  const Node& node = ctx.node();
  AttentionLayout l;
  l.H = node.attr_int("num_heads", 0);
  l.Hkv = node.attr_int("kv_num_heads", l.H);
  const std::string heads = attention_heads_error(l.H, l.Hkv);
  DM_CHECK(ctx, heads.empty(), heads);
  const RtTensor* q = in.q;
  DM_CHECK(ctx, q->rank() == 3, "query must be [B, S, hidden], got rank " << q->rank());
  l.B = q->shape[0];
  l.S = q->shape[1];
  l.packed = in.k == nullptr;
  if (l.packed) {
    DM_CHECK(ctx, q->shape[2] % (l.H + 2 * l.Hkv) == 0,
             "packed QKV width " << q->shape[2] << " is not (num_heads + 2*kv_num_heads) * head_dim");
    l.Dh = l.Dv = q->shape[2] / (l.H + 2 * l.Hkv);
    l.Skv = l.S;
  } else {
    const RtTensor* k = in.k;
    const RtTensor* v = in.v;
    DM_CHECK(ctx, k->rank() == 3 && v->rank() == 3, "key and value must be [B, S_kv, hidden]");
    DM_CHECK(ctx, k->dtype == rule.dtype && v->dtype == rule.dtype, rule.kv_message);
    DM_CHECK(ctx, q->shape[2] % l.H == 0, "query width " << q->shape[2] << " is not a multiple of num_heads " << l.H);
    l.Dh = q->shape[2] / l.H;
    DM_CHECK(ctx, k->shape[2] == l.Hkv * l.Dh,
             "key width " << k->shape[2] << " != kv_num_heads * head_dim " << l.Hkv * l.Dh);
    DM_CHECK(ctx, v->shape[2] % l.Hkv == 0, "value width " << v->shape[2] << " is not a multiple of kv_num_heads");
    l.Dv = v->shape[2] / l.Hkv;
    DM_CHECK(ctx, k->shape[0] == l.B && v->shape[0] == l.B, "batch of key/value differs from the query's");
    l.Skv = k->shape[1];
    DM_CHECK(ctx, v->shape[1] == l.Skv, "key and value sequence lengths differ");
  }
  const RtTensor* past_k = in.past_k;
  const RtTensor* past_v = in.past_v;
  DM_CHECK(ctx, (past_k == nullptr) == (past_v == nullptr),
           "past_key and past_value must both be given or both be omitted");
  if (past_k) {
    DM_CHECK(ctx, past_k->rank() == 4 && past_v->rank() == 4, "past_key/past_value must be [B, kv_num_heads, S_past, D]");
    DM_CHECK(ctx, past_k->dtype == rule.dtype && past_v->dtype == rule.dtype, rule.past_message);
    l.Sp = past_k->shape[2];
    DM_CHECK(ctx, past_k->shape[0] == l.B && past_k->shape[1] == l.Hkv && past_k->shape[3] == l.Dh,
             "past_key must be [" << l.B << ", " << l.Hkv << ", S_past, " << l.Dh << "]");
    DM_CHECK(ctx,
             past_v->shape[0] == l.B && past_v->shape[1] == l.Hkv && past_v->shape[2] == l.Sp &&
                 past_v->shape[3] == l.Dv,
             "past_value must be [" << l.B << ", " << l.Hkv << ", " << l.Sp << ", " << l.Dv << "]");
  }
  return l;
}

// The key-padding mask must be [B, S_kv] (S_kv counting the past keys).
inline void check_attention_mask(KernelContext& ctx, const RtTensor& mask, int64_t B, int64_t Skv) {
  DM_CHECK(ctx, mask.numel() == B * Skv && mask.rank() >= 1 && mask.shape.back() == Skv,
           "mask must be [B, S_kv] = [" << B << ", " << Skv << "]");
}

// Element strides of attn_bias read as [B, H, S, S_kv] (0 on broadcast dims).
// The dtypes it may have are the kernel's to check.
inline std::array<int64_t, 4> attention_bias_strides(KernelContext& ctx, const RtTensor& bias, int64_t B, int64_t H,
                                                     int64_t S, int64_t Skv) {
  DM_CHECK(ctx, bias.rank() <= 4, "attn_bias rank " << bias.rank() << " > 4");
  const std::vector<int64_t> full = {B, H, S, Skv};
  const size_t lead = 4 - bias.rank();
  for (size_t i = 0; i < bias.rank(); ++i)
    DM_CHECK(ctx, bias.shape[i] == 1 || bias.shape[i] == full[lead + i],
             "attn_bias shape does not broadcast to [B, H, S, S_kv]");
  const std::vector<int64_t> st = broadcast_strides(bias.shape, full);
  return {st[0], st[1], st[2], st[3]};
}

// sinks must be [H] (one logit per query head) of a float type the backend takes; a
// malformed one is refused naming the node rather than read out of bounds.
inline void check_attention_sinks(KernelContext& ctx, const RtTensor& sinks, int64_t H, bool half_ok) {
  const bool dtype_ok = sinks.dtype == DType::Float ||
                        (half_ok && (sinks.dtype == DType::Float16 || sinks.dtype == DType::BFloat16));
  DM_CHECK(ctx, dtype_ok, "sinks must be " << (half_ok ? "float32/float16/bfloat16" : "float32") << ", got "
                                           << dtype_name(sinks.dtype));
  DM_CHECK(ctx, sinks.rank() == 1 && sinks.shape[0] == H,
           "sinks must be [num_heads] = [" << H << "], got " << shape_str(sinks.shape));
}

}  // namespace fuseopt::dm
