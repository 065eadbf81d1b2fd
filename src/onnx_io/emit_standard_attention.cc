// --emit standard mapping of fuseopt.Attention to ONNX Attention-23 (emit_standard.h).
//
// fuseopt.Attention (docs/fused_ops.md)        ONNX Attention-23 (3-D inputs)
//   query packed QKV [B, S, (H+2Hkv)Dh]   ->  Split into Q, K, V along the last axis
//   query / key / value [B, S, hidden]    ->  Q, K, V
//   num_heads, kv_num_heads               ->  q_num_heads, kv_num_heads (head h reads kv head
//                                             h / (H / Hkv) in both: np.repeat in the reference)
//   scale (default 1/sqrt(Dh))            ->  scale (same default; written when set)
//   attn_bias float, added                ->  attn_mask float, added
//   attn_bias bool: false -> score := fill ->  attn_mask = Where(bias, 0, fill)
//   mask [B, S_kv] key padding: masked     ->  attn_mask = Where(keep[B,1,1,S_kv], attn_mask or 0, fill)
//     score := mask_filter_value (fill)
//   causal, bottom-right (j <= i+S_kv-S_q) ->  is_causal = 1 when S_q == S_kv is proven (the
//                                             standard op aligns top-left without past keys);
//                                             otherwise Where(j <= i + S_kv - S_q, mask, -inf)
//                                             folded into attn_mask
//   window (> 0: key j hidden when          ->  no such attribute: Where(j > i + S_kv - S_q - window,
//     i + S_kv - S_q - j >= window)                mask, -inf) folded into attn_mask, with causal folded
//                                                  in too (is_causal is not used then)
//   softcap (> 0: cap·tanh(s / cap) after   ->  softcap (same place in the standard op: after the
//     the scale, before bias and masks)            scale, before attn_mask)
//   qk_matmul_output                      ->  not used (absent)
//   sinks [H] (input 7)                   ->  none in Attention-23/24: such a node stays fuseopt
//
// Exactness of the replaced scores: fuseopt replaces a masked score by the fill; the
// standard op adds attn_mask. score + fill == fill for every finite score when the fill is
// <= -1e30 (or -inf), so the masks are built only for such fills; otherwise the node stays
// fuseopt. A fill of exactly float32 lowest is written one ulp above it
// (-3.4028233e38): ONNX Runtime 1.32's CPU Attention returns 0 for a row whose mask is
// lowest everywhere, where the spec (and fuseopt, and the original graph) average the row;
// one ulp changes no softmax (every masked score is still equal and ~1e38 below the rest).
// ONNX Runtime also wants attn_mask's query axis to be S_q (it does not broadcast a 1
// there), so the mask is Expanded to [.., S_q, S_kv]. The mask is built once per model
// for each (mask, bias, fill, causal fold, S_q, S_kv) and shared by the layers.
//
// Fully masked rows with a -inf fill: fuseopt (and the unfused graph) give NaN, the
// standard op gives 0. Exporters that fill with -inf (SDPA) follow the attention with
// the NaN guard Where(IsNaN(Y), 0, Y), after which both are 0; the mapping is made only
// when every reader of Y is that guard. The same holds for a float attn_bias computed from
// a -inf constant; a bias fed by the caller (a graph input) is taken to be finite (a
// caller's row of -inf throughout would give 0 instead of NaN). A fuseopt.Attention with
// masked_rows_zero = 1 (the pass folded that guard into the op) gives 0 itself; Attention-23
// has no such attribute, so the guard is written back after it.
//
// KV cache: fuseopt.Attention's past_key/past_value (inputs 5, 6, [B, Hkv, S_past, D], ONNX's
// layout) and present_key/present_value (outputs 1, 2, past ++ new keys) are Attention-23's
// inputs 4, 5 and outputs 1, 2 (kPastInputs / kPresentOutputs). Both read the mask and
// attn_bias over S_past + S_new keys. Causal: fuseopt's j <= i + S_kv - S_q equals the
// standard op's past-offset alignment j <= i + S_past when S_new == S_q (proven as for the
// cache-free case); otherwise it is folded into attn_mask with S_kv = S_past + S_new.
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "onnx_io/emit_standard.h"

