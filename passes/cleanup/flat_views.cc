// Two view canonicalizations for attention written on flat [B·H, S, D] tensors (the bmm
// spelling of transformers-4 SAM and of ViTDet, ViTMatte's backbone):
//
// select_before_view: Reshape(x [k, ...], [k, t1, ..]) read only by selections of one index of
//   axis 0 (Gather(axis 0, scalar), or Slice of one element of axis 0 then Squeeze(0)) becomes
//   the selection of x, then Reshape(.., [t1, ..]); also a Split of axis 0 into k ones, each
//   piece squeezed (TorchScript's unbind). A row-major view that keeps axis 0 maps
//   block i of x to block i of the view, so each selection is the same elements (qkv.reshape(3,
//   B·H, S, D).unbind(0) becomes unbind of the [3, B, H, S, D] permute, then a [B·H, S, D] view
//   of each: the view the attention fusion traces back to its heads).
//
// spatial_scores_view: Reshape(Add(..Add(Reshape(s [X, S1, S2], [X, h1, w1, h2, w2]), a_1)..,
//   a_n), [X, S1, S2]) with S1 = h1·w1, S2 = h2·w2 (the decomposed relative positions of
//   SAM / ViTDet: rel_h [X, h1, w1, h2, 1] and rel_w [X, h1, w1, 1, w2] added on the 2-D view of
//   the scores) becomes Add(..Add(s, T_1).., T_n), T_i = Reshape(Expand(a_i, [1, h1, w1, h2,
//   w2]), [0, S1, S2]): a_i tiled over the 2-D view, its own dim 0 (1 or X) kept. The same additions of the same
//   numbers in the same order, so exact; the scores chain is then flat, as the fusion reads it.
//
// spatial_head_split (below) gives a spatial tensor's head split its [B, S, W] view.
//
// All need the shapes they rely on known (k, the h and w, S1 and S2) and every rewritten value
// read only inside the pattern; anything else is left alone.
#include <string>
#include <vector>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "pass/pass.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt {
namespace {

std::optional<int64_t> known_dim(const Value* v, size_t i) {
  if (!v || !v->shape || v->shape->size() <= i || !(*v->shape)[i].known()) return std::nullopt;
  return (*v->shape)[i].value;
}

Value* ints_const(Rewriter& rw, const std::string& hint, const std::vector<int64_t>& v) {
  return rw.add_constant(hint, Tensor::from_ints(v, {static_cast<int64_t>(v.size())}));
}

// The axes of a Squeeze (attribute before opset 13, input from 13).
std::optional<std::vector<int64_t>> squeeze_axes(const Node* sq) {
  if (sq->has_attr("axes")) return sq->attr_ints("axes");
  if (sq->inputs.size() > 1 && sq->input(1)) return attn::const_ints(sq->input(1));
  return std::nullopt;
}

// Slice of exactly one element of axis 0 (constant starts / ends / axes, step 1) of a [k, ..] value.
bool slices_one_of_axis0(const Node* sl, int64_t k) {
  if (!sl->is("Slice") || sl->inputs.size() < 3) return false;
  auto s = attn::const_ints(sl->input(1)), e = attn::const_ints(sl->input(2));
  if (!s || !e || s->size() != 1 || e->size() != 1) return false;
  if (sl->inputs.size() > 3 && sl->input(3)) {
    auto a = attn::const_ints(sl->input(3));
    if (!a || a->size() != 1 || (*a)[0] != 0) return false;
  }
  if (sl->inputs.size() > 4 && sl->input(4)) {
    auto st = attn::const_ints(sl->input(4));
    if (!st || st->size() != 1 || (*st)[0] != 1) return false;
  }
  int64_t b = (*s)[0], f = (*e)[0];
  if (b < 0) b += k;
  if (f < 0) f += k;
  f = std::min(f, k);
  return b >= 0 && b < k && f == b + 1;
}

// Split of axis 0 of a [k, ..] value into k pieces of one (TorchScript's unbind).
bool splits_axis0_in_ones(const Node* sp, int64_t k) {
  if (!sp->is("Split") || sp->attr_int("axis", 0) != 0 || static_cast<int64_t>(sp->outputs.size()) != k) return false;
  std::optional<std::vector<int64_t>> sizes;
  if (sp->has_attr("split")) sizes = sp->attr_ints("split");
  else if (sp->inputs.size() > 1 && sp->input(1)) sizes = attn::const_ints(sp->input(1));
  else return true;  // equal pieces: k outputs of a k-long axis
  if (!sizes || static_cast<int64_t>(sizes->size()) != k) return false;
  for (int64_t n : *sizes)
    if (n != 1) return false;
  return true;
}

int select_before_view(Rewriter& rw) {
  std::vector<Node*> order;
  for (const auto& n : rw.graph().nodes())
    if (n->is("Reshape")) order.push_back(n.get());
  int rewritten = 0;
  for (Node* r : order) {
    if (!rw.alive(r) || r->inputs.size() < 2 || !r->input(0) || !r->output(0) || r->output(0)->is_graph_output) continue;
    Value* x = r->input(0);
    auto k = known_dim(x, 0);
    auto t = symbolic_value(r->input(1));  // TorchScript builds the target from Shape reads
    if (!k || *k < 1 || !t || t->size() < 2 || !(*t)[0].known() || (*t)[0].value != *k || r->output(0)->uses.empty())
      continue;
    bool ok = true;
    for (size_t i = 1; i < t->size(); ++i)  // a 0 would copy a dim by position
      ok = ok && !((*t)[i].known() && (*t)[i].value == 0);
    std::vector<Node*> readers = r->output(0)->consumers();
    for (Node* u : readers) {
      if (!ok) break;
      if (u->is("Gather")) {
        const Tensor* idx = attn::const_of(u->input(1));
        ok = u->attr_int("axis", 0) == 0 && idx && idx->dims.empty() && dtype_is_integer(idx->dtype);
      } else if ((slices_one_of_axis0(u, *k) || splits_axis0_in_ones(u, *k)) && u->input(0) == r->output(0)) {
        for (Value* o : u->outputs) {  // every piece is squeezed, and only squeezed
          ok = ok && o && !o->is_graph_output && !o->uses.empty();
          for (Node* sq : o ? o->consumers() : std::vector<Node*>{})
            ok = ok && sq->is("Squeeze") && squeeze_axes(sq) == std::vector<int64_t>{0};
        }
      } else {
        ok = false;
      }
    }
    if (!ok) continue;
    // The target without its first entry: a constant, or a Slice of the computed target.
    rw.set_insertion_point(r);
    Value* rest = nullptr;
    if (auto c = attn::const_ints(r->input(1)))
      rest = ints_const(rw, r->name + "_rest", std::vector<int64_t>(c->begin() + 1, c->end()));
    else
      rest = rw.create_node("", "Slice", {r->input(1), ints_const(rw, r->name + "_s", {1}),
                                          ints_const(rw, r->name + "_e", {static_cast<int64_t>(t->size())})},
                            {}, 1, r->name + "_rest")->outputs[0];
    for (Node* u : readers) {
      rw.set_insertion_point(u);
      if (u->is("Gather")) {
        Value* g = rw.create_node("", "Gather", {x, u->input(1)}, {Attribute::make_int("axis", 0)}, 1, u->name + "_pre")
                       ->outputs[0];
        Value* v = rw.create_node("", "Reshape", {g, rest}, {}, 1, u->name + "_view")->outputs[0];
        rw.replace_all_uses(u->output(0), v);
        rw.erase_node(u);
        continue;
      }
      std::vector<Value*> sin = u->inputs;  // Slice or Split of x itself, same parameters
      sin[0] = x;
      const int nout = static_cast<int>(u->outputs.size());
      Node* pre = rw.create_node("", u->op_type, sin, u->attrs, nout, u->name + "_pre");
      for (int i = 0; i < nout; ++i) {
        for (Node* sq : u->output(i)->consumers()) {
          std::vector<Value*> qin = sq->inputs;
          qin[0] = pre->outputs[i];
          Value* s = rw.create_node("", "Squeeze", qin, sq->attrs, 1, sq->name + "_pre")->outputs[0];
          Value* v = rw.create_node("", "Reshape", {s, rest}, {}, 1, sq->name + "_view")->outputs[0];
          rw.replace_all_uses(sq->output(0), v);
          rw.erase_node(sq);
        }
      }
      rw.erase_node(u);
    }
    rw.erase_dead({r});
    ++rewritten;
  }
  rw.set_insertion_point(nullptr);
  return rewritten;
}

// Reshape [X, S1, S2] -> [X, h1, w1, h2, w2] (h, w known, S = h·w); the five dims when it is one.
std::optional<std::vector<int64_t>> splits_scores_2d(const Node* r) {
  if (!r || !r->is("Reshape") || !r->input(0) || !r->output(0)) return std::nullopt;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 3 || c->size() != 5 || !attn::dims_same((*a)[0], (*c)[0])) return std::nullopt;
  std::vector<int64_t> hw;
  for (size_t i = 1; i < 5; ++i) {
    if (!(*c)[i].known()) return std::nullopt;
    hw.push_back((*c)[i].value);
  }
  if (!(*a)[1].known() || !(*a)[2].known() || (*a)[1].value != hw[0] * hw[1] || (*a)[2].value != hw[2] * hw[3])
    return std::nullopt;
  return hw;
}

