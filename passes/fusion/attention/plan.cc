// Attention fusion: the analysis producing a Plan (see plan.h).
#include "passes/fusion/attention/plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "ir/shape_inference.h"
#include "passes/fusion/attention/head_scale.h"
#include "passes/fusion/attention/materialized_mask.h"
#include "passes/fusion/attention/output_reshape.h"
#include "passes/fusion/attention/scores_chain.h"
#include "passes/fusion/attention/scores_clamp.h"
#include "passes/fusion/attention/sinks.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

namespace {

// x = Gather(Squeeze(Transpose(Unsqueeze(Reshape(p [S, B, 3E], -> [S, B, 3, E]), 0), 3,1,2,0,4), -2), i)
// (torch's unflatten + unsqueeze + transpose(0, -2) + squeeze(-2) + select(0, i)): returns p when
// the shapes prove it, so x = p[..., i·E : (i+1)·E].
Value* torch_unbind_source(const Value* x, int64_t i, int64_t e) {
  const Node* g = x ? x->producer : nullptr;
  if (!g || !g->is("Gather") || g->attr_int("axis", 0) != 0 || const_scalar(g->input(1)) != static_cast<double>(i))
    return nullptr;
  if (auto r = attn::rank_of(g->input(1)); !r || *r != 0) return nullptr;  // a scalar index drops the axis
  const Node* sq = g->input(0)->producer;
  if (!sq || !sq->is("Squeeze")) return nullptr;
  std::vector<int64_t> axes = sq->has_attr("axes") ? sq->attr_ints("axes") : attn::const_ints(sq->input(1)).value_or(std::vector<int64_t>{});
  if (axes != std::vector<int64_t>{-2} && axes != std::vector<int64_t>{3}) return nullptr;
  const Node* t = sq->input(0)->producer;
  if (!t || !t->is("Transpose") || t->attr_ints("perm") != Perm{3, 1, 2, 0, 4}) return nullptr;
  const Node* u = t->input(0)->producer;
  if (!u || !u->is("Unsqueeze")) return nullptr;
  axes = u->has_attr("axes") ? u->attr_ints("axes") : attn::const_ints(u->input(1)).value_or(std::vector<int64_t>{});
  if (axes != std::vector<int64_t>{0}) return nullptr;
  const Node* r = u->input(0)->producer;
  if (!r || !r->is("Reshape") || !r->input(0) || !r->output(0)) return nullptr;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 3 || c->size() != 4 || !attn::dims_same((*a)[0], (*c)[0]) ||
      !attn::dims_same((*a)[1], (*c)[1]) || !(*a)[2].known() || (*a)[2].value != 3 * e || !(*c)[2].known() ||
      (*c)[2].value != 3 || !(*c)[3].known() || (*c)[3].value != e)
    return nullptr;
  return r->input(0);
}

// Channels-first attention (vision / diffusion blocks, e.g. the Stable Diffusion VAE's AttnBlock):
// Q, K, V from 1×1 Convs as [B, C, H·W], scores bmm(qᵀ, k), output bmm(v, Pᵀ) reshaped back to
// [B, C, H, W]. Exact as Attention(Transpose(q), Transpose(k), Transpose(v), num_heads = 1)
// then Transpose(Y), but that re-layout is not implemented: the form is recognised (so the
// report says why it stays unfused) and refused under rule 4, naming the Conv projection.
std::string channels_first(Node* root, Node* mm, Plan& pl) {
  if (mm->inputs.size() != 2 || !mm->input(0) || !mm->input(1)) return "no P·V MatMul";
  Node* pt = mm->input(1)->producer;
  if (!pt || !pt->is("Transpose") || pt->attr_ints("perm") != Perm{0, 2, 1} || !pt->input(0)) return "not Transpose(0,2,1,3)";
  Node* sm = pt->input(0)->producer;
  while (sm && is_passthrough(sm) && sm->input(0)) sm = sm->input(0)->producer;
  if (!sm || !sm->is("Softmax")) return "not Transpose(0,2,1,3)";
  // The V operand's source: through Reshape / Transpose / passthrough to a Conv (1×1 kernel)?
  std::string conv;
  const Node* n = mm->input(0)->producer;
  for (int d = 0; d < 4 && n && !n->is("Conv"); ++d)
    n = (n->is("Reshape") || n->is("Transpose") || is_passthrough(n)) && n->input(0) ? n->input(0)->producer : nullptr;
  if (n && n->is("Conv")) {
    const auto k = n->attr_ints("kernel_shape");
    const bool one = !k.empty() && std::all_of(k.begin(), k.end(), [](int64_t x) { return x == 1; });
    conv = " (V from " + n->label() + (one ? ", a 1x1-convolution projection" : "") + ")";
  }
  pl.core = {root, mm, pt, sm};
  pl.fail = "rule 4: channels-first attention " + mm->label() + " = V [B, C, N] x P^T" + conv +
            ": Attention takes Q/K/V as [B, S, heads*D]; the transposes that would make it one head over " +
            "C channels are not implemented";
  return "";
}

}  // namespace