namespace fuseopt {
namespace {

constexpr size_t kQuery = 0, kKey = 1, kValue = 2, kMask = 3, kBias = 4;
constexpr size_t kPastKey = 5, kPastValue = 6, kSinks = 7;
// fuseopt input slot -> Attention-23 input slot (past_key, past_value).
const std::vector<std::pair<size_t, size_t>> kPastInputs = {{kPastKey, 4}, {kPastValue, 5}};
// fuseopt output slot -> Attention-23 output slot (present_key, present_value).
const std::vector<std::pair<size_t, size_t>> kPresentOutputs = {{1, 1}, {2, 2}};

// masked_rows_zero = 1: a row with no visible key gives 0 (the folded SDPA guard).
bool rows_zero(const Node& n) { return n.attr_int("masked_rows_zero", 0) != 0; }

float fill_of(const Node& n) { return n.attr_float("mask_filter_value", -std::numeric_limits<float>::infinity()); }

bool is_zero_const(const Value* v) {
  if (!v || !v->const_data) return false;
  const Tensor& t = *v->const_data;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.as_double(i) != 0.0) return false;
  return true;
}

// Every reader of y is the NaN guard Where(IsNaN(y), 0, y) (or the IsNaN feeding it).
bool nan_guarded(const Value* y) {
  if (y->is_graph_output || y->uses.empty()) return false;
  auto guard_where = [&](const Node* w, const Value* isnan_out) {
    return w->is("Where") && w->input(0) == isnan_out && is_zero_const(w->input(1)) && w->input(2) == y;
  };
  for (const Use& u : y->uses) {
    const Node* c = u.node;
    if (c->is("IsNaN")) {
      const Value* o = c->output(0);
      if (!o || o->is_graph_output) return false;
      for (const Use& w : o->uses)
        if (!guard_where(w.node, o)) return false;
    } else if (c->is("Where")) {
      const Value* cond = c->input(0);
      if (!cond || !cond->producer || !cond->producer->is("IsNaN") || cond->producer->input(0) != y ||
          !guard_where(c, cond))
        return false;
    } else {
      return false;
    }
  }
  return true;
}

bool same_dim(const Value* a, size_t ia, const Value* b, size_t ib) {
  if (!a->shape || !b->shape || a->shape->size() <= ia || b->shape->size() <= ib) return false;
  return (*a->shape)[ia] == (*b->shape)[ib];
}

constexpr float kLowest = -std::numeric_limits<float>::max();

bool tensor_has(const Tensor& t, float x) {
  if (t.numel() > (int64_t(1) << 22)) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (static_cast<float>(t.as_double(i)) == x) return true;
  return false;
}

// Whether a float attn_bias from the model may hold the value x (float32 lowest, the
// exporters' finfo.min fill; or -inf): some constant it is computed from holds it, or
// (when `inputs` is set) it is computed from a float graph input.
bool may_hold(const Value* v, float x, std::map<const Value*, bool>& memo, bool inputs) {
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  memo[v] = false;  // a DAG: no cycles, but shared subexpressions
  bool r = false;
  if (v->const_data) {
    r = dtype_is_float(v->const_data->dtype) && tensor_has(*v->const_data, x);
  } else if (v->is_graph_input) {
    r = inputs && dtype_is_float(v->dtype);
  } else if (const Node* p = v->producer) {
    if (const Attribute* a = p->attr("value"); a && a->t) r = dtype_is_float(a->t->dtype) && tensor_has(*a->t, x);
    for (float f : p->attr_floats("value_floats")) r |= f == x;
    if (p->has_attr("value_float")) r |= p->attr_float("value_float", 0) == x;
    for (const Value* in : p->inputs)
      if (!r && in && dtype_is_float(in->dtype)) r = may_hold(in, x, memo, inputs);
    // Integer/bool inputs (masks, indices) carry no float fill themselves; the constant
    // fill they select reaches the bias through a float input (Where's branches).
  }
  return memo[v] = r;
}

std::string attention_check(const Graph&, const Node& n) {
  if (n.inputs.size() > kSinks && n.inputs[kSinks])
    return "sinks (GPT-OSS's per-head sink logit) have no Attention-23 form; the node keeps its function body "
           "(Concat of the sink column, Softmax, Slice)";
  for (size_t i = kBias + 1; i < n.inputs.size(); ++i) {
    bool mapped = false;
    for (auto [from, to] : kPastInputs) mapped |= from == i;
    if (n.inputs[i] && !mapped)
      return "input " + std::to_string(i) + " ('" + n.inputs[i]->name + "') has no Attention-23 mapping yet";
  }
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    bool mapped = false;
    for (auto [from, to] : kPresentOutputs) mapped |= from == i;
    if (n.outputs[i] && !mapped) return "output " + std::to_string(i) + " has no Attention-23 mapping yet";
  }
  const int64_t H = n.attr_int("num_heads", 0), Hkv = n.attr_int("kv_num_heads", H);
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0) return "num_heads / kv_num_heads not a valid grouping";
  const Value* q = n.input(kQuery);
  if (!q || !q->shape || q->shape->size() != 3) return "query is not known to be 3-D";
  const DType t = q->dtype;
  if (t != DType::Float && t != DType::Float16 && t != DType::BFloat16) return "query is not float32/float16/bfloat16";
  const bool packed = n.input(kKey) == nullptr;
  if (packed) {
    const Dim& w = q->shape->back();
    if (!w.known() || w.value % (H + 2 * Hkv) != 0)
      return "packed QKV width is not known (the Split into Q, K, V needs it)";
  } else if (!n.input(kValue) || n.input(kKey)->dtype != t || n.input(kValue)->dtype != t) {
    return "key/value missing or of another dtype than the query";
  }
  const Value *pk = n.input(kPastKey), *pv = n.input(kPastValue);
  if ((pk == nullptr) != (pv == nullptr)) return "only one of past_key / past_value is given";
  if (pk && (pk->dtype != t || pv->dtype != t)) return "past_key/past_value dtype differs from the query's";
  if (pk && (!pk->shape || pk->shape->size() != 4)) return "past_key is not known to be [B, Hkv, S_past, D]";
  const Value* bias = n.input(kBias);
  if (bias && bias->dtype != DType::Bool && bias->dtype != t)
    return "attn_bias dtype differs from the query's (the standard op's float mask has the query's type)";
  if (bias && (!bias->shape || bias->shape->size() > 4)) return "attn_bias rank unknown or > 4";
  if (const Value* m = n.input(kMask); m && (!m->shape || m->shape->size() != 2))
    return "mask is not known to be [B, S_kv]";
  const bool uses_fill = n.input(kMask) || (bias && bias->dtype == DType::Bool);
  const float fill = fill_of(n);
  const bool neg_inf = fill == -std::numeric_limits<float>::infinity();
  if (uses_fill) {
    if (std::isnan(fill) || (!neg_inf && fill > -1e30f)) {
      std::ostringstream os;
      os << "mask_filter_value " << fill
         << " replaces masked scores; an additive attn_mask gives score + fill, equal only for fills <= -1e30";
      return os.str();
    }
    if (t != DType::Float && !neg_inf)
      return "a finite mask fill in float16/bfloat16: it would round to -inf in the mask's type";
    if (neg_inf && !rows_zero(n) && !nan_guarded(n.output(0)))
      return "-inf mask fill: a fully masked row is NaN here and 0 in Attention-23, and Y is not followed by "
             "the NaN guard Where(IsNaN(Y), 0, Y) that makes them agree";
  }
  if (bias && bias->dtype != DType::Bool) {
    std::map<const Value*, bool> memo;
    if (may_hold(bias, -std::numeric_limits<float>::infinity(), memo, false) && !rows_zero(n) &&
        !nan_guarded(n.output(0)))
      return "attn_bias is computed from a -inf constant: a row that is -inf throughout is NaN here and 0 in "
             "Attention-23, and Y is not followed by the NaN guard Where(IsNaN(Y), 0, Y)";
  }
  return "";
}

