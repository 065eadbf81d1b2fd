// fuseopt.Attention on the CPU: a direct kernel (never the unfused graph).
//
//   inputs : 0 query  — packed QKV [B, S, (H + 2·Hkv)·Dh] when key/value are
//                       absent, else Q [B, S, H·Dh]
//            1 key    [B, S_kv, Hkv·Dh]   (optional)
//            2 value  [B, S_kv, Hkv·Dv]   (optional)
//            3 mask   [B, S_kv], nonzero = keep (any numeric/bool dtype, optional)
//            4 attn_bias, broadcastable to [B, H, S, S_kv] (optional): float = added
//              to the scaled scores; bool = keep where true, else mask_filter_value
//            5 past_key [B, Hkv, S_past, Dh], 6 past_value [B, Hkv, S_past, Dv]
//              (optional, both or neither: a KV cache in ONNX opset-23 Attention's layout)
//            7 sinks [H] float (optional): one logit per query head that joins each row's
//              softmax as an extra column whose probability is dropped (GPT-OSS):
//              p_ij = exp(s_ij - m) / (sum_j exp(s_ij - m) + exp(sink_h - m)),
//              m = max(max_j s_ij, sink_h); a row with no visible key puts all its mass on
//              the sink and outputs 0 (not NaN)
//   attrs  : num_heads, kv_num_heads (default num_heads), scale (default 1/sqrt(Dh)),
//            causal (0/1: key j visible to query i iff j <= i + S_kv - S),
//            mask_filter_value (default -inf: what a masked score becomes),
//            masked_rows_zero (default 0; 1: a query row none of whose scores is above
//            -inf, i.e. no visible key, outputs 0 instead of NaN: torch SDPA's NaN guard),
//            softcap (default 0 = none; > 0: s = softcap·tanh(scale·q·k / softcap) before
//            attn_bias and mask, as ONNX opset-23 Attention's softcap; Gemma-2),
//            window (default 0 = none; > 0: a sliding window, key j hidden from query i
//            when i + S_kv - S - j >= window, as causal's -inf; Mistral, Gemma-2, StarCoder2)
//   output : Y [B, S, H·Dv]; query head h reads kv head h / (H / Hkv) (GQA).
//            With a past: present_key [B, Hkv, S_past + S_new, Dh] = past_key then the
//            new keys, present_value likewise (outputs 1, 2, optional), and attention
//            runs over the present keys (S_kv = S_past + S_new in mask, attn_bias, causal).
//
// Numerics: fp32 dot products, softmax with max subtraction. A row whose every
// score is -inf gives NaN, as the unfused Softmax does (0 with a finite sink);
// finfo.min masks give a uniform row, as they do in the original graph.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/common/fused_attention_params.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

#define ATT_CHECK(cond, msg) FUSE_CHECK(cond, ctx.node().label() << ": " << msg)

// Reads element i of a mask tensor as "keep".
bool mask_keep(const RtTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return static_cast<const uint8_t*>(t.data)[i] != 0;
    case DType::Int32: return t.ptr<int32_t>()[i] != 0;
    case DType::Int64: return t.ptr<int64_t>()[i] != 0;
    case DType::Float: return t.ptr<float>()[i] != 0.0f;
    case DType::Double: return t.ptr<double>()[i] != 0.0;
    // fp16 / bf16 as their bits: nonzero unless +0 or -0 (a NaN keeps, as with float).
    case DType::Float16: case DType::BFloat16: return (static_cast<const uint16_t*>(t.data)[i] & 0x7fffu) != 0;
    default: return true;
  }
}

struct BiasView {
  const RtTensor* t = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};  // element strides for b, h, i, j (0 = broadcast)
  bool is_bool = false;
};

}  // namespace

