#include "onnx_io/subgraph_load.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <set>

#include "onnx_io/onnx_io.h"
#include "util/error.h"

namespace fuseopt {

namespace {
// Names read in `g` (and its nested bodies) that `g` does not define.
void outer_reads(const onnx::GraphProto& g, const std::set<std::string>& defined, std::vector<std::string>& refs,
                 std::set<std::string>& seen) {
  std::set<std::string> local = defined;
  for (const auto& i : g.input()) local.insert(i.name());
  for (const auto& i : g.initializer()) local.insert(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) local.insert(o);
  auto note = [&](const std::string& name) {
    if (!name.empty() && !local.count(name) && seen.insert(name).second) refs.push_back(name);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) note(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) outer_reads(a.g(), local, refs, seen);
      for (const auto& sg : a.graphs()) outer_reads(sg, local, refs, seen);
    }
  }
  for (const auto& o : g.output()) note(o.name());
}
}  // namespace

namespace {
void defined_names(const onnx::GraphProto& g, std::vector<std::string>& out) {
  for (const auto& i : g.input()) out.push_back(i.name());
  for (const auto& i : g.initializer()) out.push_back(i.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output())
      if (!o.empty()) out.push_back(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) defined_names(a.g(), out);
      for (const auto& sg : a.graphs()) defined_names(sg, out);
    }
  }
}
}  // namespace

std::vector<std::string> subgraph_defined_names(const Attribute& attr) {
  onnx::AttributeProto proto;
  std::vector<std::string> names;
  if (attr.kind != Attribute::Kind::Graph || attr.opaque.empty() || !proto.ParseFromString(attr.opaque)) return names;
  if (proto.has_g()) defined_names(proto.g(), names);
  for (const auto& g : proto.graphs()) defined_names(g, names);
  return names;
}

namespace {
bool has_domain(const onnx::GraphProto& g, const std::string& domain) {
  for (const auto& n : g.node()) {
    if (n.domain() == domain) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && has_domain(a.g(), domain)) return true;
      for (const auto& sg : a.graphs())
        if (has_domain(sg, domain)) return true;
    }
  }
  return false;
}
}  // namespace

bool subgraph_has_domain(const Attribute& attr, const std::string& domain) {
  onnx::AttributeProto proto;
  if (attr.kind != Attribute::Kind::Graph || attr.opaque.empty() || !proto.ParseFromString(attr.opaque)) return false;
  if (proto.has_g() && has_domain(proto.g(), domain)) return true;
  for (const auto& g : proto.graphs())
    if (has_domain(g, domain)) return true;
  return false;
}

std::vector<std::string> subgraph_outer_reads(const Attribute& attr) {
  onnx::AttributeProto proto;
  std::vector<std::string> refs;
  if (attr.kind != Attribute::Kind::Graph || attr.opaque.empty() || !proto.ParseFromString(attr.opaque)) return refs;
  std::set<std::string> seen;
  if (proto.has_g()) outer_reads(proto.g(), {}, refs, seen);
  for (const auto& g : proto.graphs()) outer_reads(g, {}, refs, seen);
  return refs;
}

LoadedSubgraph load_subgraph(const Attribute& attr, const Graph& outer, const std::string& label) {
  onnx::AttributeProto proto;
  FUSE_CHECK(attr.kind == Attribute::Kind::Graph && !attr.opaque.empty() && proto.ParseFromString(attr.opaque) &&
                 proto.has_g(),
             label << ": attribute '" << attr.name << "' is not a graph");
  onnx::ModelProto model;
  model.set_ir_version(outer.ir_version);
  for (const auto& [domain, version] : outer.opset_imports) {
    auto* op = model.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  onnx::GraphProto* g = model.mutable_graph();
  *g = proto.g();
  if (g->name().empty()) g->set_name(attr.name);
  LoadedSubgraph r;
  std::set<std::string> seen;
  outer_reads(*g, {}, r.outer_refs, seen);
  for (const std::string& name : r.outer_refs) {
    // An input without a type: the nested Session takes whatever the outer value is.
    g->add_input()->set_name(name);
  }
  std::string base = outer.source_path.empty() ? "." : std::filesystem::path(outer.source_path).parent_path().string();
  if (base.empty()) base = ".";
  // The body was validated with the model around it (or the user turned
  // validation off); on its own it would miss the outer opsets' context.
  LoadOptions lo;
  lo.validate = false;
  r.graph = load_model_from_bytes(model.SerializeAsString(), base, label, lo);
  return r;
}

void rebind_outer_reads(Graph& g, Node* n, const std::string& who) {
  g.clear_implicit_inputs(n);
  std::set<std::string> seen;
  for (const Attribute& a : n->attrs)
    for (const std::string& name : subgraph_outer_reads(a))
      if (seen.insert(name).second) {
        Value* v = g.find(name);
        FUSE_CHECK(v, who << n->label() << ": a rewritten branch reads '" << name << "', which is not defined");
        g.add_implicit_input(n, v);
      }
}

}  // namespace fuseopt