std::string dim_key(const Value* v, size_t axis) {
  const Dim& d = (*v->shape)[axis];
  if (d.known()) return std::to_string(d.value);
  if (!d.symbol.empty()) return "s:" + d.symbol;
  return "v:" + v->name;  // anonymous: this value's own dim, not shared
}

// The attn_mask for one node (nullptr when none is needed); shared across layers.
Value* build_mask(EmitContext& c, Node* n, Value* q, Value* k, bool fold_causal) {
  Value* mask = n->input(kMask);
  Value* bias = n->input(kBias);
  const int64_t window = n->attr_int("window", 0);
  if (!mask && !bias && !fold_causal && window <= 0) return nullptr;
  const DType t = q->dtype;
  float fill = fill_of(*n);
  if (fill == -std::numeric_limits<float>::max()) fill = std::nextafter(fill, 0.0f);
  std::ostringstream key;
  key.precision(9);
  Value* past = n->input(kPastKey);
  key << "attn_mask," << (mask ? mask->name : "") << "," << (bias ? bias->name : "") << "," << fill << ","
      << fold_causal << "," << window << "," << dim_key(q, 1) << "," << dim_key(k, 1) << "," << (past ? dim_key(past, 2) : "");
  if (auto it = c.shared.find(key.str()); it != c.shared.end()) return it->second;

  const std::string hint = "attn_mask";
  Value* m = nullptr;  // additive, query dtype, broadcastable to [B, H, S_q, S_kv]
  if (bias && bias->dtype == DType::Bool) {
    m = c.node("Where", {bias, c.scalar(t, 0.0, "zero"), c.scalar(t, fill, "mask_fill")}, {}, 1, hint)->output(0);
  } else if (bias) {
    m = bias;
    // float32 lowest in the model's bias: written one ulp above it (see the top of the file).
    std::map<const Value*, bool> memo;
    if (t == DType::Float && may_hold(bias, kLowest, memo, true)) {
      Value* low = c.scalar(t, kLowest, "lowest");
      Node* eq = c.node("Equal", {bias, low}, {}, 1, hint + "_lowest");
      m = c.node("Where", {eq->output(0), c.scalar(t, std::nextafter(kLowest, 0.0f), "mask_fill"), bias}, {}, 1, hint)
              ->output(0);
      if (bias->shape) c.rw.set_type(m, t, bias->shape);
    }
  }
  if (mask) {
    Value* keep = mask;
    if (mask->dtype != DType::Bool)
      keep = c.node("Cast", {mask}, {Attribute::make_int("to", static_cast<int64_t>(DType::Bool))}, 1, hint + "_keep")
                 ->output(0);
    keep = c.node("Unsqueeze", {keep, c.int64s({1, 2})}, {}, 1, hint + "_keep")->output(0);  // [B, 1, 1, S_kv]
    m = c.node("Where", {keep, m ? m : c.scalar(t, 0.0, "zero"), c.scalar(t, fill, "mask_fill")}, {}, 1, hint)
            ->output(0);
  }
  if (fold_causal || window > 0) {
    // visible[i, j] = j <= i + (S_kv - S_q) (causal) and j > i + (S_kv - S_q) - window (window)
    Value* sq = c.dim_0d(q, 1);
    Value* skv = c.dim_0d(k, 1);
    if (past)  // the keys are the past ones, then the new ones
      skv = c.node("Add", {c.dim_0d(past, 2), skv}, {}, 1, hint + "_total")->output(0);
    Value* zero = c.scalar(DType::Int64, 0, "i0");
    Value* one = c.scalar(DType::Int64, 1, "i1");
    Value* rows = c.node("Range", {zero, sq, one}, {}, 1, hint + "_rows")->output(0);
    rows = c.node("Add", {rows, c.node("Sub", {skv, sq}, {}, 1, hint + "_offset")->output(0)}, {}, 1, hint + "_rows")
               ->output(0);
    rows = c.node("Unsqueeze", {rows, c.int64s({1})}, {}, 1, hint + "_rows")->output(0);  // [S_q, 1]
    Value* cols = c.node("Range", {zero, skv, one}, {}, 1, hint + "_cols")->output(0);  // [S_kv]
    Value* neg_inf = c.scalar(t, -std::numeric_limits<double>::infinity(), "neg_inf");
    if (fold_causal) {
      Value* visible = c.node("LessOrEqual", {cols, rows}, {}, 1, hint + "_causal")->output(0);
      m = c.node("Where", {visible, m ? m : c.scalar(t, 0.0, "zero"), neg_inf}, {}, 1, hint)->output(0);
    }
    if (window > 0) {
      Value* lower = c.node("Sub", {rows, c.scalar(DType::Int64, static_cast<double>(window), "window")}, {}, 1,
                            hint + "_window")->output(0);
      Value* in_window = c.node("Greater", {cols, lower}, {}, 1, hint + "_window")->output(0);
      m = c.node("Where", {in_window, m ? m : c.scalar(t, 0.0, "zero"), neg_inf}, {}, 1, hint)->output(0);
    }
  } else {
    // ONNX Runtime reads the mask's axis -2 as S_q: broadcast it there explicitly.
    const bool has_sq = m->shape && m->shape->size() >= 2 && same_dim(m, m->shape->size() - 2, q, 1);
    if (!has_sq) {
      Node* target = c.node("Concat", {c.int64s({1, 1}), c.dim_1d(q, 1), c.int64s({1})},
                            {Attribute::make_int("axis", 0)}, 1, hint + "_shape");
      c.rw.set_type(target->output(0), DType::Int64, Shape{Dim::of(4)});
      m = c.node("Expand", {m, target->output(0)}, {}, 1, hint)->output(0);
    }
  }
  if (m != bias) c.rw.set_type(m, t, m->shape);
  return c.shared[key.str()] = m;
}

