#include "pass/forced_dims.h"

#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "ir/sym_expr.h"

namespace fuseopt {
namespace {

// Product of the dims as an expression; nullopt when one is anonymous.
std::optional<SymExpr> element_count(const Shape& s) {
  SymExpr n = SymExpr::constant(1);
  for (const Dim& d : s) {
    auto e = SymExpr::from_dim(d);
    if (!e) return std::nullopt;
    n = n * *e;
  }
  return n;
}

// The nodes some graph output depends on.
std::set<const Node*> live_nodes(const Graph& g) {
  std::set<const Node*> live;
  std::vector<const Value*> todo(g.outputs.begin(), g.outputs.end());
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    const Node* n = v ? v->producer : nullptr;
    if (!n || !live.insert(n).second) continue;
    for (const Value* i : n->inputs) todo.push_back(i);
    for (const Value* i : n->implicit_inputs) todo.push_back(i);
  }
  return live;
}

// Plain dim names of the graph inputs: the only symbols a binding may name.
std::set<std::string> input_symbols(const Graph& g) {
  std::set<std::string> names;
  for (const Value* v : g.inputs)
    if (v->shape)
      for (const Dim& d : *v->shape)
        if (!d.known() && !d.symbol.empty() && SymExpr::parse(d.symbol).is_atom()) names.insert(d.symbol);
  return names;
}

}  // namespace

std::vector<ForcedDim> forced_dims(const Graph& g) {
  const std::set<std::string> symbols = input_symbols(g);
  if (symbols.empty()) return {};
  const std::set<const Node*> live = live_nodes(g);
  std::map<std::string, ForcedDim> found;
  std::set<std::string> contradicted;
  for (const auto& up : g.nodes()) {
    const Node* n = up.get();
    if (!n->is("Reshape") || !live.count(n) || !n->input(0) || !n->output(0)) continue;
    if (!n->input(0)->shape || !n->output(0)->shape) continue;
    auto in = element_count(*n->input(0)->shape);
    auto out = element_count(*n->output(0)->shape);
    if (!in || !out || *in == *out) continue;
    auto s = in->solve_for_atom(*out);
    if (!s || !symbols.count(s->first)) continue;
    auto [it, fresh] = found.emplace(s->first, ForcedDim{s->first, s->second, n->label()});
    if (!fresh && it->second.value != s->second) contradicted.insert(s->first);
  }
  std::vector<ForcedDim> r;
  for (auto& [name, f] : found)
    if (!contradicted.count(name)) r.push_back(f);
  return r;
}

bool ForcedDimBinding::bind(Graph& g) {
  const std::vector<ForcedDim> forced = forced_dims(g);
  if (forced.empty()) return false;
  std::map<std::string, int64_t> value;
  for (const ForcedDim& f : forced) {
    value[f.symbol] = f.value;
    spdlog::warn("{} accepts only {} = {} (the exporter baked a traced length into its target); fusing for "
                 "that length", f.reshape, f.symbol, f.value);
  }
  auto bind_value = [&](Value* v) {
    if (!v->shape) return;
    Shape s = *v->shape;
    bool changed = false;
    for (Dim& d : s)
      if (!d.known() && value.count(d.symbol)) d = Dim::of(value[d.symbol]), changed = true;
    if (!changed) return;
    declared_.emplace_back(v->name, *v->shape);
    v->shape = s;
  };
  for (Value* v : g.inputs) bind_value(v);
  for (Value* v : g.outputs) bind_value(v);
  return true;
}

void ForcedDimBinding::restore(Graph& g) {
  std::map<std::string, Shape> declared(declared_.begin(), declared_.end());
  for (std::vector<Value*>* list : {&g.inputs, &g.outputs})
    for (Value* v : *list)
      if (auto it = declared.find(v->name); it != declared.end()) v->shape = it->second;
  declared_.clear();
}

}  // namespace fuseopt
