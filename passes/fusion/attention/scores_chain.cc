// Attention fusion: the scores-chain walk (see scores_chain.h).
#include "passes/fusion/attention/scores_chain.h"

#include "passes/fusion/attention/head_scale.h"
#include "passes/fusion/attention/scores_clamp.h"
#include "passes/fusion/attention/sinks.h"
#include "passes/fusion/attention/window_view.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

namespace {

// True when v is computed from a MatMul of two variable rank-4-ish operands
// through the elementwise ops a scores chain uses (which side of an Add holds the scores).
bool reaches_qk(const Value* v, int depth) {
  if (!v || !v->producer || depth > 8) return false;
  const Node* m = v->producer;
  if (m->is("MatMul")) return !const_of(m->input(0)) && !const_of(m->input(1));
  if (is_passthrough(m) || m->is("Cast") || m->is("Reshape") || m->is("Tanh")) return reaches_qk(m->input(0), depth + 1);
  if (m->is("Add") || m->is("Mul") || m->is("Div"))
    return reaches_qk(m->input(0), depth + 1) || reaches_qk(m->input(1), depth + 1);
  if (m->is("Where")) return reaches_qk(m->input(1), depth + 1) || reaches_qk(m->input(2), depth + 1);
  return false;
}

}  // namespace

std::string walk_scores_chain(Plan& pl, ScoresChain& chain) {
  Value* s = take_sink_prefix(pl);  // GPT-OSS's sink column and max subtraction (sinks.h)
  bool scores_flat = false;
  bool scores_merged = false;  // a [B, H, S, S_kv] -> [B·H, S, S_kv] view seen (walking back from the Softmax)
  bool seen_scale = false;  // walking backwards: a scale seen before a mask term scales the mask too
  // Logit soft-capping a·tanh(b·QKᵀ) (Gemma-2: cap·tanh(scale·QKᵀ / cap)): walking backwards, the
  // factors seen before the Tanh are the outer a, those after it the inner b. It is exactly
  // softcap = |a| with scale = a·b (tanh is odd: a·tanh(b·x) = |a|·tanh(a·b·x / |a|)).
  Node* tanh_node = nullptr;
  double softcap_outer = 1.0;
  int64_t window_view = 0;  // walking back inside Swin's [B', nW, H, S, S] view: nW
  for (int d = 0; d < 12 && s && s->producer; ++d) {
    Node* n = s->producer;
    if (n->is("MatMul")) {
      if (n->inputs.size() != 2 || !n->input(0) || !n->input(1)) return "malformed MatMul";
      pl.qk = n;
      break;
    }
    if (n->inputs.empty() || !n->input(0)) break;
    if (is_passthrough(n)) { pl.core.push_back(n); s = n->input(0); continue; }
    // Swin's shifted-window mask: the scores [B'·nW, H, S, S] viewed [B', nW, H, S, S], the mask
    // [1, nW, 1, S, S] added there, viewed back (window_view.h). Walking back: merge, terms, split.
    if (auto nw = window_reshape(n, WindowReshape::Merge); nw && !window_view && !scores_flat) {
      window_view = *nw;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (window_view && window_reshape(n, WindowReshape::Split) == window_view) {
      window_view = 0;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (pl.flat && !scores_flat && splits_bh(n)) {
      scores_flat = true;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    // The softmax on the [B·H, S, S_kv] view of [B, H, S, S_kv] scores whose mask was added in
    // the 4-D view (transformers' bmm attention: DETR, and the BART family before 4.48:
    // view(B, H, S, S_kv) + mask, view(B·H, S, S_kv), softmax): walking back, the merge comes
    // first, then the mask terms (4-D, not flat), then the split above.
    if (pl.flat && !scores_flat && !scores_merged && merges_bh(n)) {
      scores_merged = true;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (n->is("Cast")) {  // a Cast that changes the type: the fused op computes in one precision
      // fp16/bf16 scores widened to fp32 (anywhere between Q·Kᵀ and the Softmax: the mask terms
      // and scale factors after it are applied in fp32) and the probabilities cast back to the
      // scores' dtype before P·V: what the fused op does inside (fp32 softmax, P rounded to the
      // compute dtype for P·V). One such pair; anything else changes precision.
      const DType from = dtype_of(n->input(0));
      const int64_t to = n->attr_int("to", 0);
      const bool half_from = from == DType::Float16 || from == DType::BFloat16;
      const bool upcast_for_softmax = !pl.up_cast && pl.down_cast && to == static_cast<int64_t>(DType::Float) &&
                                      (n->output(0) == pl.softmax->input(0) || half_from) &&
                                      static_cast<int64_t>(from) == pl.down_cast->attr_int("to", -1);
      if (upcast_for_softmax) {
        pl.up_cast = n;  // fp16/bf16 scores -> fp32 softmax -> back: what the fused op does inside
      } else if (pl.fail.empty()) {
        if (half_from && to == static_cast<int64_t>(DType::Float) && !pl.up_cast && !pl.down_cast)
          pl.fail = "rule 5: " + n->label() + " widens the " + dtype_name(from) +
                    " scores to float32, but the probabilities are not cast back to " + dtype_name(from) +
                    " before the P·V MatMul " + pl.pv->label();
        else if (half_from && to == static_cast<int64_t>(DType::Float) && !pl.up_cast)
          pl.fail = "rule 5: " + n->label() + " widens " + dtype_name(from) + " scores to float32, but " +
                    pl.down_cast->label() + " casts the probabilities to " +
                    dtype_name(static_cast<DType>(pl.down_cast->attr_int("to", 0))) + ", not back to " +
                    dtype_name(from);
        else
          pl.fail = "rule 5: " + n->label() + " changes the precision inside the attention chain";
      }
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (auto f = scalar_factor(n)) {
      seen_scale = true;
      pl.scale *= f->first;
      pl.core.push_back(n);
      s = f->second;
      continue;
    }
    if (auto hf = per_head_factor(n); hf && !pl.head_scale) {  // SwinV2's logit scale: head_scale.h
      pl.head_scale = hf->first;
      pl.head_scale_node = n;
      pl.core.push_back(n);
      s = hf->second;
      continue;
    }
    if (n->is("Mul") || n->is("Div")) {
      if (pl.fail.empty()) pl.fail = "rule 7: the scale in " + n->label() + " is not a constant";
      pl.core.push_back(n);
      // Continue through the operand that leads back to a MatMul to stay structural.
      Value* a = n->input(0);
      s = a;
      continue;
    }
    if (n->is("Add") && n->inputs.size() == 2 && n->input(1)) {
      // The scores side is the one that leads back to the QK MatMul.
      int side = -1;
      for (int i = 0; i < 2 && side < 0; ++i)
        if (reaches_qk(n->input(i), 0)) side = i;
      if (side < 0) return "Add without a scores side";
      if (tanh_node && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " adds a mask term inside the soft-capping " + tanh_node->label() +
                  "; the fused op caps only scale·Q·Kᵀ";
      // A mask added before (some of) the scale: (s + m)·c = s·c + m·c, carried as the
      // term m·c (the rewrite multiplies it; a proven padding fill becomes fill·c). Only
      // positive factors: a negative one would turn the fill into a large positive score.
      if (seen_scale && !(pl.scale > 0.0) && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " adds a mask term that is then multiplied by the non-positive factor " +
                  std::to_string(pl.scale);
      pl.add_bias.insert(pl.add_bias.begin(), n->input(1 - side));
      pl.terms.insert(pl.terms.begin(), MaskTerm{n->input(1 - side), false, false, 0.0, scores_flat});
      pl.terms.front().factor = pl.scale;
      pl.terms.front().batch_windows = window_view;
      pl.core.push_back(n);
      s = n->input(side);
      continue;
    }
    if (n->is("Sub") && n->inputs.size() == 2 && n->input(1) && reaches_qk(n->input(0), 0) && !reaches_qk(n->input(1), 0)) {
      // s - v = s + v·(-1): an additive term with a negative factor (mask_proofs.h MaskTerm::negated).
      if (tanh_node && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " subtracts a term inside the soft-capping " + tanh_node->label();
      pl.add_bias.insert(pl.add_bias.begin(), n->input(1));
      pl.terms.insert(pl.terms.begin(), MaskTerm{n->input(1), false, false, 0.0, scores_flat});
      pl.terms.front().factor = -pl.scale;
      pl.terms.front().negated = true;
      pl.terms.front().batch_windows = window_view;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (n->is("Tanh") && !tanh_node) {
      tanh_node = n;
      softcap_outer = pl.scale;  // the factors between the Tanh and the mask terms / Softmax
      pl.scale = 1.0;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (n->is("Tanh") || n->is("Sigmoid") || n->is("Erf") || n->is("Relu") || n->is("Abs") || n->is("Neg")) {
      // A non-linear map of the scores between Q·Kᵀ and the Softmax (Gemma-2's logit
      // soft-capping: cap * tanh(scores / cap)): the fused op cannot express it.
      if (pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " transforms the attention scores non-linearly (e.g. logit soft-capping " +
                  "cap*tanh(s/cap)); Attention has no such step";
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (auto c = lowest_clamp(n); c && !pl.clamp) {  // Max(scores, finfo.min): scores_clamp.h
      pl.clamp = c->first;
      pl.clamp_node = n;
      pl.core.push_back(n);
      s = c->second;
      continue;
    }
    if (n->is("Where") && window_view && pl.fail.empty())
      pl.fail = "rule 7: " + n->label() + " masks Swin's [B', nW, H, S, S] window view with a Where (only added terms are tiled)";
    if (n->is("Where")) {
      if (n->inputs.size() != 3 || !n->input(1) || !n->input(2)) return "malformed Where";
      auto f1 = const_scalar(n->input(1)), f2 = const_scalar(n->input(2));
      int scores_slot = f2 && !f1 ? 1 : (f1 && !f2 ? 2 : -1);
      if (scores_slot < 0) return "Where without a scalar fill";
      pl.keep = n->input(0);
      pl.keep_inverted = scores_slot == 2;
      pl.fill = scores_slot == 1 ? *f2 : *f1;
      // Masked before (some of) the scale (GPT-J: Where(causal, s, min) / sqrt(d)): exactly
      // Where(keep, s·c, fill·c), so the fill is scaled (finfo.min·c is finite, not -inf).
      if (seen_scale) {
        if (!(pl.scale > 0.0) && pl.fail.empty())
          pl.fail = "rule 7: " + n->label() + " masks the scores, which are then multiplied by the non-positive factor " +
                    std::to_string(pl.scale);
        pl.fill = static_cast<double>(static_cast<float>(pl.fill) * static_cast<float>(pl.scale));
      }
      pl.terms.insert(pl.terms.begin(), MaskTerm{pl.keep, true, pl.keep_inverted, pl.fill, scores_flat});
      if (tanh_node && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " masks the scores inside the soft-capping " + tanh_node->label() +
                  "; the fused op caps only scale·Q·Kᵀ";
      pl.core.push_back(n);
      s = n->input(scores_slot);
      continue;
    }
    break;
  }
  if (!pl.qk) return "scores do not come from a MatMul";
  if (window_view && pl.fail.empty()) pl.fail = "rule 7: the [B', nW, H, S, S] window view of the scores is not split from them";
  for (const MaskTerm& t : pl.terms)
    if (t.batch_windows && !window_term_ok(t.v, t.batch_windows) && pl.fail.empty())
      pl.fail = "rule 7: the window term '" + t.v->name + "' is not a known [1, nW, h, S, S] tensor";
  if (pl.flat && !scores_flat && attn::rank_of(pl.qk->output(0)) == 3) {
    // The whole scores chain is on [B·H, S, S_kv] views (torch MHA's bmm path, never viewed
    // as 4-D): every mask term is lifted to [B, H, ...] by the rewrite.
    scores_flat = true;
    for (MaskTerm& t : pl.terms) t.flat = true;
  }
  chain.flat = scores_flat;
  chain.tanh = tanh_node;
  chain.softcap_outer = softcap_outer;
  return "";
}

}  // namespace fuseopt::attn
