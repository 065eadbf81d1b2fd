// QKV packing: GEMMs that read the same input with constant weights
// (Q, K and V projections; Llama's gate and up)
//   Y_i = X · W_i (+ b_i)          i = 1..n, n >= 2
// => Y = X · [W_1 | ... | W_n] (+ [b_1 | ... | b_n]);  Y_1..Y_n = Split(Y, last axis)
// One GEMM instead of n reads X once and gives the attention fusion the packed
// QKV it wants. GPT-2's exported Conv1D (one Gemm + Split) already is this form.
//
// A GEMM here is MatMul(X, W) or fuseopt.FusedMatMul(X, W, bias?) with W a
// constant 2-D matrix. Members of a group share: X as input 0, the op's
// transB / alpha / activation, and the weight dtype (rule 5). Weights must be
// constant 2-D with the same K (rule 2), biases constant [N] (rules 2, 3).
#include <map>
#include <set>

#include "pass/pass.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt {
namespace {

using attn::const_of;

struct GemmInfo {
  bool transB = false;
  float alpha = 1.0f;
  std::string act = "none";
  DType dtype = DType::Undefined;
  int64_t K = -1, N = -1;
  Value* bias = nullptr;
};

// Why n cannot join a group ("" when it can), filling info.
std::string gemm_info(const Node* n, GemmInfo& gi) {
  const Tensor* w = const_of(n->input(1));
  if (!w) return "rule 2: weight '" + (n->input(1) ? n->input(1)->name : std::string("?")) + "' of " + n->label() + " is not a constant";
  if (w->dims.size() != 2) return "rule 2: weight of " + n->label() + " is not 2-D";
  gi.transB = n->attr_int("transB", 0) != 0;
  gi.alpha = n->attr_float("alpha", 1.0f);
  gi.act = n->attr_string("activation", "none");
  gi.dtype = w->dtype;
  gi.K = gi.transB ? w->dims[1] : w->dims[0];
  gi.N = gi.transB ? w->dims[0] : w->dims[1];
  gi.bias = n->input(2);
  if (gi.bias) {
    const Tensor* b = const_of(gi.bias);
    if (!b) return "rule 2: bias of " + n->label() + " is not a constant";
    if (b->numel() != gi.N || b->dtype != gi.dtype) return "rule 3: bias of " + n->label() + " is not [N] of the weight's dtype";
  }
  return "";
}

bool same_kind(const GemmInfo& a, const GemmInfo& b) {
  return a.transB == b.transB && a.alpha == b.alpha && a.act == b.act && a.dtype == b.dtype && a.K == b.K;
}

// The GEMM consumers of `x` (as input 0) that can be packed with `root`, in graph order.
std::vector<Node*> group_of(const Graph& g, Node* root, std::string* why) {
  GemmInfo ri;
  if (std::string w = gemm_info(root, ri); !w.empty()) {
    *why = w;
    return {};
  }
  Value* x = root->input(0);
  std::set<Node*> members;
  for (const Use& u : x->uses) {
    Node* c = u.node;
    if (u.index != 0 || !attn::is_gemm(c) || c->input(0) != x || c->input(1) == x) continue;
    GemmInfo ci;
    if (!gemm_info(c, ci).empty() || !same_kind(ri, ci)) continue;
    members.insert(c);
  }
  if (members.size() < 2) return {};
  std::vector<Node*> ordered;
  for (const auto& n : g.nodes())
    if (members.count(n.get())) ordered.push_back(n.get());
  return ordered;
}

// Concatenates 2-D tensors along `axis` (0 or 1), or 1-D vectors.
Tensor concat(const std::vector<const Tensor*>& ts, int axis) {
  const size_t es = dtype_size(ts[0]->dtype);
  if (ts[0]->dims.size() == 1 || axis == 0) {
    std::vector<int64_t> dims = ts[0]->dims;
    dims[0] = 0;
    for (auto* t : ts) dims[0] += t->dims[0];
    Tensor r(ts[0]->dtype, dims);
    size_t off = 0;
    for (auto* t : ts) {
      std::copy(t->bytes.begin(), t->bytes.end(), r.bytes.begin() + off);
      off += t->bytes.size();
    }
    return r;
  }
  const int64_t rows = ts[0]->dims[0];
  int64_t cols = 0;
  for (auto* t : ts) cols += t->dims[1];
  Tensor r(ts[0]->dtype, {rows, cols});
  for (int64_t i = 0; i < rows; ++i) {
    size_t off = static_cast<size_t>(i * cols) * es;
    for (auto* t : ts) {
      const size_t n = static_cast<size_t>(t->dims[1]) * es;
      std::copy(t->bytes.begin() + i * n, t->bytes.begin() + (i + 1) * n, r.bytes.begin() + off);
      off += n;
    }
  }
  return r;
}

class QkvPackFusion : public FusionPass {
 public:
  std::string name() const override { return "QkvPack"; }
  std::string description() const override {
    return "GEMMs sharing one input with constant weights (Q/K/V, gate/up) -> one GEMM on the concatenated weight + Split";
  }
  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r;
    if (!attn::is_gemm(root) || !root->input(0) || const_of(root->input(0))) {
      r.reason = "not a GEMM with a variable input";
      return r;
    }
    // Only roots that share their input with another GEMM are candidates.
    int gemms = 0;
    for (const Use& u : root->input(0)->uses) gemms += attn::is_gemm(u.node) && u.index == 0;
    if (gemms < 2) {
      r.reason = "input read by one GEMM";
      return r;
    }
    Match m;
    m.root = root;
    m.matched.push_back(root);
    std::string why;
    for (Node* n : group_of(g, root, &why))
      if (n != root) m.matched.push_back(n);
    r.match = std::move(m);  // check() says why when no group forms
    return r;
  }
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    std::vector<const Value*> k;
    for (Node* n : m.matched) k.push_back(n->output(0));  // every member's output is still produced (by the Split)
    return k;
  }
  Status check(const Graph& g, const Match& m) const override {
    std::string why;
    auto grp = group_of(g, m.root, &why);
    if (!why.empty()) return Status::reject(why);
    if (grp.size() < 2) {
      // Say why the other GEMMs reading the same input do not join.
      GemmInfo ri;
      gemm_info(m.root, ri);
      for (const Use& u : m.root->input(0)->uses) {
        Node* c = u.node;
        if (c == m.root || u.index != 0 || !attn::is_gemm(c)) continue;
        GemmInfo ci;
        if (std::string w = gemm_info(c, ci); !w.empty()) return Status::reject(w);
        if (ci.dtype != ri.dtype)
          return Status::reject("rule 5: weights of ", m.root->label(), " and ", c->label(), " have different dtypes");
        if (ci.K != ri.K) return Status::reject("rule 2: weights of ", m.root->label(), " and ", c->label(), " differ in K");
      }
      return Status::reject("the GEMMs reading '", m.root->input(0)->name,
                            "' differ in transB/alpha/activation; nothing to pack");
    }
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    std::string why;
    auto grp = group_of(rw.graph(), m.root, &why);
    std::vector<GemmInfo> info(grp.size());
    bool any_bias = false, any_fused = false;
    for (size_t i = 0; i < grp.size(); ++i) {
      gemm_info(grp[i], info[i]);
      any_bias |= info[i].bias != nullptr;
      any_fused |= grp[i]->domain == "fuseopt";
    }
    const GemmInfo& r0 = info[0];
    std::vector<const Tensor*> ws;
    for (Node* n : grp) ws.push_back(const_of(n->input(1)));
    Value* w = rw.add_constant(grp[0]->input(1)->name + "_packed", concat(ws, r0.transB ? 0 : 1));
    Value* b = nullptr;
    std::vector<Tensor> zeros;
    zeros.reserve(grp.size());
    if (any_bias) {
      std::vector<const Tensor*> bs;
      for (size_t i = 0; i < grp.size(); ++i) {
        if (info[i].bias) {
          Tensor t = *const_of(info[i].bias);
          t.dims = {info[i].N};
          zeros.push_back(std::move(t));
        } else {
          zeros.emplace_back(r0.dtype, std::vector<int64_t>{info[i].N});  // zero bytes = 0.0 for every float type
        }
        bs.push_back(&zeros.back());
      }
      b = rw.add_constant(grp[0]->name + "_packed_bias", concat(bs, 0));
    }
    Node* f;
    if (any_fused || any_bias) {
      f = rw.create_node("fuseopt", "FusedMatMul", {grp[0]->input(0), w, b},
                         {Attribute::make_int("transB", r0.transB ? 1 : 0), Attribute::make_float("alpha", r0.alpha),
                          Attribute::make_string("activation", r0.act)},
                         1, grp[0]->name + "_packed");
    } else {
      f = rw.create_node("", "MatMul", {grp[0]->input(0), w}, {}, 1, grp[0]->name + "_packed");
    }
    std::vector<int64_t> sizes;
    for (auto& i : info) sizes.push_back(i.N);
    Node* sp;
    if (rw.opset("") >= 13) {
      sp = rw.create_node("", "Split", {f->output(0), rw.add_int64s("qkv_split_sizes", sizes)},
                          {Attribute::make_int("axis", -1)}, static_cast<int>(grp.size()), grp[0]->name + "_split");
    } else {
      sp = rw.create_node("", "Split", {f->output(0)},
                          {Attribute::make_int("axis", -1), Attribute::make_ints("split", sizes)},
                          static_cast<int>(grp.size()), grp[0]->name + "_split");
    }
    for (size_t i = 0; i < grp.size(); ++i) {
      Value* old = grp[i]->output(0);
      std::optional<Shape> sh = old->shape;
      rw.set_type(sp->output(i), old->dtype, sh);
      rw.replace_all_uses(old, sp->output(i));
    }
    std::vector<Node*> replaced(grp.begin(), grp.end());
    rw.mark_fused(f, name(), replaced);
    rw.erase_dead(replaced);
  }
};

}  // namespace

// After FusedMatMul (300): it packs the fused GEMMs that read one input; before
// RotaryEmbedding (450), Attention (500) and LayerNormLinear (600), which then see
// one packed projection.
FUSEOPT_REGISTER_PASS(QkvPackFusion, PassCategory::Fusion, 400);

}  // namespace fuseopt