int spatial_scores_view(Rewriter& rw) {
  std::vector<Node*> order;
  for (const auto& n : rw.graph().nodes())
    if (n->is("Reshape")) order.push_back(n.get());
  int rewritten = 0;
  for (Node* m : order) {
    if (!rw.alive(m) || m->inputs.size() < 2 || !m->input(0) || !m->output(0) || !m->output(0)->shape) continue;
    // Walk back through the Adds to the split.
    std::vector<std::pair<Node*, Value*>> adds;  // nearest the merge first: (Add, its term)
    Value* v = m->input(0);
    Node* split = nullptr;
    for (int d = 0; d < 8 && v && v->producer && v->uses.size() == 1 && !v->is_graph_output; ++d) {
      Node* n = v->producer;
      if (splits_scores_2d(n)) { split = n; break; }
      if (!n->is("Add") || n->inputs.size() != 2) break;
      // The chain side is the one whose producer leads on to the split; the other is the term.
      int side = -1;
      for (int i = 0; i < 2 && side < 0; ++i) {
        const Node* p = n->input(i) ? n->input(i)->producer : nullptr;
        if (p && (p->is("Add") || splits_scores_2d(p)) && n->input(i)->shape && n->input(i)->shape->size() == 5 &&
            n->output(0)->shape && attn::rank_of(n->input(1 - i)) == 5) {
          const Shape& ps = *n->input(i)->shape;
          const Shape& os = *n->output(0)->shape;
          bool same = true;  // the chain side already has the sum's shape: the term only broadcasts
          for (size_t j = 0; j < 5; ++j) same = same && attn::dims_same(ps[j], os[j]);
          if (same) side = i;
        }
      }
      if (side < 0) break;
      adds.push_back({n, n->input(1 - side)});
      v = n->input(side);
    }
    if (!split || adds.empty()) continue;
    auto hw = splits_scores_2d(split);
    const Shape& ms = *m->output(0)->shape;
    const auto& ss = split->input(0)->shape;
    if (!hw || ms.size() != 3 || !ss || !attn::dims_same(ms[0], (*ss)[0]) || !attn::dims_same(ms[1], (*ss)[1]) ||
        !attn::dims_same(ms[2], (*ss)[2]) || split->output(0)->uses.size() != 1)
      continue;
    const int64_t s1 = (*hw)[0] * (*hw)[1], s2 = (*hw)[2] * (*hw)[3];
    rw.set_insertion_point(m);
    Value* s = split->input(0);
    for (auto it = adds.rbegin(); it != adds.rend(); ++it) {
      Value* a = it->second;
      const std::string base = it->first->name;
      // Expand broadcasts against [1, h1, w1, h2, w2], keeping a's own dim 0; the 0 in the flat
      // target copies it (allowzero = 0).
      std::vector<int64_t> tile = {1};
      tile.insert(tile.end(), hw->begin(), hw->end());
      Value* e = rw.create_node("", "Expand", {a, ints_const(rw, base + "_tile", tile)}, {}, 1, base + "_term_tiled")
                     ->outputs[0];
      Value* flat = ints_const(rw, base + "_term_3d", {0, s1, s2});
      Value* t = rw.create_node("", "Reshape", {e, flat}, {}, 1, base + "_term_flat")->outputs[0];
      s = rw.create_node("", "Add", {s, t}, {}, 1, base + "_flat")->outputs[0];
    }
    if (!rw.can_replace_all_uses(m->output(0), s)) continue;
    rw.replace_all_uses(m->output(0), s);
    rw.erase_node(m);
    std::vector<Node*> dead = {split};
    for (auto& [n, term] : adds) dead.push_back(n);
    rw.erase_dead(dead);
    ++rewritten;
  }
  rw.set_insertion_point(nullptr);
  return rewritten;
}

