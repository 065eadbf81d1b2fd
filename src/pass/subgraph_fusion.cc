#include "pass/subgraph_fusion.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "onnx_io/onnx_io.h"
#include "onnx_io/subgraph_load.h"
#include "pass/pass_manager.h"
#include "util/error.h"

namespace fuseopt {

namespace {

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.bytes.size() == b.bytes.size() &&
         (a.bytes.size() == 0 || std::memcmp(a.bytes.data(), b.bytes.data(), a.bytes.size()) == 0);
}

Shape shape_of(const Tensor& t) {
  Shape s;
  for (int64_t d : t.dims) s.push_back(Dim::of(d));
  return s;
}

// Names no value may take: every name any If branch of the outer graph defines (ONNX's SSA
// rule spans scopes: an outer name a sibling branch defines is an error there), and the
// constants moved out so far with their bytes, so that two branches' equal constants share one.
struct Scope {
  std::set<std::string> branch_names;
  std::multimap<size_t, Value*> hoisted;  // by hash of the bytes
};

size_t tensor_hash(const Tensor& t) {
  std::string_view bytes(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  size_t h = std::hash<std::string_view>()(bytes) ^ (static_cast<size_t>(t.dtype) * 0x9e3779b97f4a7c15ull);
  for (int64_t d : t.dims) h = h * 31 + static_cast<size_t>(d);
  return h;
}

// A name free in both graphs and in every branch.
std::string free_name(const Graph& outer, const Graph& body, const Scope& scope, const std::string& hint) {
  std::string n = hint;
  for (int i = 1; body.find(n) || outer.find(n) || scope.branch_names.count(n); ++i) n = hint + "_" + std::to_string(i);
  return n;
}

bool read_outer(const LoadedSubgraph& ls, const std::string& name) {
  return std::find(ls.outer_refs.begin(), ls.outer_refs.end(), name) != ls.outer_refs.end();
}

// One branch: load, fuse, write back into n's attribute `attr_index`. Returns false (branch
// unchanged) when it cannot be fused; `report` then holds nothing.
bool fuse_branch(Graph& g, Node* n, size_t attr_index, const PassManagerOptions& opts, const std::string& where,
                 Scope& scope, FusionReport& report) {
  const Attribute attr = n->attrs[attr_index];
  LoadedSubgraph ls = load_subgraph(attr, g, where);
  Graph& body = *ls.graph;
  for (const std::string& name : ls.outer_refs) {
    Value* ov = g.find(name);
    Value* bv = body.find(name);
    if (!ov || !bv) return false;
    if (ov->const_data) {  // a weight: the body's constant, the same bytes (shared)
      body.inputs.erase(std::remove(body.inputs.begin(), body.inputs.end(), bv), body.inputs.end());
      bv->is_graph_input = false;
      bv->const_data = ov->const_data;
      bv->dtype = ov->const_data->dtype;
      bv->shape = shape_of(*ov->const_data);
      body.initializers.push_back(bv);
    } else {  // an outer value computed at run time: a typed input of the branch
      bv->dtype = ov->dtype;
      bv->shape = ov->shape;
    }
  }
  PassManager pm(opts);
  pm.run(body, report);
  // A branch output must come from inside the branch: ONNX Runtime refuses an outer-scope value
  // returned directly. One the passes folded to a constant (Optimum's placeholder presents) stays
  // the branch's own initializer (not moved out below, so a second run finds nothing to fold); an
  // outer value read as it is goes out through an Identity.
  std::set<const Value*> own_constants;
  for (size_t i = 0; i < body.outputs.size(); ++i) {
    Value* o = body.outputs[i];
    if (o->const_data && !read_outer(ls, o->name)) own_constants.insert(o);
    if (o->producer || own_constants.count(o)) continue;
    const std::string name = o->name;
    body.rename_value(o, free_name(g, body, scope, name + "_value"));
    Node* id = body.add_node("Identity", "", {o}, {name}, name + "_out");
    Value* out = id->output(0);
    out->dtype = o->dtype;
    out->shape = o->shape;
    out->has_value_info = o->has_value_info;
    o->is_graph_output = false;
    out->is_graph_output = true;
    body.outputs[i] = out;
  }

  // Constants: the outer ones it still reads stay outer reads; those the passes made (packed
  // weights, folded shapes) move out, under a name no branch defines, shared by equal bytes.
  const std::set<std::string> read(ls.outer_refs.begin(), ls.outer_refs.end());
  std::vector<Value*> kept;
  for (Value* v : std::vector<Value*>(body.initializers)) {
    if (own_constants.count(v)) {
      kept.push_back(v);
      continue;
    }
    Value* ov = g.find(v->name);
    if (read.count(v->name) && ov && ov->const_data == v->const_data) continue;  // still the outer weight
    const size_t h = tensor_hash(*v->const_data);
    Value* same = nullptr;
    for (auto [it, end] = scope.hoisted.equal_range(h); it != end && !same; ++it)
      if (it->second->const_data == v->const_data || same_tensor(*it->second->const_data, *v->const_data)) same = it->second;
    if (same) {
      if (same->name == v->name) continue;
      Value* twin = body.find(same->name);  // this branch's own copy, already moved out under that name
      if (twin && twin != v && twin->const_data && same_tensor(*twin->const_data, *v->const_data)) {
        body.replace_all_uses(v, twin);
        body.erase_value(v);
        continue;
      }
      if (twin && twin != v) body.rename_value(twin, free_name(g, body, scope, twin->name));
      body.rename_value(v, same->name);
      continue;
    }
    if (ov || scope.branch_names.count(v->name)) body.rename_value(v, free_name(g, body, scope, v->name));
    Value* nv = g.create_value(v->name);
    nv->const_data = v->const_data;
    nv->dtype = v->const_data->dtype;
    nv->shape = shape_of(*v->const_data);
    g.initializers.push_back(nv);
    scope.hoisted.emplace(h, nv);
  }
  body.initializers = kept;  // every other constant is an outer read now (kept as values for to_proto's value_info)
  // Values the passes defined must not shadow an outer name.
  for (Value* v : body.all_values())
    if (v->producer && !v->is_graph_output && g.find(v->name)) body.rename_value(v, free_name(g, body, scope, v->name));
  for (Value* v : body.all_values())
    if (v->producer) scope.branch_names.insert(v->name);

  std::set<std::string> outer_names(ls.outer_refs.begin(), ls.outer_refs.end());
  n->attrs[attr_index] = subgraph_attribute(body, attr.name, outer_names, g.functions, g.ir_version);
  for (const auto& [domain, version] : body.opset_imports)
    if (!g.opset_imports.count(domain)) g.opset_imports[domain] = version;
  return true;
}

}  // namespace

std::vector<std::pair<std::string, FusionReport>> fuse_if_branches(Graph& g, const PassManagerOptions& opts) {
  std::vector<std::pair<std::string, FusionReport>> reports;
  std::vector<Node*> ifs;
  Scope scope;
  for (const auto& n : g.nodes()) {
    if (n->is("If") && n->has_subgraph()) ifs.push_back(n.get());
    for (const Attribute& a : n->attrs)
      for (std::string& name : subgraph_defined_names(a)) scope.branch_names.insert(std::move(name));
  }
  bool changed = false;
  for (Node* n : ifs) {
    for (size_t i = 0; i < n->attrs.size(); ++i) {
      if (n->attrs[i].kind != Attribute::Kind::Graph) continue;
      const std::string where = n->label() + " " + n->attrs[i].name;
      FusionReport r;
      try {
        if (!fuse_branch(g, n, i, opts, where, scope, r)) continue;
      } catch (const Error& e) {
        spdlog::warn("{}: left unfused: {}", where, e.what());
        continue;
      }
      changed = true;
      reports.emplace_back(where, std::move(r));
    }
    // The outer values the rewritten branches read (packed weights instead of the originals).
    rebind_outer_reads(g, n, "");
  }
  if (changed)  // outer constants only the original branches read
    for (Value* v : std::vector<Value*>(g.initializers))
      if (v->uses.empty() && !v->is_graph_output) g.erase_value(v);
  return reports;
}

}  // namespace fuseopt
