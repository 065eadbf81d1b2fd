// Packed rotary: the Split of a packed QKV projection feeding two rotary
// embeddings and one attention goes away.
//   q, k, v = Split(P, last axis)           P [B, S, (H + 2·Hkv)·D]
//   Attention(RotaryEmbedding(q; H heads), RotaryEmbedding(k; Hkv heads), v, ...)
// => Attention(RotaryEmbedding(P; H + 2·Hkv heads, rotated_heads = H + Hkv), -, -, ...)
// The packed [Q | K | V] layout is head-major with one head size, so rotating its
// first H + Hkv heads with the same cos/sin rows is exactly the two rotary nodes,
// and the attention reads packed QKV directly (docs/fused_ops.md). Three launches
// (Split, two rotaries) become one, per layer, in prefill and in every decode step
// of every rotary decoder whose Q/K/V projections QkvPack joined.
// Runs after Attention (500): it rewires fused attention nodes only.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

bool is_fuseopt(const Node* n, const char* op) { return n && n->domain == "fuseopt" && n->op_type == op; }

// The last dim of v when it is known, else -1.
int64_t last_dim(const Value* v) {
  if (!v || !v->shape || v->shape->empty() || !v->shape->back().known()) return -1;
  return v->shape->back().value;
}

// The nodes match() binds (by hand: the nodes are already fused ops).
namespace cap {
const NodeCapture attention{"attention"}, rot_q{"rot_q"}, rot_k{"rot_k"}, split{"split"};
}  // namespace cap

class PackedRotaryFusion : public FusionPass {
 public:
  std::string name() const override { return "PackedRotary"; }
  std::string description() const override {
    return "Split(packed QKV) -> RotaryEmbedding(q), RotaryEmbedding(k) -> Attention  =>  one RotaryEmbedding "
           "(rotated_heads) on the packed tensor, Attention on packed QKV";
  }
  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r;
    if (!is_fuseopt(root, "Attention") || !root->input(1) || !root->input(2)) {
      r.reason = "not a fuseopt.Attention with separate Q, K, V";
      return r;
    }
    Node* rq = root->input(0) ? root->input(0)->producer : nullptr;
    Node* rk = root->input(1)->producer;
    Node* sp = root->input(2)->producer;
    if (!is_fuseopt(rq, "RotaryEmbedding") || !is_fuseopt(rk, "RotaryEmbedding") || !sp || !sp->is("Split") ||
        sp->outputs.size() != 3 || !rq->input(0) || !rk->input(0) || rq->input(0)->producer != sp ||
        rk->input(0)->producer != sp || rq->input(0) != sp->output(0) || rk->input(0) != sp->output(1) ||
        root->input(2) != sp->output(2)) {
      r.reason = "Q and K are not rotary embeddings of outputs 0 and 1 of the Split whose output 2 is V";
      return r;
    }
    Match m;
    m.root = root;
    m.matched = {root, rq, rk, sp};
    m.nodes = {{cap::attention.name, root}, {cap::rot_q.name, rq}, {cap::rot_k.name, rk}, {cap::split.name, sp}};
    r.match = std::move(m);
    return r;
  }
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    return {m.root->outputs.begin(), m.root->outputs.end()};  // the attention node stays
  }
  Status check(const Graph&, const Match& m) const override {
    const Node *att = m.node(cap::attention), *rq = m.node(cap::rot_q), *rk = m.node(cap::rot_k),
               *sp = m.node(cap::split);
    const Value* p = sp->input(0);
    if (!p || !p->shape || p->shape->size() != 3)
      return Status::reject("the Split input of ", sp->label(), " is not known to be 3-D [B, S, W]");
    const int64_t axis = sp->attr_int("axis", 0);
    if (axis != -1 && axis != 2) return Status::reject(sp->label(), " does not split the last axis");
    for (const Node* r : {rq, rk}) {
      if (r->input(3)) return Status::reject(r->label(), " has position_ids (the fusion never writes them)");
      if (r->attr_int("rotated_heads", 0) != 0) return Status::reject(r->label(), " already rotates part of its heads");
    }
    if (rq->input(1) != rk->input(1) || rq->input(2) != rk->input(2))
      return Status::reject(rq->label(), " and ", rk->label(), " read different cos/sin caches");
    if (rq->attr_int("interleaved", 0) != rk->attr_int("interleaved", 0) ||
        rq->attr_int("rotary_embedding_dim", 0) != rk->attr_int("rotary_embedding_dim", 0))
      return Status::reject(rq->label(), " and ", rk->label(), " differ in interleaved / rotary_embedding_dim");
    const int64_t h = rq->attr_int("num_heads", 0), hkv = rk->attr_int("num_heads", 0);
    const int64_t wq = last_dim(sp->output(0)), wk = last_dim(sp->output(1)), wv = last_dim(sp->output(2));
    if (h <= 0 || hkv <= 0 || wq <= 0 || wk <= 0 || wv <= 0 || wq % h != 0)
      return Status::reject("head counts or widths of ", sp->label(), "'s outputs are unknown");
    const int64_t d = wq / h;
    if (wk != hkv * d || wv != hkv * d)
      return Status::reject("the packed layout needs one head size: q ", wq, " = ", h, "x", d, ", k ", wk, ", v ", wv,
                            " (", sp->label(), ")");
    if (last_dim(p) != wq + wk + wv) return Status::reject(sp->label(), "'s outputs do not cover its input");
    if (att->attr_int("num_heads", 0) != h || att->attr_int("kv_num_heads", h) != hkv)
      return Status::reject(att->label(), "'s num_heads / kv_num_heads differ from the rotaries' (", h, ", ", hkv, ")");
    return fusion::same_float_dtype({p, sp->output(0), rq->output(0), rk->output(0)}, rq);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    Node *att = m.node(cap::attention), *rq = m.node(cap::rot_q), *rk = m.node(cap::rot_k),
               *sp = m.node(cap::split);
    const int64_t h = rq->attr_int("num_heads", 0), hkv = rk->attr_int("num_heads", 0);
    std::vector<Attribute> attrs = {Attribute::make_int("num_heads", h + 2 * hkv),
                                    Attribute::make_int("rotated_heads", h + hkv)};
    if (rq->attr_int("interleaved", 0)) attrs.push_back(Attribute::make_int("interleaved", 1));
    if (int64_t r = rq->attr_int("rotary_embedding_dim", 0)) attrs.push_back(Attribute::make_int("rotary_embedding_dim", r));
    Value* packed = sp->input(0);
    Node* rot = rw.create_node("fuseopt", "RotaryEmbedding", {packed, rq->input(1), rq->input(2)}, std::move(attrs), 1,
                               rq->name + "_packed");
    rw.set_type(rot->output(0), packed->dtype, packed->shape);
    rw.set_input(att, 0, rot->output(0));
    rw.set_input(att, 1, nullptr);
    rw.set_input(att, 2, nullptr);
    rw.mark_fused(rot, name(), {sp, rq, rk});
    rw.erase_dead({rq, rk, sp});
  }
};

}  // namespace
// After Attention (500) and RotaryEmbedding (450): it rewires their nodes only.
FUSEOPT_REGISTER_PASS(PackedRotaryFusion, PassCategory::Fusion, 510);
}  // namespace fuseopt