void attention_rewrite(EmitContext& c, Node* n) {
  const int64_t H = n->attr_int("num_heads", 0), Hkv = n->attr_int("kv_num_heads", H);
  Value* q = n->input(kQuery);
  Value *k = n->input(kKey), *v = n->input(kValue);
  if (!k) {
    const Shape& s = *q->shape;
    const int64_t dh = s.back().value / (H + 2 * Hkv);
    Node* split = c.node("Split", {q, c.int64s({H * dh, Hkv * dh, Hkv * dh})}, {Attribute::make_int("axis", -1)}, 3,
                         n->name + "_qkv");
    const int64_t widths[3] = {H * dh, Hkv * dh, Hkv * dh};
    for (int i = 0; i < 3; ++i) {
      Shape o = s;
      o.back() = Dim::of(widths[i]);
      c.rw.set_type(split->output(i), q->dtype, o);
    }
    q = split->output(0);
    k = split->output(1);
    v = split->output(2);
  }
  const bool causal = n->attr_int("causal", 0) != 0;
  const bool packed = n->input(kKey) == nullptr;
  const bool same_len = packed || same_dim(q, 1, k, 1);
  // A window is folded into attn_mask; causal goes with it (the two are one bottom-right mask).
  const bool fold_causal = causal && (!same_len || n->attr_int("window", 0) > 0);
  Value* m = build_mask(c, n, q, k, fold_causal);

  std::vector<Attribute> attrs{Attribute::make_int("q_num_heads", H), Attribute::make_int("kv_num_heads", Hkv)};
  if (n->has_attr("scale")) attrs.push_back(Attribute::make_float("scale", n->attr_float("scale", 1.0f)));
  if (causal && !fold_causal) attrs.push_back(Attribute::make_int("is_causal", 1));
  if (float cap = n->attr_float("softcap", 0.0f); cap > 0.0f) attrs.push_back(Attribute::make_float("softcap", cap));
  std::vector<Value*> in{q, k, v, m};
  for (auto [from, to] : kPastInputs) {
    if (in.size() <= to) in.resize(to + 1, nullptr);
    in[to] = n->input(from);
  }
  while (!in.empty() && !in.back()) in.pop_back();
  int outs = 1;
  for (auto [from, to] : kPresentOutputs)
    if (n->output(from)) outs = std::max<int>(outs, static_cast<int>(to) + 1);
  Node* a = c.node("Attention", in, std::move(attrs), outs, n->name);
  Value* y = a->output(0);
  if (rows_zero(*n)) {
    // Attention-23 has no such attribute: the guard goes back after it, Where(IsNaN(Y), 0, Y).
    const DType t = n->output(0)->dtype;
    c.rw.set_type(y, t, n->output(0)->shape);
    Value* nan = c.node("IsNaN", {y}, {}, 1, n->name + "_isnan")->output(0);
    y = c.node("Where", {nan, c.scalar(t, 0.0, "zero"), y}, {}, 1, n->name + "_rows0")->output(0);
  }
  c.take_over(n->output(0), y);
  for (auto [from, to] : kPresentOutputs)
    if (n->output(from)) c.take_over(n->output(from), a->output(to));
  c.rw.erase_node(n);
}

// After shape inference: value_info for Q, K, V and Y of every Attention-23. ONNX's
// Attention shape inference (onnx 1.23) writes a head size of 0 when it cannot see the
// hidden width of V, and the GEMM after the attention then fails the checker.
void attention_finish(EmitContext& c) {
  for (const auto& np : c.g.nodes()) {
    if (!np->is("Attention")) continue;
    for (Value* x : {np->input(0), np->input(1), np->input(2), np->output(0)})
      if (x && x->shape && !x->shape->empty() && x->shape->back().known() && x->producer) x->has_value_info = true;
  }
}

const EmitterRegistrar kAttention({"Attention", "Attention", [](const Graph&, const Node&) { return int64_t(23); },
                                   attention_check, attention_rewrite, attention_finish});

}  // namespace
}  // namespace fuseopt
