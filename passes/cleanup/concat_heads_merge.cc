// Concat of head groups, then the heads merged: Reshape(Concat(x_i [.., n_i, D], axis -2),
// [.., N·D]) with N = Σ n_i becomes Concat(Reshape(x_i, [.., n_i·D]), axis -1).
//
// ConvBERT writes its mixed attention this way: the attention heads' output [B, S, H, D]
// (P·V transposed) and the span-based convolution's [B, S, Hc, D] are concatenated along the
// head axis and viewed [B, S, (H + Hc)·D] for the output projection. Rewritten, the attention
// output reaches its own [B, S, H·D] merge Reshape, the root the Attention fusion matches.
//
// Exact: for every leading index, the merged row of the concatenation is x_0's n_0·D elements,
// then x_1's, ..., in row-major order, which is the concatenation of the merged rows. Taken only
// where that is provable: the Concat joins the second-to-last axis of rank >= 3 tensors with
// known n_i and D, the Reshape's result keeps every leading dim of the Concat's (same inferred
// dims) and merges the last two (N·D known), and the Concat's other readers are Shape nodes
// (rebuilt from the first group's leading dims and the constant [N, D] where still live).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "pass/pass.h"

namespace fuseopt {
namespace {

bool same_dim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  if (!a.symbol.empty() && a.symbol == b.symbol) return true;
  auto x = SymExpr::from_dim(a), y = SymExpr::from_dim(b);
  return x && y && *x == *y;
}

// The nodes `v` is computed from, nearest first, at most `limit` of them.
std::vector<Node*> backward_cone(Value* v, size_t limit) {
  std::vector<Node*> out;
  std::vector<Value*> todo = {v};
  while (!todo.empty() && out.size() < limit) {
    Value* x = todo.back();
    todo.pop_back();
    Node* p = x ? x->producer : nullptr;
    if (!p || std::find(out.begin(), out.end(), p) != out.end()) continue;
    out.push_back(p);
    for (Value* i : p->inputs) todo.push_back(i);
  }
  return out;
}

class ConcatHeadsMerge : public Pass {
 public:
  std::string name() const override { return "concat_heads_merge"; }
  std::string description() const override {
    return "Reshape(Concat(head groups, axis -2), merge last two axes) -> Concat of the merged groups (axis -1)";
  }

  int run(Rewriter& rw, PassContext&) override {
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes())
      if (n->is("Reshape") && n->input(0) && n->input(0)->producer && n->input(0)->producer->is("Concat"))
        order.push_back(n.get());
    if (order.empty()) return 0;
    rw.infer_shapes();  // metadata only: the leading-dim proof reads inferred shapes
    int rewritten = 0;
    for (Node* r : order) {
      if (!rw.alive(r) || r->inputs.size() < 2 || !r->input(0) || !r->output(0)) continue;
      Node* c = r->input(0)->producer;
      if (!c || !c->is("Concat") || c->inputs.size() < 2 || r->input(0)->is_graph_output) continue;
      // Other readers: only Shape nodes (TorchScript's view target `x.size()[:-2] + (N·D,)`).
      std::vector<Node*> shape_readers;
      bool readers_ok = true;
      for (Node* u : r->input(0)->consumers()) {
        if (u == r) continue;
        readers_ok = readers_ok && u->is("Shape") && !u->has_attr("start") && !u->has_attr("end");
        shape_readers.push_back(u);
      }
      if (!readers_ok) continue;
      const auto& cs = r->input(0)->shape;
      const auto& rs = r->output(0)->shape;
      if (!cs || !rs || cs->size() < 3 || rs->size() + 1 != cs->size()) continue;
      const int64_t rank = static_cast<int64_t>(cs->size());
      int64_t axis = c->attr_int("axis", 0);
      if (axis < 0) axis += rank;
      if (axis != rank - 2) continue;
      const Dim& d = cs->back();
      bool ok = d.known() && d.value > 0;
      std::vector<int64_t> groups;
      for (size_t i = 0; ok && i < c->inputs.size(); ++i) {
        const Value* x = c->input(i);
        ok = x && x->shape && static_cast<int64_t>(x->shape->size()) == rank && (*x->shape)[rank - 2].known() &&
             same_dim(x->shape->back(), d);
        if (ok) groups.push_back((*x->shape)[rank - 2].value);
      }
      int64_t total = 0;
      for (int64_t n : groups) total += n;
      ok = ok && rs->back().known() && rs->back().value == total * d.value;
      for (int64_t i = 0; ok && i < rank - 2; ++i) ok = same_dim((*cs)[i], (*rs)[i]);
      if (!ok) continue;
      rw.set_insertion_point(r);
      std::vector<Value*> merged;
      for (size_t i = 0; i < c->inputs.size(); ++i) {
        std::vector<int64_t> target(static_cast<size_t>(rank - 1), 0);  // 0: copy the leading dim
        target.back() = groups[i] * d.value;
        Value* t = rw.add_constant(c->name + "_merge_target", Tensor::from_ints(target, {rank - 1}));
        merged.push_back(rw.create_node("", "Reshape", {c->input(i), t}, {}, 1, c->name + "_merge")->outputs[0]);
      }
      Value* y = rw.create_node("", "Concat", merged, {Attribute::make_int("axis", rank - 2)}, 1, c->name + "_merged")
                     ->outputs[0];
      if (!rw.can_replace_all_uses(r->output(0), y)) continue;  // the new nodes are dead: dce takes them
      rw.replace_all_uses(r->output(0), y);
      Value* target = r->input(1);
      rw.erase_node(r);
      // The merge target's own computation (often from Shape(concat)) is dead now.
      std::vector<Node*> cone = backward_cone(target, 64);
      cone.insert(cone.end(), shape_readers.begin(), shape_readers.end());
      rw.erase_dead(cone);
      // A Shape reader still live elsewhere reads the same dims from the first group:
      // Concat(Shape(x_0)[:rank-2], [N, D]) (every non-axis dim of a Concat's inputs is its own).
      for (Node* sh : shape_readers) {
        if (!rw.alive(sh)) continue;
        rw.set_insertion_point(sh);
        Value* s0 = rw.create_node("", "Shape", {c->input(0)}, {}, 1, sh->name + "_group0")->outputs[0];
        Value* lead = rw.create_node("", "Slice", {s0, rw.add_constant(sh->name + "_s", Tensor::from_ints({0}, {1})),
                                                   rw.add_constant(sh->name + "_e", Tensor::from_ints({rank - 2}, {1}))},
                                     {}, 1, sh->name + "_lead")->outputs[0];
        Value* tail = rw.add_constant(sh->name + "_nd", Tensor::from_ints({total, d.value}, {2}));
        Value* full = rw.create_node("", "Concat", {lead, tail}, {Attribute::make_int("axis", 0)}, 1, sh->name + "_rebuilt")
                          ->outputs[0];
        if (!rw.can_replace_all_uses(sh->output(0), full)) continue;
        rw.replace_all_uses(sh->output(0), full);
        rw.erase_node(sh);
      }
      rw.erase_dead({c});
      ++rewritten;
    }
    rw.set_insertion_point(nullptr);
    return rewritten;
  }
};

}  // namespace
// After einsum_to_matmul (250), before cse (300).
FUSEOPT_REGISTER_PASS(ConcatHeadsMerge, PassCategory::Cleanup, 260);
}  // namespace fuseopt
