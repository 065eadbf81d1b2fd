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

}  // namespace fuseopt