std::optional<PathShape> path_shape(const Plan& pl, const Value* x) {
  if (!x || !x->producer || !x->shape) return std::nullopt;
  PathShape r;
  for (const HeadPath* hp : {&pl.k, &pl.v})
    if (hp->present && hp->past && std::find(hp->nodes.begin(), hp->nodes.end(), x->producer) != hp->nodes.end())
      r.hp = hp;
  if (!r.hp) return std::nullopt;
  const std::vector<SymExpr> lens = kv_lens(*r.hp);
  const auto batch = src_dim(*r.hp, 0);
  const auto batch_e = batch ? SymExpr::from_dim(*batch) : std::nullopt;
  for (const Dim& d : *x->shape) {
    if (d.known()) {
      r.dims.push_back({PathShape::Part::Const, d.value});
      continue;
    }
    const auto e = SymExpr::from_dim(d);
    if (!e) return std::nullopt;
    if (std::find(lens.begin(), lens.end(), *e) != lens.end())
      r.dims.push_back({PathShape::Part::KvLen, 0});
    else if (batch_e && *e == *batch_e)
      r.dims.push_back({PathShape::Part::Batch, 0});
    else if (const int64_t h = std::max(pl.num_heads, r.hp->heads * r.hp->repeat);
             batch_e && h > 1 && *e == *batch_e * SymExpr::constant(h))
      r.dims.push_back({PathShape::Part::BatchTimes, h});  // BLOOM's [B·H, D, S_kv] keys
    else
      return std::nullopt;
  }
  return r;
}

