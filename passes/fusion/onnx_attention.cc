// ONNX Attention (opset 23/24) -> fuseopt.Attention
//
// The dynamo exporter writes F.scaled_dot_product_attention as ONE standard `Attention` node
// from opset 23 on (other tools do too), usually in the 4-D layout between the head
// transposes:
//
//   Transpose(0,2,1,3)(Reshape(q [B,S,H·D] -> [B,S,H,D])) ─┐
//   ... K, V likewise ...                                  ├─ Attention -> [B,H,S,Dv]
//                                                          ┘     -> Transpose(0,2,1,3) -> Reshape
//
// The runtime runs that node on a reference kernel (one block per query row on CUDA); this pass
// turns it into fuseopt.Attention so the fused kernels run. The layouts: 3-D Q/K/V
// ([B, S, H·D]) are fuseopt's own; 4-D ones ([B, H, S, D]) are brought to it by a Reshape of
// the head transpose's input where a Transpose(0,2,1,3) feeds the node (no copy), else by a
// Transpose + Reshape; the 4-D Y is the fused Y reshaped to [B, S, H, Dv] (the output
// transpose's value when a Transpose(0,2,1,3) is Y's only reader, else transposed back).
//
// Semantics (kernels/common/onnx_attention_params.h, docs/fused_ops.md): ONNX's attn_mask (bool:
// true keeps; float: added) is fuseopt's attn_bias with the same broadcast; a row whose every
// key is masked gives 0 in ONNX: masked_rows_zero = 1; softcap and scale carry over (both
// default to 1/sqrt(D) for the scale); past_key/past_value and present_key/present_value are
// the same tensors in both ops.
// Legality (DESIGN rule 7 unless noted; each rejection names the node):
//   - ONNX's is_causal masks key j > i + P (P = past length): the upper-left diagonal of the new
//     keys; fuseopt's causal is bottom-right aligned. They agree when the query and the new keys
//     have the same length, which must be provable (the same dim on Q and K);
//   - a mask whose last dim is shorter than the total key count is padded with -inf by ONNX:
//     the mask's last dim must provably be the total (K's length, or present_key's with a past);
//   - opset 25's sliding window keeps key j for query i while p - L <= j <= p + R (p = i + P,
//     L = left_window_size, R = right_window_size, -1 = unbounded: the ONNX reference's
//     _apply_sliding_window). With the query length provably the new keys' (as for is_causal),
//     p is fuseopt's q_pos, so L >= 0 is window = L + 1 and R = 0 is causal; R > 0 is implied by
//     is_causal, and without it (keys after the query visible, but not all) it is refused;
//   - the qk_matmul_output output and the nonpad_kv_seqlen input (opset 24) have no fuseopt
//     equivalent: refused (the ONNX Attention kernels run them);
//   - rule 5: Q, K, V, the past and a float mask share one float dtype; rule 3: head counts and
//     head sizes known (4-D: from the shapes; 3-D: q_num_heads / kv_num_heads).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pass/pass.h"
#include "passes/fusion/attention/head_paths.h"
#include "passes/fusion/attention/materialized_mask.h"
#include "passes/fusion/attention/rewrite.h"
#include "passes/fusion/attention_util.h"
#include "passes/fusion/fusion_util.h"
#include "util/error.h"

