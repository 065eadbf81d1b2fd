// If folding: an If whose condition is known once constants and shapes are
// folded is replaced by the nodes of the branch it takes.
//
// TorchScript exports of DeBERTa-v2 guard the relative-position computation
// with If(Not(Equal(query_len, key_len))): both lengths are the same symbolic
// dim, so shape inference proves the condition false and the else branch (an
// Identity of an outer value) is all that remains. Without the If, the graph
// is plain data flow again: fusions see through it and no runtime needs
// control flow.
//
// The branch body is parsed by onnx_io (load_subgraph: its outer-scope reads
// become graph inputs named like the outer values). Its nodes are copied in
// before the If with fresh output names, its initializers become constants of
// the outer graph, and each If output is replaced by the matching branch
// output. Left alone: a condition not known, a branch with formal inputs (not
// valid for If), and a branch whose nodes hold subgraphs themselves (those
// read the branch's values by name, which copying renames).
#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "onnx_io/subgraph_load.h"
#include "pass/pass.h"
#include "util/error.h"

namespace fuseopt {
namespace {

std::optional<bool> known_condition(const Value* cond, const ShapeInferenceResult& si) {
  if (!cond) return std::nullopt;
  if (cond->const_data && cond->const_data->numel() == 1) return cond->const_data->as_double(0) != 0;
  if (auto v = si.symbolic_ints(cond); v && v->size() == 1) return (*v)[0] != 0;
  return std::nullopt;
}

// Body nodes in an order where every input is available first; empty when
// some input is never produced (a malformed body: leave the If alone).
std::vector<const Node*> body_order(const Graph& body, bool& ok) {
  std::set<const Value*> ready;
  for (const Value* v : body.all_values())
    if (!v->producer) ready.insert(v);
  std::vector<const Node*> pending, order;
  for (const auto& n : body.nodes()) pending.push_back(n.get());
  while (!pending.empty()) {
    std::vector<const Node*> rest;
    for (const Node* n : pending) {
      bool inputs_ready = true;
      for (const Value* v : n->inputs)
        if (v && !ready.count(v)) inputs_ready = false;
      if (!inputs_ready) {
        rest.push_back(n);
        continue;
      }
      order.push_back(n);
      for (const Value* v : n->outputs)
        if (v) ready.insert(v);
    }
    if (rest.size() == pending.size()) {
      ok = false;
      return {};
    }
    pending.swap(rest);
  }
  ok = true;
  return order;
}

class IfFold : public Pass {
 public:
  std::string name() const override { return "if_fold"; }
  std::string description() const override {
    return "replace an If whose condition is known by the nodes of the branch it takes";
  }

  int run(Rewriter& rw, PassContext& ctx) override {
    std::vector<Node*> ifs;
    for (const auto& n : rw.graph().nodes())
      if (n->is("If")) ifs.push_back(n.get());
    if (ifs.empty()) return 0;
    const ShapeInferenceResult si = rw.infer_shapes();
    std::vector<std::pair<Node*, bool>> todo;  // decided before any change (si goes stale)
    for (Node* n : ifs)
      if (auto c = known_condition(n->input(0), si)) todo.emplace_back(n, *c);
    int folded = 0;
    for (auto [n, cond] : todo)
      if (rw.alive(n) && inline_branch(rw, n, cond, ctx)) ++folded;
    return folded;
  }

 private:
  bool inline_branch(Rewriter& rw, Node* n, bool cond, PassContext& ctx) const {
    const char* which = cond ? "then_branch" : "else_branch";
    const Attribute* attr = n->attr(which);
    if (!attr) return false;
    LoadedSubgraph sub;
    try {
      sub = load_subgraph(*attr, rw.graph(), n->label() + " " + which);
    } catch (const Error& e) {
      if (ctx.options.verbose) spdlog::debug("if_fold: {} left alone: {}", n->label(), e.what());
      return false;
    }
    const Graph& body = *sub.graph;
    if (body.outputs.size() != n->outputs.size()) return false;
    // Branch values -> outer values. Outer-scope reads first.
    std::map<const Value*, Value*> outer_of;
    const std::set<std::string> refs(sub.outer_refs.begin(), sub.outer_refs.end());
    for (const Value* in : body.inputs) {
      if (!refs.count(in->name)) return false;  // a formal input: not a valid If body
      Value* ov = rw.graph().find(in->name);
      if (!ov) return false;
      outer_of[in] = ov;
    }
    bool ok = false;
    const std::vector<const Node*> order = body_order(body, ok);
    if (!ok) return false;
    for (const Node* bn : order)
      if (bn->has_subgraph()) return false;
    for (const Value* v : body.all_values())
      if (!v->producer && !outer_of.count(v) && !v->const_data) return false;  // nothing defines it

    // From here on the graph changes.
    rw.set_insertion_point(n);
    for (const Value* v : body.initializers) outer_of[v] = rw.add_constant(n->name + "/" + v->name, *v->const_data);
    for (const Node* bn : order) {
      std::vector<Value*> ins;
      for (const Value* v : bn->inputs) ins.push_back(v ? outer_of.at(v) : nullptr);
      Node* copy = rw.create_node(bn->domain, bn->op_type, ins, bn->attrs, static_cast<int>(bn->outputs.size()),
                                  n->name + "/" + (bn->name.empty() ? bn->op_type : bn->name));
      for (size_t i = 0; i < bn->outputs.size(); ++i)
        if (bn->outputs[i]) outer_of[bn->outputs[i]] = copy->outputs[i];
    }
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      Value* from = n->outputs[i];
      if (!from) continue;
      Value* to = outer_of.at(body.outputs[i]);
      // A branch that returns an outer value or a constant: an Identity keeps
      // the If output's name where that name is a model output or is read by
      // a subgraph.
      if (!rw.can_replace_all_uses(from, to)) to = rw.create_node("", "Identity", {to}, {}, 1, n->name + "/out")->outputs[0];
      rw.replace_all_uses(from, to);
    }
    rw.set_insertion_point(nullptr);
    rw.erase_dead({n});
    return true;
  }
};

}  // namespace
// After const_fold (100), which turns the condition's shape computation into
// a constant, and before identity_elim (200), which removes the Identity a
// pass-through branch leaves.
FUSEOPT_REGISTER_PASS(IfFold, PassCategory::Cleanup, 150);
}  // namespace fuseopt