// Structural walk; "" on success (legality problems go to plan.fail).
std::string analyze(const Graph& g, Node* root, Plan& pl) {
  pl = Plan{};
  pl.root = root;
  if (!root->is("Reshape") || root->inputs.size() < 2 || !root->input(0) || !root->input(1)) return "not a Reshape";
  Node* tr = root->input(0) ? root->input(0)->producer : nullptr;
  if (tr && tr->is("MatMul")) return channels_first(root, tr, pl);
  if (!tr || !tr->is("Transpose")) return "not Transpose(0,2,1,3)";
  // Seq-first output (torch nn.MultiheadAttention): [B, H, S, Dv] -> Transpose(2,0,1,3) [S, B, H, Dv],
  // or the flat [B·H, S, Dv] -> Transpose(1,0,2) [S, B·H, Dv]; then a 2-D Reshape [S·B, H·Dv].
  const Perm out_perm = tr->attr_ints("perm");
  const bool flat_seq_first = out_perm == Perm{1, 0, 2} && attn::rank_of(tr->input(0)) == 3;
  pl.seq_first_output = out_perm == Perm{2, 0, 1, 3} || flat_seq_first;
  // Windowed 2-D output (SAM): P·V [B, H, S, Dv] viewed [B, H, h, w, Dv], Transpose(0,2,3,1,4):
  // the elements of Y [B, S, H·Dv] in order, so the root's target applies to Y (output_reshape.h).
  Node* spatial_split = nullptr;
  bool flat_spatial = false;  // P·V [B·H, S, Dv] viewed [B, H, h, w, Dv] directly (the bmm spelling)
  if (out_perm == Perm{0, 2, 3, 1, 4} && tr->input(0) && splits_sequence_2d(tr->input(0)->producer))
    spatial_split = tr->input(0)->producer;
  if (out_perm == Perm{0, 2, 3, 1, 4} && tr->input(0) && splits_flat_sequence_2d(tr->input(0)->producer)) {
    spatial_split = tr->input(0)->producer;
    flat_spatial = true;
  }
  pl.spatial_output = spatial_split != nullptr;
  if (out_perm != Perm{0, 2, 1, 3} && !pl.seq_first_output && !pl.spatial_output) return "not Transpose(0,2,1,3)";
  Node* pv = spatial_split ? spatial_split->input(0)->producer : tr->input(0) ? tr->input(0)->producer : nullptr;
  if (flat_seq_first || flat_spatial) pl.flat = true;
  std::vector<Node*> out_views;  // no-op re-views of P·V before the transpose (Falcon TorchScript)
  while (pv && !flat_seq_first && out_views.size() < 2 && is_identity_reshape(pv) && pv->input(0)->producer) {
    out_views.push_back(pv);
    pv = pv->input(0)->producer;
  }
  Node* pv_split = nullptr;
  if (pv && !flat_seq_first && splits_bh(pv) && pv->input(0)->producer) {  // bmm-style: [B·H, S, D] -> [B, H, S, D]
    pv_split = pv;
    pv = pv->input(0)->producer;
    pl.flat = true;
  }
  if (!pv || !pv->is("MatMul") || pv->inputs.size() != 2 || !pv->input(0) || !pv->input(1)) return "no P·V MatMul";
  pl.out_transpose = tr;
  pl.pv = pv;
  pl.core = {root, tr, pv};
  if (spatial_split) pl.core.push_back(spatial_split);
  pl.core.insert(pl.core.end(), out_views.begin(), out_views.end());
  if (pv_split) pl.core.push_back(pv_split);
  // P back to Softmax.
  Value* pval = pv->input(0);
  Node* sm = nullptr;
  bool p_merged = false;  // walking back: P's [B·H, S, S_kv] bmm view seen
  for (int d = 0; d < 6 && pval && pval->producer; ++d) {
    Node* n = pval->producer;
    if (n->is("Softmax")) { sm = n; break; }
    if (take_sink_slice(n, pl)) {  // GPT-OSS: the sink's probability column sliced off (sinks.h)
      pval = n->input(0);
      continue;
    }
    if (pl.flat && merges_bh(n)) {  // P [B, H, S, S_kv] viewed as [B·H, S, S_kv] for the bmm
      p_merged = true;
      pl.core.push_back(n);
      pval = n->input(0);
      continue;
    }
    if (pl.flat && p_merged && splits_bh(n)) {
      // A flat softmax viewed [B, H, S, S_kv] and back (XGLM keeps the 4-D view for
      // output_attentions): the round trip gives P's own [B·H, S, S_kv] layout.
      p_merged = false;
      pl.core.push_back(n);
      pval = n->input(0);
      continue;
    }
    if (n->is("Where") && n->inputs.size() == 3 && n->input(0) && n->input(0)->producer &&
        n->input(0)->producer->is("IsNaN") && n->input(0)->producer->input(0) == n->input(2) &&
        const_scalar(n->input(1)) == 0.0) {
      // torch SDPA: Where(IsNaN(P), 0, P) turns fully masked (NaN) rows into zeros; the
      // fused op does the same through masked_rows_zero = 1 (a NaN row of P is a zero row of Y).
      pl.nan_to_zero = true;
      pl.core.push_back(n);
      pl.core.push_back(n->input(0)->producer);
      pval = n->input(2);
      continue;
    }
    if (n->is("Cast") && !is_passthrough(n) && n->input(0) && n->input(0)->producer &&
        n->input(0)->producer->is("Cast")) {
      // Cast(Cast(P, float), T) with P of dtype T = fp16/bf16 (TorchScript's softmax(dtype=float32)
      // .to(T) on a half softmax): an exact round trip, P's own values.
      Node* inner = n->input(0)->producer;
      const DType t = dtype_of(inner->input(0));
      if ((t == DType::Float16 || t == DType::BFloat16) && inner->attr_int("to", 0) == static_cast<int64_t>(DType::Float) &&
          n->attr_int("to", 0) == static_cast<int64_t>(t)) {
        pl.core.push_back(n);
        pl.core.push_back(inner);
        pval = inner->input(0);
        continue;
      }
    }
    if (n->is("Cast") && !is_passthrough(n)) {
      // Only the downcast of an fp32 softmax back to the model's type is fine
      // (checked against the upcast below); the fused op's softmax is fp32.
      if (pl.down_cast && pl.fail.empty())
        pl.fail = "rule 5: " + n->label() + " changes the precision of the attention probabilities";
      pl.down_cast = n;
    } else if (!is_passthrough(n)) {
      break;
    }
    pl.core.push_back(n);
    pval = n->input(0);
  }
  if (!sm) return "P is not a Softmax";
  pl.softmax = sm;
  pl.core.push_back(sm);
  const int64_t axis = sm->attr_int("axis", g.opset("") >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) {
    pl.fail = "rule 7: " + sm->label() + " normalises axis " + std::to_string(axis) + ", not the key axis";
  }
  // Scores chain back to the QK MatMul (in bmm-style exports partly in the [B·H, S, S_kv] view):
  // scores_chain.h.
  ScoresChain chain;
  if (std::string why = walk_scores_chain(pl, chain); !why.empty()) return why;
  const bool scores_flat = chain.flat;
  Node* const tanh_node = chain.tanh;
  const double softcap_outer = chain.softcap_outer;
  if (pl.down_cast && !pl.up_cast && pl.fail.empty())
    pl.fail = "rule 5: " + pl.down_cast->label() + " changes the precision of the attention probabilities";
  if (pl.up_cast && pl.fail.empty()) {
    // The softmax between the casts must be the fp32 one (an upcast with half ops after it is not this form).
    const DType p = dtype_of(pl.down_cast->input(0));
    if (p != DType::Float && p != DType::Undefined)
      pl.fail = "rule 5: " + pl.down_cast->label() + " casts " + dtype_name(p) +
                " probabilities, not the float32 softmax of " + pl.up_cast->label();
  }
  pl.core.push_back(pl.qk);
  for (const MaskTerm& t : pl.terms)
    if (t.where && dtype_of(t.v) != DType::Bool && dtype_of(t.v) != DType::Undefined && pl.fail.empty())
      pl.fail = "rule 7: Where condition '" + t.v->name + "' is not bool";
  if (pl.flat && !scores_flat && pl.fail.empty()) pl.fail = "rule 7: the [B*H, S, S_kv] scores are not viewed back as [B, H, S, S_kv]";
  pl.q = trace_head(pl.qk->input(0), {0, 2, 1, 3}, scores_flat);
  pl.k = trace_head(pl.qk->input(1), {0, 2, 3, 1}, scores_flat);
  pl.v = trace_head(pv->input(1), {0, 2, 1, 3}, pl.flat);
  for (HeadPath* hp : {&pl.q, &pl.k, &pl.v})
    if (!hp->fail.empty() && pl.fail.empty()) pl.fail = hp->fail;
  if (!pl.fail.empty()) return "";
  // KV cache: K and V both concatenated with a past (the op's past -> present), never Q.
  if (pl.q.present) pl.fail = "rule 7: the query is concatenated along the sequence like a key/value cache";
  else if ((pl.k.present == nullptr) != (pl.v.present == nullptr))
    pl.fail = "rule 7: only one of key and value is concatenated with a cache";
  if (!pl.fail.empty()) return "";
  pl.scale *= pl.q.scale * pl.k.scale;
  if (tanh_node) {
    if (!(std::isfinite(softcap_outer) && softcap_outer != 0.0) || !std::isfinite(pl.scale) || pl.scale == 0.0) {
      pl.fail = "rule 7: " + tanh_node->label() + " is not a logit soft-capping a*tanh(b*scores) with finite nonzero a, b";
      return "";
    }
    pl.softcap = std::fabs(softcap_outer);
    pl.scale *= softcap_outer;
  }
  // Causal mask terms (a Trilu of finfo.min, a sliced constant tril buffer) become causal=1.
  for (auto it = pl.terms.begin(); it != pl.terms.end();) {
    if (!it->flat && !it->no_proofs() && (is_causal_trilu(*it, pl.q) || is_causal_buffer(*it, pl.q, pl.k) || is_causal_tril_where(*it, pl.q))) {
      pl.causal = true;
      it = pl.terms.erase(it);
    } else {
      ++it;
    }
  }
  // Masks the exporter materialised as one boolean [B, 1, S_q, S_kv] tensor (transformers 5):
  // each And-leaf proven causal, key padding or all-true (materialized_mask.h).
  bool removed = pl.causal, proven_mask = false;
  double mask_fill = 0.0;
  for (auto it = pl.terms.begin(); it != pl.terms.end();) {
    std::string why;
    auto kp = it->no_proofs() ? std::nullopt : prove_materialized_mask(*it, pl.q, pl.k, &why);
    // The op has one `mask` and one mask_filter_value: a padding term is taken only when no
    // other keep-Where (with its own fill) stays, and only one.
    const bool other_where = std::any_of(pl.terms.begin(), pl.terms.end(),
                                         [&](const MaskTerm& t) { return &t != &*it && t.where; });
    if (kp && kp->padding && (proven_mask || other_where)) {
      why = "a second key-padding term or another Where mask term";
      kp.reset();
    }
    if (kp && kp->window && pl.window && kp->window != pl.window) {
      why = "a second sliding window of another width";
      kp.reset();
    }
    if (kp && kp->slice_ends[0] && g.opset("") < 10) {  // the rewrite's Slice takes its ends as an input
      why = "the mask's dims are not provably [B, S_kv] and Slice before opset 10 cannot cut it to them";
      kp.reset();
    }
    if (!kp) {
      if (!why.empty()) pl.mask_notes.push_back("'" + it->v->name + "': " + why);
      ++it;
      continue;
    }
    pl.causal = pl.causal || kp->causal;
    if (kp->window) pl.window = kp->window;
    if (kp->padding) {
      pl.mask = kp->padding;
      pl.mask_slice_ends[0] = kp->slice_ends[0];
      pl.mask_slice_ends[1] = kp->slice_ends[1];
      mask_fill = it->where ? kp->fill : static_cast<double>(static_cast<float>(kp->fill) * static_cast<float>(it->factor));
      proven_mask = true;
    }
    removed = true;
    it = pl.terms.erase(it);
  }
  if (removed) {  // re-derive the remaining terms
    pl.add_bias.clear();
    pl.keep = nullptr;
    for (const MaskTerm& t : pl.terms) {
      if (!t.where) {
        pl.add_bias.push_back(t.v);
      } else {
        pl.keep = t.v;
        pl.keep_inverted = t.inverted;
        pl.fill = t.fill;
      }
    }
    if (proven_mask) pl.fill = mask_fill;
  }
  if (pl.terms.size() > 1 && pl.keep) {
    // Several terms with a Where among them (GPT-2 of transformers 4: Where(causal, s, min) + mask):
    // one additive float attn_bias built outside: Where(keep, b, fill) + ... It equals the
    // original because s + fill == fill for any finite score when fill <= -1e30 (or -inf).
    pl.combined = true;
    for (const MaskTerm& t : pl.terms)
      if (t.where && !(t.fill <= -1e30) && pl.fail.empty())
        pl.fail = "rule 7: the Where mask fill " + std::to_string(t.fill) +
                  " is not large enough to combine it with the other mask terms into one attn_bias";
  }
  if (pl.v.scale != 1.0) pl.fail = "rule 7: V is scaled on its way to the P·V MatMul";
  if (pl.q.repeat != 1) pl.fail = "rule 7: the query heads are repeated";

  // Heads: the total comes from any path that knows it; kv heads from K/V sources.
  auto total = [](const HeadPath& h) { return h.heads > 0 ? h.heads * h.repeat : -1; };
  int64_t H = total(pl.q);
  // Batch axis: the Q·Kᵀ and P·V MatMuls broadcast their batch dims, the fused op does
  // not: K and V must provably have Q's batch dim (a size-1 batch against Q's B would
  // share one key set across the batch).
  if (auto qb = src_dim(pl.q, 0)) {
    for (const auto& [hp, what] : {std::pair<const HeadPath*, const char*>{&pl.k, "key"}, {&pl.v, "value"}}) {
      auto kb = src_dim(*hp, 0);
      if (!kb || attn::dims_same(*qb, *kb) || !pl.fail.empty()) continue;
      const bool one = kb->known() && kb->value == 1;
      pl.fail = std::string("rule 7: the ") + what + " operand '" + hp->src->name + "' has batch dim " +
                (kb->known() ? std::to_string(kb->value) : kb->symbol.empty() ? std::string("?") : kb->symbol) +
                ", query has " + (qb->known() ? std::to_string(qb->value) : qb->symbol.empty() ? std::string("?") : qb->symbol) +
                (one ? ": the MatMul broadcasts it over the batch, which Attention cannot express"
                     : ": cannot prove they are the same batch");
    }
  }
  // Heads axis: the MatMuls broadcast a size-1 head axis, so an operand re-laid out from a
  // rank-4 tensor needs a known head count to tell a broadcast from a full set of heads.
  for (const auto& [hp, what] : {std::pair<const HeadPath*, const char*>{&pl.q, "query"}, {&pl.k, "key"}, {&pl.v, "value"}}) {
    if (hp->materialize && hp->heads <= 0 && hp->src && pl.fail.empty())
      pl.fail = std::string("rule 7: the head count of the ") + what + " operand '" + hp->src->name +
                "' is unknown, so the MatMul broadcast of its head axis cannot be proven";
  }
  // Multi-query attention written as a MatMul broadcast of one kv head (Falcon, GPT-BigCode):
  // K, V [B, 1, S, D] against Q [B, H, S, D] is exactly kv_num_heads = 1 (each query head
  // reads the one kv head). Needs Q's head count to be known.
  if (pl.k.heads == 1 && pl.v.heads == 1 && pl.k.repeat == 1 && pl.v.repeat == 1) {
    if (H > 1) pl.k.repeat = pl.v.repeat = H;
    else if (H < 0 && pl.fail.empty())
      pl.fail = "rule 7: key/value have one head broadcast over the query heads, but the query head count is unknown";
  } else if ((pl.k.heads == 1) != (pl.v.heads == 1) && pl.k.heads > 0 && pl.v.heads > 0 && pl.k.repeat == 1 &&
             pl.v.repeat == 1 && H > 1 && pl.fail.empty()) {
    pl.fail = "rule 7: key and value have different kv head counts (key " + std::to_string(pl.k.heads) + ", value " +
              std::to_string(pl.v.heads) + "): the MatMul broadcasts only one of them over the " + std::to_string(H) +
              " query heads";
  }
  if (H < 0) H = total(pl.v);
  if (H < 0) H = total(pl.k);
  int64_t Hkv = pl.v.heads > 0 ? pl.v.heads : (pl.k.heads > 0 ? pl.k.heads : -1);
  if (Hkv < 0 && H > 0 && pl.k.repeat > 0 && H % pl.k.repeat == 0) Hkv = H / pl.k.repeat;
  if (H <= 0 || Hkv <= 0) {
    if (pl.fail.empty()) pl.fail = "rule 7: the number of heads cannot be determined from the reshapes";
    return "";
  }
  for (const HeadPath* hp : {&pl.q, &pl.k, &pl.v}) {
    if (hp->heads > 0 && total(*hp) != H && pl.fail.empty())
      pl.fail = "rule 7: query and key/value reshapes disagree on num_heads (" + std::to_string(total(*hp)) + " vs " +
                std::to_string(H) + ")";
  }
  if (pl.k.heads > 0 && pl.v.heads > 0 && pl.k.heads != pl.v.heads && pl.fail.empty())
    pl.fail = "rule 7: key and value have different kv head counts";
  if (pl.k.repeat != pl.v.repeat && pl.fail.empty()) pl.fail = "rule 7: key and value are repeated differently";
  if (pl.q.dim > 0 && pl.k.dim > 0 && pl.q.dim != pl.k.dim && pl.fail.empty())
    pl.fail = "rule 7: query and key head dims differ";
  if (H % Hkv != 0 && pl.fail.empty()) pl.fail = "rule 7: num_heads is not a multiple of kv_num_heads";
  // A single mask term that provably is a key-padding mask goes in as `mask`.
  if (pl.fail.empty() && !pl.mask && pl.terms.size() == 1 && !pl.terms[0].flat && !pl.terms[0].no_proofs()) {
    if (pl.keep && !pl.keep_inverted) {
      Value* m = from_rank2(pl.keep);
      if (m && mask_dims_match(m, pl.k)) {
        pl.mask = m;
        pl.keep = nullptr;
      }
    } else if (!pl.add_bias.empty()) {
      auto kp = additive_key_padding(peel_key_prefix_slices(pl.add_bias[0], pl.q, pl.k));
      if (kp && mask_dims_match(kp->mask, pl.k)) {
        pl.mask = kp->mask;
        pl.mask_keep_is_one = kp->keep_is_one;
        pl.fill = static_cast<double>(static_cast<float>(kp->fill) * static_cast<float>(pl.terms[0].factor));
        pl.add_bias.clear();
        pl.terms.clear();
        pl.mask_notes.clear();  // the materialised-mask proof's notes: this term is the mask after all
      }
    }
  }
  // torch MHA's key_padding_mask bias (Where(kpm, -inf, 0) viewed [B, 1, 1, S], expanded over
  // the heads, also in the [B·H, 1, S] bmm view): the op's `mask` = Not(kpm), fill -inf.
  if (pl.fail.empty() && !pl.mask && pl.terms.size() == 1 && !pl.terms[0].where && !pl.terms[0].no_proofs()) {
    auto kp = broadcast_key_padding(pl.terms[0].v, H);
    if (kp && mask_dims_match(kp->mask, pl.k)) {
      pl.mask = kp->mask;
      pl.mask_inverted = kp->inverted;
      pl.fill = static_cast<double>(static_cast<float>(kp->fill) * static_cast<float>(pl.terms[0].factor));
      pl.add_bias.clear();
      pl.terms.clear();
      pl.mask_notes.clear();
    }
  }
  pl.num_heads = H;
  pl.kv_heads = Hkv;
  check_sinks(pl);  // now that H is known: the sink column is H per-head logits (sinks.h)
  // KV cache: the op produces the presents, so none of its inputs may be computed from them,
  // except through Shape (the rewrite rebuilds Shape(present) from the past and the new keys).
  if (pl.k.present && pl.fail.empty()) {
    std::vector<const Value*> todo = {pl.mask, pl.q.src, pl.k.src, pl.v.src, pl.k.past, pl.v.past};
    for (const MaskTerm& t : pl.terms) todo.push_back(t.v);
    std::set<const Value*> seen;
    while (!todo.empty() && pl.fail.empty() && seen.size() < 4000) {
      const Value* x = todo.back();
      todo.pop_back();
      if (!x || !seen.insert(x).second) continue;
      if (x == pl.k.present || x == pl.v.present) {
        pl.fail = "rule 7: an input of the fused attention is computed from the present keys/values '" + x->name + "'";
        break;
      }
      const Node* n = x->producer;
      if (!n || (n->is("Shape") && (n->input(0) == pl.k.present || n->input(0) == pl.v.present))) continue;
      if (n->is("Shape") && path_shape(pl, n->input(0))) {
        // transformers' SDPA path slices the mask to the repeated keys' length
        // (mask[..., :key.shape[-2]] after repeat_kv): the rewrite rebuilds that shape too.
        if (std::find(pl.path_shape_reads.begin(), pl.path_shape_reads.end(), n) == pl.path_shape_reads.end())
          pl.path_shape_reads.push_back(const_cast<Node*>(n));
        continue;
      }
      for (const Value* i : n->inputs) todo.push_back(i);
    }
  }
  check_output_reshape(root, pl, H);
  // Rule 5: one float dtype for Q, K, V, the scores and additive biases.
  std::vector<const Value*> vals = {pl.q.src, pl.k.src, pl.v.src, pv->input(0)};
  for (Value* b : pl.add_bias) vals.push_back(b);
  DType dt = DType::Undefined;
  for (const Value* x : vals) {
    DType t = dtype_of(x);
    if (t == DType::Undefined) continue;
    if (!dtype_is_float(t) || (dt != DType::Undefined && t != dt)) {
      if (pl.fail.empty()) pl.fail = "rule 5: '" + x->name + "' has dtype " + dtype_name(t) + " in a " + dtype_name(dt) + " attention";
      break;
    }
    dt = t;
  }
  for (Value* b : pl.add_bias) {
    const bool windowed = std::any_of(pl.terms.begin(), pl.terms.end(),
                                      [&](const MaskTerm& t) { return t.v == b && t.batch_windows; });
    if (auto r = attn::rank_of(b); r && *r > 4 && !windowed && pl.fail.empty())
      pl.fail = "rule 7: mask '" + b->name + "' has rank > 4";
  }
  if (g.opset("") < 13 && pl.fail.empty()) pl.fail = "rule 7: default-domain opset < 13 is not supported by Attention";
  // Packed QKV: Q, K, V are outputs 0, 1, 2 of one Split of the last axis.
  Node* sp = pl.q.src && !pl.q.materialize ? pl.q.src->producer : nullptr;
  if (sp && sp->is("Split") && sp->outputs.size() == 3 && !pl.k.materialize && !pl.v.materialize &&
      pl.k.src->producer == sp && pl.v.src->producer == sp && pl.q.src == sp->output(0) && pl.k.src == sp->output(1) &&
      pl.v.src == sp->output(2) && pl.q.dim > 0 && pl.q.dim == pl.v.dim) {
    auto r = attn::rank_of(sp->input(0));
    int64_t ax = sp->attr_int("axis", 0);
    bool last = ax == -1 || (r && ax == *r - 1);
    std::vector<int64_t> sizes = sp->has_attr("split") ? sp->attr_ints("split")
                                                       : attn::const_ints(sp->input(1)).value_or(std::vector<int64_t>{});
    bool sizes_ok = sizes == std::vector<int64_t>{H * pl.q.dim, Hkv * pl.q.dim, Hkv * pl.q.dim} ||
                    (sizes.empty() && H == Hkv);
    if (last && sizes_ok) pl.split = sp;
  }
  // torch MHA's packed in-projection: q, k, v = Gather(i) of unflatten(-1, (3, E)).unsqueeze(0)
  // .transpose(0, -2).squeeze(-2) of one [S, B, 3E] projection, i = 0, 1, 2: each is the i-th
  // third of its last axis, so Transpose(projection, 1,0,2) is the packed [B, S, 3E] input.
  if (pl.q.seq_first && pl.k.seq_first && pl.v.seq_first && H == Hkv && pl.q.dim > 0 && pl.q.dim == pl.v.dim &&
      pl.q.dim == pl.k.dim) {
    Value* p0 = torch_unbind_source(pl.q.src, 0, H * pl.q.dim);
    if (p0 && torch_unbind_source(pl.k.src, 1, H * pl.q.dim) == p0 && torch_unbind_source(pl.v.src, 2, H * pl.q.dim) == p0)
      pl.packed_seq_first = p0;
  }
  if (pl.fail.empty()) pl.fail = settle_clamp(pl);
  if (pl.fail.empty()) pl.fail = check_head_scale(pl);
  return "";
}


}  // namespace fuseopt::attn
