// Common-subexpression elimination.
// - Small identical initializers (same dtype, dims and bytes; the exporters'
//   many copies of axes/indices constants) become one, so that
// - identical nodes (same domain, op, inputs, attributes, output count) become
//   one: exporters compute the same Shape/Gather/Unsqueeze chain once per
//   layer and the same mask once per use.
// The first occurrence (graph order) survives, so the result is deterministic.
// Nodes with subgraphs or random ops are never merged; a duplicate whose
// output is a graph output is kept (the model's outputs keep their names).
#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include "pass/pass.h"

namespace fuseopt {
namespace {

constexpr size_t kMaxDedupBytes = 4096;

bool is_random(const Node& n) {
  static const std::set<std::string> ops = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Multinomial", "Bernoulli"};
  return ops.count(n.op_type) != 0;
}

void append_tensor(std::string& k, const Tensor& t) {
  k += std::to_string(static_cast<int>(t.dtype)) + "[";
  for (int64_t d : t.dims) k += std::to_string(d) + ",";
  k += "]";
  k.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  for (const auto& s : t.strings) k += std::to_string(s.size()) + ":" + s;
}

std::string attr_key(const Attribute& a) {
  std::string k = a.name + "=" + std::to_string(static_cast<int>(a.kind)) + ":" + a.ref_attr_name + ":";
  switch (a.kind) {
    case Attribute::Kind::Float: k.append(reinterpret_cast<const char*>(&a.f), sizeof a.f); break;
    case Attribute::Kind::Int: k += std::to_string(a.i); break;
    case Attribute::Kind::String: k += std::to_string(a.s.size()) + ":" + a.s; break;
    case Attribute::Kind::Tensor: if (a.t) append_tensor(k, *a.t); break;
    case Attribute::Kind::Floats:
      k.append(reinterpret_cast<const char*>(a.floats.data()), a.floats.size() * sizeof(float));
      break;
    case Attribute::Kind::Ints: for (int64_t i : a.ints) k += std::to_string(i) + ","; break;
    case Attribute::Kind::Strings: for (const auto& s : a.strings) k += std::to_string(s.size()) + ":" + s; break;
    default: k += a.opaque; break;
  }
  return k;
}

std::string node_key(const Node& n) {
  std::string k = n.domain + "\x1f" + n.op_type + "\x1f" + std::to_string(n.outputs.size()) + "\x1f";
  for (const Value* v : n.inputs) k += (v ? v->name : std::string()) + "\x1e";
  std::vector<std::string> attrs;
  for (const Attribute& a : n.attrs) attrs.push_back(attr_key(a));
  std::sort(attrs.begin(), attrs.end());  // attribute order carries no meaning
  for (const auto& a : attrs) k += "\x1f" + a;
  // Omitted outputs must line up too.
  for (const Value* o : n.outputs) k += o ? "o" : "-";
  return k;
}

class CommonSubexpressionElimination : public Pass {
 public:
  std::string name() const override { return "cse"; }
  std::string description() const override { return "merge identical small constants and identical nodes"; }

  int run(Rewriter& rw, PassContext&) override {
    int merged = 0;
    // 1. Constants.
    std::unordered_map<std::string, Value*> consts;
    std::vector<Value*> inits = rw.graph().initializers;
    for (Value* v : inits) {
      const Tensor& t = *v->const_data;
      if (v->is_graph_output || t.bytes.size() > kMaxDedupBytes || t.dtype == DType::String) continue;
      std::string k;
      append_tensor(k, t);
      auto [it, inserted] = consts.emplace(k, v);
      if (inserted || v->uses.empty() || !rw.can_replace_all_uses(v, it->second)) continue;
      rw.replace_all_uses(v, it->second);
      rw.erase_constant(v);
      ++merged;
    }
    // 2. Nodes, in graph order (inputs merged before their consumers are keyed).
    std::unordered_map<std::string, Node*> seen;
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes()) order.push_back(n.get());
    for (Node* n : order) {
      if (!rw.alive(n) || n->has_subgraph() || !n->implicit_inputs.empty() || is_random(*n) || n->outputs.empty())
        continue;
      auto [it, inserted] = seen.emplace(node_key(*n), n);
      if (inserted) continue;
      Node* first = it->second;
      // A duplicate that is a graph output or read by a subgraph by name stays.
      bool bound = false;
      for (size_t i = 0; i < n->outputs.size(); ++i)
        bound |= n->outputs[i] && !rw.can_replace_all_uses(n->outputs[i], first->outputs[i]);
      if (bound || !rw.alive(first)) continue;
      for (size_t i = 0; i < n->outputs.size(); ++i)
        if (n->outputs[i]) rw.replace_all_uses(n->outputs[i], first->outputs[i]);
      rw.erase_dead({n});
      ++merged;
    }
    return merged;
  }
};

}  // namespace
// After const_fold (100) and identity_elim (200): constants and rewired inputs
// are final, so equal nodes have equal keys.
FUSEOPT_REGISTER_PASS(CommonSubexpressionElimination, PassCategory::Cleanup, 300);
}  // namespace fuseopt
