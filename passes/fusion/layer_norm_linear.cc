// LayerNorm -> Linear (pre-LN blocks: GPT-2, ViT, Llama, Whisper)
//   Y = norm(X (+ skip)) ; every reader of Y is a GEMM  G_i = act(Y · W_i + b_i)
// => G_i = fuseopt.LayerNormLinear(X, gamma, beta?, W_i, b_i?, skip?) -> G_i, Sum?
//
// The norm is LayerNormalization, fuseopt.LayerNorm, fuseopt.RMSNorm or
// fuseopt.SkipLayerNorm (then the residual Sum is the first fused node's second
// output). Runs after QKV packing, so an attention block's LN usually feeds
// one packed GEMM. With several GEMM readers (unpacked projections) each gets
// its own fused node and the (cheap, O(M·K)) normalisation is recomputed: the
// normalised tensor is never written to memory. A Reshape that only flattens
// the leading dims ([-1, K], GPT-2's Conv1D view) may sit between the norm and
// a GEMM: the fused op then runs on the unflattened rows and a Reshape
// [-1, N] of its output takes the GEMM output's place.
//
// Legality: rule 1 (the normalised value has no other reader, is no graph
// output; LayerNormalization's Mean/InvStdDev unused), rule 2 (gamma/beta/W/
// bias constants, W 2-D with K rows), rule 5 (one float dtype), rule 6 (last
// axis, scalar epsilon), SkipLayerNorm with a bias input is not expressible.
#include "pass/pass.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt {
namespace {

using attn::const_of;

struct NormInfo {
  Value* x = nullptr;
  Value* skip = nullptr;
  Value* gamma = nullptr;
  Value* beta = nullptr;
  Value* sum = nullptr;  // SkipLayerNorm's Sum output when someone reads it
  float eps = 1e-5f;
  bool rms = false;
};

bool is_norm(const Node* n) {
  if (n->is("LayerNormalization")) return true;
  return n->domain == "fuseopt" && (n->op_type == "LayerNorm" || n->op_type == "RMSNorm" || n->op_type == "SkipLayerNorm");
}

// SkipLayerNorm's bias (Sum = X + bias + skip) has no LayerNormLinear slot;
// it folds exactly into the GEMM producing X when X is that GEMM's only use
// (directly, or through a Reshape that keeps the last axis). Returns the GEMM.
Node* bias_fold_target(Value* x) {
  Node* p = x ? x->producer : nullptr;
  if (!p || x->uses.size() != 1 || x->is_graph_output) return nullptr;
  if (p->is("Reshape")) {
    Value* in = p->input(0);
    auto t = attn::const_ints(p->input(1));
    auto n = attn::last_dim(in);
    if (!t || t->empty() || !n || t->back() != *n || in->uses.size() != 1 || in->is_graph_output) return nullptr;
    p = in->producer;
  }
  if (!p) return nullptr;
  const Tensor* w = const_of(p->input(1));
  if (!w || w->dims.size() != 2) return nullptr;
  if (p->is("MatMul")) return p;
  if (p->domain == "fuseopt" && p->op_type == "FusedMatMul" && !p->input(2) && !p->input(3) &&
      p->attr_string("activation", "none") == "none" && p->attr_float("alpha", 1.0f) == 1.0f)
    return p;
  return nullptr;
}

std::string norm_info(const Node* n, NormInfo& ni) {
  if (n->op_type == "SkipLayerNorm") {
    ni.x = n->input(0);
    ni.skip = n->input(1);
    ni.gamma = n->input(2);
    ni.beta = n->input(3);
    if (n->input(4) && !bias_fold_target(n->input(0)))
      return "rule 2: " + n->label() + " adds a bias to the residual and its input is not a GEMM that could absorb it";
    ni.rms = n->attr_int("rms", 0) != 0;
    Value* s = n->output(1);
    if (s && (!s->uses.empty() || s->is_graph_output)) ni.sum = s;
  } else {
    ni.x = n->input(0);
    ni.gamma = n->input(1);
    ni.beta = n->op_type == "RMSNorm" ? nullptr : n->input(2);
    ni.rms = n->op_type == "RMSNorm";
  }
  ni.eps = n->attr_float("epsilon", 1e-5f);
  if (n->is("LayerNormalization")) {
    int64_t axis = n->attr_int("axis", -1);
    auto r = attn::rank_of(ni.x);
    if (axis != -1 && !(r && axis == *r - 1)) return "rule 6: " + n->label() + " normalises axis " + std::to_string(axis);
    for (size_t i = 1; i < n->outputs.size(); ++i)
      if (Value* o = n->output(i); o && (!o->uses.empty() || o->is_graph_output))
        return "rule 1: " + n->label() + " output '" + o->name + "' (mean/inv std) is read";
  }
  for (Value* p : {ni.gamma, ni.beta}) {
    if (!p) continue;
    const Tensor* t = const_of(p);
    if (!t) return "rule 2: '" + p->name + "' of " + n->label() + " is not a constant";
    for (size_t i = 0; i + 1 < t->dims.size(); ++i)
      if (t->dims[i] != 1) return "rule 2: '" + p->name + "' of " + n->label() + " is not a [K] vector";
  }
  return "";
}

// One reader of the normalised value: the GEMM and an optional flattening Reshape.
struct Reader {
  Node* reshape = nullptr;
  Node* gemm = nullptr;
};

std::string gemm_ok(const Node* g, const Value* in, int64_t K, DType dt) {
  if (!attn::is_gemm(g) || g->input(0) != in || g->input(1) == in) return g->label() + " is not a GEMM reading it as A";
  const Tensor* w = const_of(g->input(1));
  if (!w || w->dims.size() != 2) return "rule 2: weight of " + g->label() + " is not a constant 2-D matrix";
  bool tb = g->attr_int("transB", 0) != 0;
  if (K > 0 && (tb ? w->dims[1] : w->dims[0]) != K) return "rule 2: weight of " + g->label() + " does not have K rows";
  if (g->attr_float("alpha", 1.0f) != 1.0f) return "rule 2: " + g->label() + " has alpha != 1";
  if (Value* b = g->input(2)) {
    const Tensor* bt = const_of(b);
    int64_t N = tb ? w->dims[0] : w->dims[1];
    if (!bt || bt->numel() != N) return "rule 2: bias of " + g->label() + " is not a constant [N]";
  }
  if (dt != DType::Undefined && w->dtype != dt) return "rule 5: weight of " + g->label() + " has another dtype";
  return "";
}

// Readers of y, or why they are not all GEMMs.
std::string readers_of(const Node* norm, const NormInfo& ni, std::vector<Reader>& rs) {
  Value* y = norm->output(0);
  if (y->is_graph_output) return "rule 1: '" + y->name + "' is a graph output";
  if (y->uses.empty()) return "normalised value unused";
  const Tensor* g = const_of(ni.gamma);
  const int64_t K = g ? g->dims.back() : -1;
  const DType dt = attn::dtype_of(ni.x);
  for (Node* c : y->consumers()) {
    if (c->is("Shape")) continue;  // reads only the shape, which X has too (rewired in rewrite)
    Reader r;
    if (c->is("Reshape")) {
      auto t = attn::const_ints(c->input(1));
      if (!t || t->size() != 2 || (*t)[0] != -1 || (*t)[1] != K || K <= 0)
        return "rule 1: '" + y->name + "' is also read by " + c->label() + " (not a [-1, K] flattening)";
      if (c->output(0)->is_graph_output) return "rule 1: " + c->label() + " output is a graph output";
      r.reshape = c;
      for (Node* g2 : c->output(0)->consumers()) {
        if (std::string w = gemm_ok(g2, c->output(0), K, dt); !w.empty())
          return w.rfind("rule", 0) == 0 ? w : "rule 1: '" + y->name + "' reaches " + g2->label() + ", not a GEMM";
        Reader rr = r;
        rr.gemm = g2;
        rs.push_back(rr);
      }
      continue;
    }
    if (std::string w = gemm_ok(c, y, K, dt); !w.empty())
      return w.rfind("rule", 0) == 0 ? w : "rule 1: '" + y->name + "' is also read by " + c->label() + ", not a GEMM";
    r.gemm = c;
    rs.push_back(r);
  }
  if (rs.size() > 8) return "more than 8 GEMM readers";
  return "";
}

class LayerNormLinearFusion : public FusionPass {
 public:
  std::string name() const override { return "LayerNormLinear"; }
  std::string description() const override {
    return "LayerNorm/RMSNorm/SkipLayerNorm whose output feeds only GEMMs -> fuseopt.LayerNormLinear";
  }
  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r;
    if (!is_norm(root)) {
      r.reason = "not a norm";
      return r;
    }
    // Structural candidate: at least one GEMM reads the normalised value.
    bool any = false;
    for (Node* c : root->output(0)->consumers()) {
      if (attn::is_gemm(c)) any = true;
      if (c->is("Reshape"))
        for (Node* c2 : c->output(0)->consumers()) any |= attn::is_gemm(c2);
    }
    if (!any) {
      r.reason = "no GEMM reads the normalised value";
      return r;
    }
    Match m;
    m.root = root;
    m.matched.push_back(root);
    r.match = std::move(m);
    return r;
  }
  Status check(const Graph& g, const Match& m) const override {
    NormInfo ni;
    if (std::string w = norm_info(m.root, ni); !w.empty()) return Status::reject(w);
    std::vector<Reader> rs;
    if (std::string w = readers_of(m.root, ni, rs); !w.empty()) return Status::reject(w);
    if (ni.sum && rs.size() > 0) {
      // The Sum goes out of the first fused node; shapes stay those of X.
    }
    for (Value* v : {ni.x, ni.gamma, ni.beta, ni.skip})
      if (v && attn::dtype_of(v) != DType::Undefined && !dtype_is_float(attn::dtype_of(v)))
        return Status::reject("rule 5: '", v->name, "' is not a float tensor");
    if (attn::dtype_of(ni.gamma) != attn::dtype_of(ni.x) && attn::dtype_of(ni.x) != DType::Undefined)
      return Status::reject("rule 5: gamma and X of ", m.root->label(), " have different dtypes");
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    NormInfo ni;
    norm_info(m.root, ni);
    std::vector<Reader> rs;
    readers_of(m.root, ni, rs);
    auto vec = [&](Value* p) -> Value* {
      if (!p) return nullptr;
      const Tensor* t = const_of(p);
      if (t->dims.size() == 1 && p->const_data) return p;
      Tensor c = *t;
      c.dims = {t->numel()};
      return rw.add_constant(p->name + "_vec", c);
    };
    Value* gamma = vec(ni.gamma);
    Value* beta = vec(ni.beta);
    std::vector<Node*> replaced = {m.root};
    if (Value* rb = m.root->op_type == "SkipLayerNorm" ? m.root->input(4) : nullptr) {
      // Fold the residual bias into the GEMM that produces X (exact: same additions, same order).
      Node* g = bias_fold_target(ni.x);
      rw.set_insertion_point(g);
      Value* b = vec(rb);
      Node* ng = rw.create_node("fuseopt", "FusedMatMul", {g->input(0), g->input(1), b},
                                {Attribute::make_int("transB", g->attr_int("transB", 0)),
                                 Attribute::make_float("alpha", 1.0f), Attribute::make_string("activation", "none")},
                                1, g->name);
      rw.set_type(ng->output(0), g->output(0)->dtype, g->output(0)->shape);
      if (ni.x == g->output(0)) ni.x = ng->output(0);
      rw.replace_all_uses(g->output(0), ng->output(0));
      rw.mark_fused(ng, "FusedMatMul", {g});
      rw.erase_node(g);
      rw.set_insertion_point(nullptr);
    }
    bool sum_done = false;
    for (const Reader& r : rs) {
      Node* gm = r.gemm;
      std::vector<Value*> in = {ni.x, gamma, beta, gm->input(1), gm->input(2), ni.skip};
      while (!in.empty() && !in.back()) in.pop_back();
      std::vector<Attribute> attrs = {Attribute::make_float("epsilon", ni.eps),
                                      Attribute::make_int("rms", ni.rms ? 1 : 0),
                                      Attribute::make_int("transB", gm->attr_int("transB", 0)),
                                      Attribute::make_string("activation", gm->attr_string("activation", "none"))};
      const bool with_sum = ni.sum && !sum_done;
      rw.set_insertion_point(gm);
      Node* f = rw.create_node("fuseopt", "LayerNormLinear", in, attrs, with_sum ? 2 : 1, gm->name);
      Value* out = f->output(0);
      if (r.reshape) {
        const Tensor* w = const_of(gm->input(1));
        int64_t N = gm->attr_int("transB", 0) ? w->dims[0] : w->dims[1];
        out = rw.create_node("", "Reshape", {out, rw.add_int64s("lnl_flatten", {-1, N})}, {}, 1, gm->name + "_flat")
                  ->output(0);
        replaced.push_back(r.reshape);
      }
      rw.set_type(out, gm->output(0)->dtype, gm->output(0)->shape);
      rw.replace_all_uses(gm->output(0), out);
      if (with_sum) {
        rw.set_type(f->output(1), ni.sum->dtype, ni.sum->shape);
        rw.replace_all_uses(ni.sum, f->output(1));
        sum_done = true;
      }
      replaced.push_back(gm);
      rw.mark_fused(f, name(), {m.root, gm});
    }
    rw.set_insertion_point(nullptr);
    // Shape readers of the normalised value read X (same shape) instead.
    Value* y = m.root->output(0);
    for (Node* c : y->consumers())
      for (size_t i = 0; i < c->inputs.size(); ++i)
        if (c->inputs[i] == y) rw.set_input(c, i, ni.x);
    rw.erase_dead(replaced);
  }
};

}  // namespace

// After the norms (100-200) and the GEMM fusions (250-400): it fuses a norm node into
// the FusedMatMul nodes reading it, an attention block's norm usually one packed GEMM.
FUSEOPT_REGISTER_PASS(LayerNormLinearFusion, PassCategory::Fusion, 600);

}  // namespace fuseopt