namespace fuseopt {
namespace {

constexpr int64_t kTransposeHeads[4] = {0, 2, 1, 3};

bool is_head_transpose(const Node* n) {
  if (!n || !n->is("Transpose") || !n->has_attr("perm")) return false;
  const std::vector<int64_t> p = n->attr_ints("perm");
  return p.size() == 4 && p[0] == 0 && p[1] == 2 && p[2] == 1 && p[3] == 3;
}

bool live_output(const Value* v) { return v && (v->num_uses() > 0 || v->is_graph_output); }

const Dim* dim_of(const Value* v, size_t i) {
  return v && v->shape && i < v->shape->size() ? &(*v->shape)[i] : nullptr;
}

// Head counts and sizes the rewrite needs, read off the shapes or attributes.
struct Heads {
  bool four_d = false;
  int64_t hq = 0, hkv = 0, d = 0, dv = 0;
  const Dim* q_seq = nullptr;
  const Dim* k_seq = nullptr;
};

Status read_heads(const Node* n, Heads& h) {
  const Value *q = n->input(0), *k = n->input(1), *v = n->input(2);
  const auto rq = fusion::rank_of(q), rk = fusion::rank_of(k), rv = fusion::rank_of(v);
  if (!rq || !rk || !rv || *rq != *rk || *rq != *rv || (*rq != 3 && *rq != 4))
    return Status::reject("rule 3: ", n->label(), ": Q, K, V must be all 3-D or all 4-D with known ranks");
  h.four_d = *rq == 4;
  auto known = [](const Dim* d) { return d && d->known() ? d->value : int64_t{0}; };
  if (h.four_d) {
    h.hq = known(dim_of(q, 1));
    h.hkv = known(dim_of(k, 1));
    h.d = known(dim_of(q, 3));
    h.dv = known(dim_of(v, 3));
    if (known(dim_of(v, 1)) != h.hkv || known(dim_of(k, 3)) != h.d)
      return Status::reject("rule 3: ", n->label(), ": K and V heads or head sizes are not provably consistent");
    h.q_seq = dim_of(q, 2);
    h.k_seq = dim_of(k, 2);
  } else {
    h.hq = n->attr_int("q_num_heads", 0);
    h.hkv = n->attr_int("kv_num_heads", 0);
    const int64_t qw = known(dim_of(q, 2)), kw = known(dim_of(k, 2)), vw = known(dim_of(v, 2));
    if (h.hq > 0 && h.hkv > 0 && qw % h.hq == 0 && kw % h.hkv == 0 && vw % h.hkv == 0) {
      h.d = qw / h.hq;
      h.dv = vw / h.hkv;
      if (kw / h.hkv != h.d) h.d = 0;
    }
    h.q_seq = dim_of(q, 1);
    h.k_seq = dim_of(k, 1);
  }
  if (h.hq <= 0 || h.hkv <= 0 || h.d <= 0 || h.dv <= 0 || h.hq % h.hkv != 0)
    return Status::reject("rule 3: ", n->label(), ": head counts and head sizes must be known (q heads ", h.hq,
                          ", kv heads ", h.hkv, ", head sizes ", h.d, "/", h.dv, ")");
  return Status::ok();
}

// 4-D Q/K/V traced back like the decomposed attention's operands (attn::trace_head): their
// [B, S, heads·D] sources, GQA repeat_kv undone (kv_num_heads = the cache's heads), a KV-cache
// Concat(past, new) on the keys' and values' way turned into the op's past inputs and present
// outputs, and a boolean attn_mask proven causal (+ sliding window) + key padding (attn::prove_materialized_mask:
// transformers' sdpa mask) passed as the compact mask. Where any of it does not hold, the
// simple form above is used (every input as the node reads it, the mask as attn_bias).
struct Traced {
  attn::HeadPath q, k, v;
  std::optional<attn::KeepProof> keep;
};

// What check() proved about one node, carried to rewrite() (the graph does not change in
// between): its head layout and, where it holds, the tracing above.
struct Plan {
  const Node* root = nullptr;
  Heads h;
  std::optional<Traced> traced;
};

bool heads_traced(const Node* root, const Heads& h, const Traced& t) {
  const attn::HeadPath &q = t.q, &k = t.k, &v = t.v;
  if (!q.fail.empty() || !k.fail.empty() || !v.fail.empty() || !q.src || !k.src || !v.src) return false;
  if (q.repeat != 1 || q.past || k.repeat != v.repeat || k.heads <= 0 || k.heads != v.heads) return false;
  if (q.heads != h.hq || k.heads * k.repeat != h.hkv || q.dim != h.d || k.dim != h.d || v.dim != h.dv) return false;
  if (q.scale != 1.0 || k.scale != 1.0 || v.scale != 1.0) return false;  // (kept simple: no factor on the way)
  if ((k.past == nullptr) != (v.past == nullptr)) return false;
  // The presents become the op's outputs: every reader must be on the K/V paths themselves (the
  // repeat) or the graph's output; anything else (a Shape feeding the mask) would read the op's
  // output before the op could run.
  for (const attn::HeadPath* hp : {&k, &v}) {
    if (!hp->present) continue;
    for (const Node* c : hp->present->consumers())
      if (c != root && std::find(hp->nodes.begin(), hp->nodes.end(), c) == hp->nodes.end()) return false;
  }
  return true;
}

class OnnxAttentionFusion : public FusionPass {
 public:
  std::string name() const override { return "OnnxAttention"; }
  std::string description() const override {
    return "ONNX Attention (opset 23/24, 3-D or 4-D) -> fuseopt.Attention (head transposes folded)";
  }
  int run(Rewriter& rw, PassContext& ctx) override {
    rw.infer_shapes();  // head counts and sequence dims come from the shapes (metadata only)
    return FusionPass::run(rw, ctx);
  }
  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r;
    if (!root->is("Attention")) {
      r.reason = "not an ONNX Attention";
      return r;
    }
    Match m;
    m.root = root;
    m.matched.push_back(root);
    r.match = std::move(m);
    return r;
  }
  Status check(const Graph&, const Match& m) const override {
    const Node* n = m.root;
    if (!n->input(0) || !n->input(1) || !n->input(2))
      return Status::reject("rule 7: ", n->label(), ": Q, K and V are all needed");
    if (n->input(6)) return Status::reject("rule 7: ", n->label(), ": nonpad_kv_seqlen has no fuseopt.Attention equivalent");
    const int64_t left = n->attr_int("left_window_size", -1), right = n->attr_int("right_window_size", -1);
    if (left < -1 || right < -1)
      return Status::reject("rule 7: ", n->label(), ": left/right_window_size must be -1 or >= 0");
    if (right > 0 && n->attr_int("is_causal", 0) == 0)
      return Status::reject("rule 7: ", n->label(), ": a sliding window reaching ", right,
                            " keys past the query (right_window_size) without is_causal: fuseopt's window looks back only");
    if (live_output(n->output(3)))
      return Status::reject("rule 7: ", n->label(), ": the qk_matmul_output output has no fuseopt.Attention equivalent");
    const Value *past_k = n->input(4), *past_v = n->input(5);
    if ((past_k == nullptr) != (past_v == nullptr))
      return Status::reject("rule 7: ", n->label(), ": past_key and past_value must come together");
    std::vector<const Value*> floats = {n->input(0), n->input(1), n->input(2)};
    if (past_k) floats.insert(floats.end(), {past_k, past_v});
    const Value* mask = n->input(3);
    if (mask && mask->dtype != DType::Bool) floats.push_back(mask);
    if (Status s = fusion::same_float_dtype(floats, n); !s) return s;
    plan_.reset();
    Plan pl;
    pl.root = n;
    Heads& h = pl.h;
    if (Status s = read_heads(n, h); !s) return s;
    // ONNX's causal diagonal (and a window's centre) is the new keys' upper-left one; fuseopt's the
    // bottom-right one.
    if ((left >= 0 || right >= 0) && !(h.q_seq && h.k_seq && *h.q_seq == *h.k_seq))
      return Status::reject("rule 7: ", n->label(), ": a sliding window with a query length (", h.q_seq ? h.q_seq->str() : "?",
                            ") not provably the new keys' (", h.k_seq ? h.k_seq->str() : "?",
                            "): ONNX centres it on the query's position after the past keys, fuseopt bottom-right");
    if (n->attr_int("is_causal", 0) != 0 && !(h.q_seq && h.k_seq && *h.q_seq == *h.k_seq))
      return Status::reject("rule 7: ", n->label(), ": is_causal with a query length (", h.q_seq ? h.q_seq->str() : "?",
                            ") not provably the new keys' (", h.k_seq ? h.k_seq->str() : "?",
                            "): ONNX aligns the diagonal top-left, fuseopt bottom-right");
    if (h.four_d && !past_k) {
      Traced t;
      const attn::Perm bhsd = {0, 2, 1, 3};
      t.q = attn::trace_head(n->input(0), bhsd);
      t.k = attn::trace_head(n->input(1), bhsd);
      t.v = attn::trace_head(n->input(2), bhsd);
      if (heads_traced(n, h, t)) {
        if (mask && mask->dtype == DType::Bool) {
          attn::MaskTerm term{const_cast<Value*>(mask), /*where=*/true, /*inverted=*/false,
                              -std::numeric_limits<double>::infinity()};
          t.keep = attn::prove_materialized_mask(term, t.q, t.k);
        }
        pl.traced = std::move(t);
      }
    }
    if (mask && !(pl.traced && pl.traced->keep)) {  // stays attn_bias: it must cover every key
      const auto r = fusion::rank_of(mask);
      if (!r || *r < 1 || *r > 4) return Status::reject("rule 7: ", n->label(), ": attn_mask needs a known rank 1..4");
      // The total key count: K's length, or present_key's dim 2 with a past.
      const Dim* total = past_k ? dim_of(n->output(1), 2) : h.k_seq;
      const Dim* last = dim_of(mask, static_cast<size_t>(*r - 1));
      if (!total || !last || !(*total == *last))
        return Status::reject("rule 7: ", n->label(), ": cannot prove attn_mask's last dim (", last ? last->str() : "?",
                              ") is the total key count (", total ? total->str() : "?",
                              "): ONNX pads a shorter mask with -inf");
    }
    const float softcap = n->attr_float("softcap", 0.0f);
    if (!(softcap >= 0.0f)) return Status::reject("rule 7: ", n->label(), ": softcap ", softcap, " must be >= 0");
    plan_ = std::move(pl);
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* n = m.root;
    FUSE_CHECK(plan_ && plan_->root == n, "internal: OnnxAttention plan missing for " << n->label());
    const Plan pl = std::move(*plan_);
    plan_.reset();
    const Heads& h = pl.h;
    std::vector<Node*> dead;
    // [B, H, S, D] -> [B, S, H·D]: the head transpose's input reshaped, else a transpose + reshape.
    auto to_3d = [&](Value* x) -> Value* {
      if (!h.four_d) return x;
      Node* t = x->producer;
      Value* bshd = nullptr;
      if (is_head_transpose(t) && x->num_uses() == 1 && !x->is_graph_output) {
        bshd = t->input(0);
        dead.push_back(t);
      } else {
        bshd = rw.create_node("", "Transpose", {x}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, 1,
                              "onnx_attn_bshd")->output(0);
      }
      // [B, S, H, D] made by a Reshape that only split the last axis of a [B, S, H·D] value: that
      // value is the 3-D input itself.
      Node* r = bshd->producer;
      Value* z = r && r->is("Reshape") ? r->input(0) : nullptr;
      const Dim *z0 = dim_of(z, 0), *z1 = dim_of(z, 1), *z2 = dim_of(z, 2), *b0 = dim_of(bshd, 0), *b1 = dim_of(bshd, 1),
                *b2 = dim_of(bshd, 2), *b3 = dim_of(bshd, 3);
      if (z && fusion::rank_of(z) == 3 && z0 && b0 && *z0 == *b0 && z1 && b1 && *z1 == *b1 && z2 && z2->known() && b2 &&
          b2->known() && b3 && b3->known() && z2->value == b2->value * b3->value) {
        dead.push_back(r);
        return z;
      }
      return rw.create_node("", "Reshape", {bshd, rw.add_int64s("onnx_attn_merge_heads", {0, 0, -1})}, {}, 1,
                            "onnx_attn_3d")->output(0);
    };
    const Traced* t = pl.traced ? &*pl.traced : nullptr;
    std::vector<Value*> in;
    int64_t kv_heads = h.hkv;
    bool causal = n->attr_int("is_causal", 0) != 0;
    int64_t window = 0;  // a sliding window proven in the boolean attn_mask
    Value *present_k = nullptr, *present_v = nullptr;  // traced KV cache: the Concats' outputs
    if (t) {
      auto src = [&](const attn::HeadPath& hp) { return hp.materialize ? attn::materialize(rw, hp) : hp.src; };
      Value* mask = nullptr;
      if (t->keep) {
        mask = attn::sliced_mask(rw, t->keep->padding, t->keep->slice_ends);
        causal = causal || t->keep->causal;
        window = t->keep->window;
      }
      in = {src(t->q), src(t->k), src(t->v), mask, t->keep ? nullptr : n->input(3), t->k.past, t->v.past};
      kv_heads = t->k.heads;
      present_k = t->k.present;
      present_v = t->v.present;
      for (const attn::HeadPath* hp : {&t->q, &t->k, &t->v}) dead.insert(dead.end(), hp->nodes.begin(), hp->nodes.end());
    } else {
      in = {to_3d(n->input(0)), to_3d(n->input(1)), to_3d(n->input(2)), nullptr, n->input(3), n->input(4), n->input(5)};
      present_k = n->output(1);
      present_v = n->output(2);
    }
    // Q, K, V as outputs 0, 1, 2 of one Split of the last axis (the QKV packing made it, or the
    // export has it): the op reads the packed projection, no Split launch.
    Node* sp = in[0]->producer;
    if (sp && sp->is("Split") && sp->outputs.size() == 3 && in[0] == sp->output(0) && in[1] == sp->output(1) &&
        in[2] == sp->output(2) && h.d == h.dv) {
      const auto r = fusion::rank_of(sp->input(0));
      const int64_t ax = sp->attr_int("axis", 0);
      std::vector<int64_t> sizes;
      if (sp->has_attr("split")) sizes = sp->attr_ints("split");
      else if (sp->input(1)) sizes = attn::const_ints(sp->input(1)).value_or(std::vector<int64_t>{});
      // Sizes given, or three equal parts (num_outputs = 3 from opset 18, or no sizes): MHA only.
      const Dim* width = r ? dim_of(sp->input(0), static_cast<size_t>(*r - 1)) : nullptr;
      const bool sizes_ok = sizes == std::vector<int64_t>{h.hq * h.d, kv_heads * h.d, kv_heads * h.d} ||
                            (sizes.empty() && !sp->input(1) && h.hq == kv_heads && width && width->known() &&
                             width->value == 3 * h.hq * h.d);
      if (r && *r == 3 && (ax == -1 || ax == 2) && sizes_ok) {
        in[0] = sp->input(0);
        in[1] = in[2] = nullptr;
        dead.push_back(sp);
      }
    }
    while (!in.empty() && !in.back()) in.pop_back();
    // Opset 25's window (check() proved the alignment): L looks back L keys (window L + 1, the
    // narrower of it and a window the mask proved), R = 0 is causal.
    if (const int64_t left = n->attr_int("left_window_size", -1); left >= 0)
      window = window > 0 ? std::min(window, left + 1) : left + 1;
    if (n->attr_int("right_window_size", -1) == 0) causal = true;
    std::vector<Attribute> attrs = {Attribute::make_int("num_heads", h.hq), Attribute::make_int("kv_num_heads", kv_heads),
                                    Attribute::make_int("causal", causal ? 1 : 0),
                                    Attribute::make_int("masked_rows_zero", 1),
                                    // ONNX masks with -inf (bool false, or a float -inf); written out for
                                    // the function body, which reads it.
                                    Attribute::make_float("mask_filter_value", -std::numeric_limits<float>::infinity())};
    // Always written: the op's function body (what other runtimes run) reads the attribute.
    attrs.push_back(Attribute::make_float(
        "scale", n->has_attr("scale") ? n->attr_float("scale", 1.0f) : 1.0f / std::sqrt(static_cast<float>(h.d))));
    if (n->attr_float("softcap", 0.0f) > 0.0f)
      attrs.push_back(Attribute::make_float("softcap", n->attr_float("softcap", 0.0f)));
    if (window > 0) attrs.push_back(Attribute::make_int("window", window));
    const bool cache = in.size() > 5 && in[5] != nullptr;
    Node* f = rw.create_node("fuseopt", "Attention", in, attrs, cache ? 3 : 1, n->name);
    if (cache) {
      if (present_k) rw.set_type(f->output(1), present_k->dtype, present_k->shape);
      if (present_v) rw.set_type(f->output(2), present_v->dtype, present_v->shape);
    }
    Value* y = f->output(0);
    {  // Y is [B, S_q, H·Dv] whatever the ONNX node's layout (set before replace_match copies any)
      const Dim* b = dim_of(n->input(0), 0);
      rw.set_type(y, n->input(0)->dtype,
                  Shape{b ? *b : Dim::unknown(), h.q_seq ? *h.q_seq : Dim::unknown(), Dim::of(h.hq * h.dv)});
    }
    std::vector<std::pair<Value*, Value*>> outs;
    if (h.four_d) {
      Value* y4 = n->output(0);
      Value* bshd = rw.create_node("", "Reshape", {y, rw.add_int64s("onnx_attn_split_heads", {0, 0, h.hq, h.dv})}, {}, 1,
                                   "onnx_attn_bshd_out")->output(0);
      std::vector<Node*> readers = y4->consumers();
      if (readers.size() == 1 && y4->num_uses() == 1 && !y4->is_graph_output && is_head_transpose(readers[0])) {
        // Y's only reader undoes the head layout: its output is the [B, S, H, Dv] view (Y is
        // then unread and needs no replacement).
        Value* t_out = readers[0]->output(0);
        rw.set_type(bshd, t_out->dtype, t_out->shape);
        rw.replace_all_uses(t_out, bshd);
        rw.erase_node(readers[0]);
      } else {
        outs.push_back({y4, rw.create_node("", "Transpose", {bshd}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, 1,
                                           "onnx_attn_bhsd_out")->output(0)});
      }
    } else {
      outs.push_back({n->output(0), y});
    }
    if (cache && !t) {
      if (present_k) outs.push_back({present_k, f->output(1)});
      if (present_v) outs.push_back({present_v, f->output(2)});
    }
    rw.replace_match(m, f, name(), outs);
    if (cache && t) {  // the cache Concats' outputs (the model's presents) are the op's
      rw.replace_all_uses(present_k, f->output(1));
      rw.replace_all_uses(present_v, f->output(2));
    }
    rw.erase_dead(dead);
  }

 private:
  // The plan of the last node check() accepted (rewrite() takes it; the graph does not change
  // in between): the heads are read and the operands traced once per node.
  mutable std::optional<Plan> plan_;
};

}  // namespace

// Before Attention (500) and the passes that read fuseopt.Attention (PackedRotary 510, and the
// QKV packing, which looks for three projections feeding one attention): an ONNX Attention
// becomes the fused op early, like the decomposed forms do at 500.
FUSEOPT_REGISTER_PASS(OnnxAttentionFusion, PassCategory::Fusion, 490);

}  // namespace fuseopt