FUSEOPT_KERNEL(FusedAttentionCpu, "fuseopt", "Attention", Backend::CPU, {DType::Float}) {
  const Node& node = ctx.node();
  const dm::AttentionInputs in = dm::attention_inputs(ctx);  // checks shared with CUDA
  const dm::AttentionLayout l = dm::resolve_attention_layout(
      ctx, in, {DType::Float, "key and value must be float like the query", "past_key/past_value must be float"});
  const RtTensor* q = in.q;
  const RtTensor* mask = in.mask;
  const RtTensor* bias = in.bias;
  const int64_t H = l.H, Hkv = l.Hkv, B = l.B, S = l.S, Dh = l.Dh, Dv = l.Dv;
  int64_t Skv = l.Skv, q_row = 0, k_row = 0, v_row = 0;
  const float *qp = q->ptr<float>(), *kp = nullptr, *vp = nullptr;
  if (l.packed) {
    q_row = k_row = v_row = q->shape[2];
    kp = qp + H * Dh;
    vp = qp + (H + Hkv) * Dh;
  } else {
    q_row = H * Dh;
    k_row = Hkv * Dh;
    v_row = Hkv * Dv;
    kp = in.k->ptr<float>();
    vp = in.v->ptr<float>();
  }
  // KV cache: present = Concat(past, new keys as [B, Hkv, S_new, D]) along the sequence;
  // attention then reads the present keys, laid out [B, S_kv, Hkv·D] like `key`.
  const RtTensor* past_k = in.past_k;
  const RtTensor* past_v = in.past_v;
  std::vector<float> k_all, v_all;
  if (past_k) {
    const int64_t Sp = l.Sp;
    const int64_t St = Sp + Skv;
    // A KV cache the session holds (Session::hold_kv_cache): the past is a view of its block,
    // `cap` rows per (b, h), and the present is the same block grown in place: only the new rows
    // are written there.
    const int64_t cap = past_k->seq_capacity;
    ATT_CHECK(past_v->seq_capacity == cap && (cap == 0 || (cap >= St && ctx.num_outputs() > 2)),
              "past_key/past_value are views of a held KV cache of " << cap << " positions that cannot take " << St);
    auto concat = [&](const RtTensor* past, const float* now, int64_t now_row, int64_t d, size_t out,
                      std::vector<float>& all) {
      RtTensor* pres = nullptr;
      if (cap > 0) {
        pres = ctx.cache_output(out, out + 4, DType::Float, {B, Hkv, St, d});  // outputs 1, 2 extend inputs 5, 6
        ATT_CHECK(pres && pres->data == past->data, "past input " << out + 4 << " is a view of a held KV cache but present "
                                                                  << out << " is not held in place");
      } else if (ctx.num_outputs() > out) {
        pres = ctx.output(out, DType::Float, {B, Hkv, St, d});
      }
      const int64_t past_rows = cap > 0 ? cap : Sp, pres_rows = cap > 0 ? cap : St;
      std::vector<float> local;
      float* pp = pres ? pres->ptr<float>() : nullptr;
      if (!pp) {
        local.resize(static_cast<size_t>(B * Hkv * St * d));
        pp = local.data();
      }
      const float* src = past->ptr<float>();
      all.resize(static_cast<size_t>(B * St * Hkv * d));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < Hkv; ++h)
          for (int64_t t = 0; t < St; ++t) {
            const float* row =
                t < Sp ? src + ((b * Hkv + h) * past_rows + t) * d : now + (b * Skv + (t - Sp)) * now_row + h * d;
            if (t >= Sp || cap == 0) std::copy(row, row + d, pp + ((b * Hkv + h) * pres_rows + t) * d);
            std::copy(row, row + d, all.data() + (b * St + t) * Hkv * d + h * d);
          }
    };
    concat(past_k, kp, k_row, Dh, 1, k_all);
    concat(past_v, vp, v_row, Dv, 2, v_all);
    kp = k_all.data();
    vp = v_all.data();
    k_row = Hkv * Dh;
    v_row = Hkv * Dv;
    Skv = St;
  }
  const float scale = node.has_attr("scale") ? node.attr_float("scale", 1.0f)
                                             : 1.0f / std::sqrt(static_cast<float>(Dh));
  const bool causal = node.attr_int("causal", 0) != 0;
  const float fill = node.attr_float("mask_filter_value", -std::numeric_limits<float>::infinity());
  // masked_rows_zero (torch SDPA's NaN guard folded in): a row with no score above -inf gives 0.
  const bool rows_zero = node.attr_int("masked_rows_zero", 0) != 0;
  const float softcap = node.attr_float("softcap", 0.0f);
  ATT_CHECK(!(softcap < 0.0f) && !std::isnan(softcap), "softcap " << softcap << " must be >= 0");
  const int64_t window = node.attr_int("window", 0);
  ATT_CHECK(window >= 0, "window " << window << " must be >= 0 (0: no sliding window)");

  if (mask) dm::check_attention_mask(ctx, *mask, B, Skv);
  const RtTensor* sinks = in.sinks;
  if (sinks) dm::check_attention_sinks(ctx, *sinks, H, /*half_ok=*/false);
  BiasView bv;
  if (bias) {
    ATT_CHECK(bias->dtype == DType::Float || bias->dtype == DType::Bool, "attn_bias must be float or bool");
    const std::array<int64_t, 4> st = dm::attention_bias_strides(ctx, *bias, B, H, S, Skv);
    bv.t = bias;
    bv.is_bool = bias->dtype == DType::Bool;
    for (int d = 0; d < 4; ++d) bv.stride[d] = st[d];
  }

  RtTensor* y = ctx.output(0, DType::Float, {B, S, H * Dv});
  float* yp = y->ptr<float>();
  const int64_t group = H / Hkv;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  parallel_for(B * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(Skv));
    std::vector<float> acc(static_cast<size_t>(Dv));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / H, h = bh % H, hk = h / group;
      const float* qb = qp + b * S * q_row + h * Dh;
      const float* kb = kp + b * Skv * k_row + hk * Dh;
      const float* vb = vp + b * Skv * v_row + hk * Dv;
      for (int64_t i = 0; i < S; ++i) {
        const float* qi = qb + i * q_row;
        float mx = neg_inf;
        for (int64_t j = 0; j < Skv; ++j) {
          float s;
          const int64_t q_pos = i + (Skv - S);  // the query's position among the keys (bottom-right)
          if ((causal && j > q_pos) || (window > 0 && q_pos - j >= window)) {
            s = neg_inf;
          } else {
            const float* kj = kb + j * k_row;
            float dot = 0.0f;
            for (int64_t d = 0; d < Dh; ++d) dot += qi[d] * kj[d];
            s = dot * scale;
            if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
            if (bv.t) {
              int64_t off = b * bv.stride[0] + h * bv.stride[1] + i * bv.stride[2] + j * bv.stride[3];
              if (bv.is_bool) {
                if (!static_cast<const uint8_t*>(bv.t->data)[off]) s = fill;
              } else {
                s += bv.t->ptr<float>()[off];
              }
            }
            if (mask && !mask_keep(*mask, b * Skv + j)) s = fill;
          }
          p[j] = s;
          if (s > mx) mx = s;  // a NaN score makes the whole row NaN below, as Softmax does
        }
        // The sink is one more column of the row: it joins the max and the sum, and its
        // probability is dropped (it multiplies no value row).
        const float sink = sinks ? sinks->ptr<float>()[h] : neg_inf;
        if (sink > mx) mx = sink;
        float* yi = yp + (b * S + i) * (H * Dv) + h * Dv;
        if (rows_zero && mx == neg_inf) {  // no visible key (or only NaN scores): 0, not NaN
          std::fill(yi, yi + Dv, 0.0f);
          continue;
        }
        float sum = sinks ? std::exp(sink - mx) : 0.0f;
        for (int64_t j = 0; j < Skv; ++j) {
          p[j] = std::exp(p[j] - mx);  // all -inf: -inf - -inf = NaN, as the unfused Softmax
          sum += p[j];
        }
        const float inv = 1.0f / sum;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < Skv; ++j) {
          const float w = p[j] * inv;
          if (w == 0.0f) continue;  // causal/masked keys (NaN weights still propagate)
          const float* vj = vb + j * v_row;
          for (int64_t d = 0; d < Dv; ++d) acc[d] += w * vj[d];
        }
        for (int64_t d = 0; d < Dv; ++d) yi[d] = acc[d];
      }
    }
  });
}

}  // namespace fuseopt