// Reshape(x [B, h, w, W], [B', S, H, D]) with S = h·w (dims proven) and H·D = W known: the head
// split of a spatial tensor (SAM2's pooled queries: max-pool on [B, h, w, C], then one view to
// [B, h'·w', H, D]) becomes Reshape(Reshape(x, [0, -1, W]), same target): the same row-major
// order, through the [B, S, W] view the head trace starts from. Not for a size-1 h or w (the
// unit-axis views the trace reads as they are).
int spatial_head_split(Rewriter& rw) {
  std::vector<Node*> order;
  for (const auto& n : rw.graph().nodes())
    if (n->is("Reshape")) order.push_back(n.get());
  int rewritten = 0;
  for (Node* r : order) {
    if (!rw.alive(r) || r->inputs.size() < 2 || !r->input(0) || !r->output(0)) continue;
    const auto& a = r->input(0)->shape;
    const auto& c = r->output(0)->shape;
    if (!a || !c || a->size() != 4 || c->size() != 4) continue;
    if (!(*a)[3].known() || !(*c)[2].known() || !(*c)[3].known() || (*a)[3].value != (*c)[2].value * (*c)[3].value)
      continue;
    if (((*a)[1].known() && (*a)[1].value == 1) || ((*a)[2].known() && (*a)[2].value == 1)) continue;
    auto h = SymExpr::from_dim((*a)[1]), w = SymExpr::from_dim((*a)[2]), s = SymExpr::from_dim((*c)[1]);
    if (!attn::dims_same((*a)[0], (*c)[0]) || !h || !w || !s || !(*s == *h * *w)) continue;
    rw.set_insertion_point(r);
    Value* merged = rw.create_node("", "Reshape", {r->input(0), ints_const(rw, r->name + "_seq", {0, -1, (*a)[3].value})},
                                   {}, 1, r->name + "_seq")->outputs[0];
    rw.set_input(r, 0, merged);
    ++rewritten;
  }
  rw.set_insertion_point(nullptr);
  return rewritten;
}

class FlatViews : public Pass {
 public:
  std::string name() const override { return "flat_views"; }
  std::string description() const override {
    return "axis-0 selections moved before a view that keeps axis 0; terms added on a [X, h, w, h, w] view of "
           "[X, S, S] scores tiled onto the flat scores";
  }
  int run(Rewriter& rw, PassContext&) override {
    bool any = false;
    for (const auto& n : rw.graph().nodes()) any = any || n->is("Reshape");
    if (!any) return 0;
    rw.infer_shapes();  // metadata only: both read inferred dims
    int n = select_before_view(rw);
    if (n) rw.infer_shapes();
    n += spatial_scores_view(rw);
    return n + spatial_head_split(rw);
  }
};

}  // namespace
// After concat_heads_merge (260), before cse (300).
FUSEOPT_REGISTER_PASS(FlatViews, PassCategory::Cleanup, 270);
}  // namespace fuseopt
