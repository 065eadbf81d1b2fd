// The model-level half of the load-time validation (validate_model.h): IR
// version and opset imports, the graph walk (definitions, scopes, wiring,
// value types, initializers), subgraphs and model-local functions. Each node
// goes to validate_node.cc.
#include "onnx_io/validate_model.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include <set>
#include <unordered_map>

#include "onnx_io/op_schemas.h"
#include "onnx_io/unknown_fields.h"
#include "onnx_io/validate_node.h"
#include "onnx_io/validate_tensor.h"
#include "util/error.h"

namespace fuseopt {

namespace validation {
namespace {

// The names a graph defines, with its enclosing graphs' behind it: a
// subgraph (If/Loop/Scan body) may read any value of the graphs around it.
struct Scope {
  const Scope* parent = nullptr;
  std::unordered_map<std::string, std::string> defs;  // name -> what defines it ("graph input", "node 'x'")
  bool has(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent)
      if (s->defs.count(name)) return true;
    return false;
  }
};

// Element types ONNX defines; 0 (not given) is allowed. Nested types
// (sequence, optional, map values) are checked the same way.
void check_type(const Context& ctx, const onnx::TypeProto& t, const std::string& who) {
  if (t.has_tensor_type()) {
    const int et = t.tensor_type().elem_type();
    if (et < 0 || et > kMaxOnnxDataType)
      ctx.fail(who, "declares element type " + std::to_string(et) + ", which ONNX does not define");
  } else if (t.has_sequence_type() && t.sequence_type().has_elem_type()) {
    check_type(ctx, t.sequence_type().elem_type(), who);
  } else if (t.has_optional_type() && t.optional_type().has_elem_type()) {
    check_type(ctx, t.optional_type().elem_type(), who);
  } else if (t.has_map_type() && t.map_type().has_value_type()) {
    check_type(ctx, t.map_type().value_type(), who);
  }
}

void check_value_info(const Context& ctx, const onnx::ValueInfoProto& vi, const std::string& who) {
  if (vi.has_type()) check_type(ctx, vi.type(), who);
}

// What ONNX's checker asks of the MAIN graph's inputs (not of subgraphs or
// value_info, where types may be left to inference): a type; a tensor type
// has an element type and a shape field (its dims may be symbolic or
// unknown); a sequence or optional type has an element type, checked the
// same way. Outputs are not held to it: fuseopt's shape inference fills in
// their element type and shape before it writes them (models written from a
// Graph before inference, as the tests build them, lack both).
std::string io_type_problem(const onnx::TypeProto& t) {
  if (t.has_tensor_type()) {
    if (t.tensor_type().elem_type() == 0) return "has no element type";
    if (!t.tensor_type().has_shape())
      return "has no shape (ONNX requires one on the main graph's inputs; its dims may be symbolic)";
    return "";
  }
  if (t.has_sequence_type()) {
    if (!t.sequence_type().has_elem_type()) return "is a sequence without an element type";
    std::string p = io_type_problem(t.sequence_type().elem_type());
    return p.empty() ? p : "is a sequence whose element " + p;
  }
  if (t.has_optional_type()) {
    if (!t.optional_type().has_elem_type()) return "is an optional without an element type";
    std::string p = io_type_problem(t.optional_type().elem_type());
    return p.empty() ? p : "is an optional whose element " + p;
  }
  if (t.has_sparse_tensor_type() || t.has_map_type()) return "";
  return "has a type with no kind (tensor, sequence, ...)";
}

void check_main_input(const Context& ctx, const onnx::ValueInfoProto& vi, const std::string& who) {
  if (!vi.has_type()) ctx.fail(who, "has no type");
  if (std::string p = io_type_problem(vi.type()); !p.empty()) ctx.fail(who, p);
}

std::string quoted_or_index(const std::string& kind, const std::string& name, int i) {
  return name.empty() ? kind + " #" + std::to_string(i) : kind + " " + quoted(name);
}

void validate_graph(Context& ctx, const onnx::GraphProto& g, const Scope* parent, const Site& site, int64_t ir_version);

// The graph's own definitions, each name once: graph inputs, initializers (an
// initializer may share a graph input's name: it is that input's default),
// node outputs.
void collect_definitions(const Context& ctx, const onnx::GraphProto& g, const Site& site, bool main, int64_t ir_version,
                         Scope& s) {
  for (int i = 0; i < g.input_size(); ++i) {
    const auto& in = g.input(i);
    const std::string who = quoted_or_index("graph input", in.name(), i) + site.scope;
    if (in.name().empty()) ctx.fail(who, "has no name");
    if (!s.defs.emplace(in.name(), "graph input").second) ctx.fail(who, "is listed twice");
    check_value_info(ctx, in, who);
    if (main) check_main_input(ctx, in, who);
  }
  std::unordered_map<std::string, int> initializers;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const auto& t = g.initializer(i);
    const std::string who = quoted_or_index("initializer", t.name(), i) + site.scope;
    if (t.name().empty()) ctx.fail(who, "has no name");
    if (!initializers.emplace(t.name(), i).second) ctx.fail(who, "is defined twice");
    if (std::string p = tensor_proto_problem(t); !p.empty()) ctx.fail(who, p);
    const bool is_input = s.defs.count(t.name()) > 0;
    if (main && ir_version < 4 && !is_input)
      ctx.fail(who, "is not a graph input, which IR version " + std::to_string(ir_version) +
                        " requires of every initializer (IR 4 lifted that)");
    if (!is_input) s.defs.emplace(t.name(), "initializer");
  }
  for (int i = 0; i < g.sparse_initializer_size(); ++i) {
    const auto& t = g.sparse_initializer(i);
    const std::string name = t.values().name();
    const std::string who = quoted_or_index("sparse initializer", name, i) + site.scope;
    if (std::string p = sparse_tensor_proto_problem(t); !p.empty()) ctx.fail(who, p);
    if (name.empty()) ctx.fail(who, "has no name");
    auto [it, fresh] = s.defs.emplace(name, "sparse initializer");
    if (!fresh && it->second != "graph input") ctx.fail(who, "is defined twice");
  }
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string producer = n.name().empty() ? "node #" + std::to_string(i) : "node " + quoted(n.name());
    for (const std::string& o : n.output()) {
      if (o.empty()) continue;
      auto [it, fresh] = s.defs.emplace(o, producer);
      if (!fresh)
        ctx.fail(node_where(n, i, site), "output " + quoted(o) + " is already produced by " +
                                             (it->second == producer ? "this node" : it->second));
    }
  }
}

void validate_subgraphs(Context& ctx, const onnx::NodeProto& n, int index, const Scope& s, const Site& site,
                        int64_t ir_version) {
  const std::string owner = n.name().empty() ? "node #" + std::to_string(index) : "node " + quoted(n.name());
  for (const auto& a : n.attribute()) {
    if (a.has_g()) {
      Site sub = site;
      sub.scope = " in the " + printable(a.name()) + " of " + owner + site.scope;
      validate_graph(ctx, a.g(), &s, sub, ir_version);
    }
    for (int k = 0; k < a.graphs_size(); ++k) {
      Site sub = site;
      sub.scope = " in " + printable(a.name()) + "[" + std::to_string(k) + "] of " + owner + site.scope;
      validate_graph(ctx, a.graphs(k), &s, sub, ir_version);
    }
  }
}

std::string elem_type_name(int et) {
  const std::string& n = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(et));
  return n.empty() ? std::to_string(et) : n;
}

// The element types the graph declares, for the nodes' type-constraint checks.
// A value declared twice (graph output and value_info, value_info twice, an
// initializer and its graph input) has one type: the loader reads the last
// declaration and the check the first, so two types would let a model through
// that its own output then contradicts (fuzz/regressions/).
void collect_types(const Context& ctx, const onnx::GraphProto& g, const Site& site, DeclaredTypes& t) {
  std::map<std::string, std::string> first;  // name -> what declared its type first
  auto declare = [&](const std::string& name, int et, const std::string& what) {
    auto [it, fresh] = t.elem.emplace(name, et);
    if (fresh) {
      first[name] = what;
    } else if (it->second != et) {
      ctx.fail(what + " " + quoted(name) + site.scope,
               "declares element type " + elem_type_name(et) + ", but " +
                   (first[name] == what ? "another " + what : "the " + first[name]) + " declares it " + elem_type_name(it->second) + " (a value has one type)");
    }
  };
  auto add = [&](const onnx::ValueInfoProto& vi, const char* what) {
    if (vi.has_type() && vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0)
      declare(vi.name(), vi.type().tensor_type().elem_type(), what);
  };
  for (const auto& vi : g.input()) add(vi, "graph input");
  for (const auto& init : g.initializer())
    if (init.data_type() != 0) declare(init.name(), init.data_type(), "initializer");
  for (const auto& vi : g.output()) add(vi, "graph output");
  for (const auto& vi : g.value_info()) add(vi, "value_info");

  // An initializer's shape is its dims: a declaration of it with another rank
  // or another known dim contradicts it (the loader took the declaration, ONNX
  // the dims, and the model written out carried the contradiction).
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& init : g.initializer()) inits.emplace(init.name(), &init);
  auto dims_text = [](auto begin, auto end, auto value) {
    std::string s = "[";
    for (auto it = begin; it != end; ++it) s += (it == begin ? "" : ",") + value(*it);
    return s + "]";
  };
  auto check_shape = [&](const onnx::ValueInfoProto& vi, const char* what) {
    auto it = inits.find(vi.name());
    if (it == inits.end() || !vi.has_type() || !vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      return;
    const auto& shape = vi.type().tensor_type().shape();
    const auto& dims = it->second->dims();
    bool differ = shape.dim_size() != dims.size();
    for (int i = 0; !differ && i < shape.dim_size(); ++i)
      differ = shape.dim(i).has_dim_value() && shape.dim(i).dim_value() != dims.Get(i);
    if (!differ) return;
    auto dim_str = [](const onnx::TensorShapeProto::Dimension& d) {
      return d.has_dim_value() ? std::to_string(d.dim_value()) : d.has_dim_param() ? printable(d.dim_param()) : "?";
    };
    ctx.fail(std::string(what) + " " + quoted(vi.name()) + site.scope,
             "declares shape " + dims_text(shape.dim().begin(), shape.dim().end(), dim_str) +
                 ", but the initializer's dims are " +
                 dims_text(dims.begin(), dims.end(), [](int64_t d) { return std::to_string(d); }));
  };
  for (const auto& vi : g.input()) check_shape(vi, "graph input");
  for (const auto& vi : g.output()) check_shape(vi, "graph output");
  for (const auto& vi : g.value_info()) check_shape(vi, "value_info");
}

void validate_graph(Context& ctx, const onnx::GraphProto& g, const Scope* parent, const Site& outer, int64_t ir_version) {
  Scope s;
  s.parent = parent;
  DeclaredTypes types;
  types.parent = outer.types;
  collect_types(ctx, g, outer, types);
  Site site = outer;
  site.types = &types;
  collect_definitions(ctx, g, site, parent == nullptr, ir_version, s);
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    validate_node(ctx, n, i, site);
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string& in = n.input(k);
      if (!in.empty() && !s.has(in))
        ctx.fail(node_where(n, i, site), "input " + std::to_string(k) + " " + quoted(in) +
                                             " is not produced by any node, graph input or initializer" +
                                             (parent ? " (of this graph or the graphs around it)" : ""));
    }
    validate_subgraphs(ctx, n, i, s, site, ir_version);
  }
  for (int i = 0; i < g.output_size(); ++i) {
    const auto& out = g.output(i);
    const std::string who = quoted_or_index("graph output", out.name(), i) + site.scope;
    if (out.name().empty()) ctx.fail(who, "has no name");
    if (!s.has(out.name())) ctx.fail(who, "is not produced by any node, graph input or initializer");
    check_value_info(ctx, out, who);
  }
  for (const auto& vi : g.value_info())
    check_value_info(ctx, vi, "value_info " + quoted(vi.name()) + site.scope);
}

// Opset imports as a map; a version below 1, or one domain at two versions,
// makes the ops' meaning ambiguous.
OpsetMap read_opsets(const Context& ctx, const google::protobuf::RepeatedPtrField<onnx::OperatorSetIdProto>& imports,
                     const std::string& who) {
  OpsetMap m;
  for (const auto& op : imports) {
    const std::string d = canonical_domain(op.domain());
    const std::string shown = d.empty() ? "ai.onnx" : printable(d);
    if (op.version() < 1)
      ctx.fail(who, "domain '" + shown + "' has version " + std::to_string(op.version()) +
                        " (opset versions start at 1)");
    // Domains ONNX Runtime registers at version 1 alone: it refuses a model
    // that imports a later version, used or not.
    static const std::set<std::string> kVersionOne = {"com.microsoft", "com.microsoft.nchwc",
                                                      "com.microsoft.experimental", "ai.onnx.training",
                                                      "ai.onnx.preview.training"};
    if (op.version() > 1 && kVersionOne.count(d))
      ctx.fail(who, "domain '" + shown + "' has version " + std::to_string(op.version()) +
                        "; it has version 1 only (ONNX Runtime refuses any other)");
    auto [it, fresh] = m.emplace(d, op.version());
    if (!fresh && it->second != op.version())
      ctx.fail(who, "lists domain '" + shown + "' twice, at versions " + std::to_string(it->second) + " and " +
                        std::to_string(op.version()));
  }
  return m;
}

void validate_function(Context& ctx, const onnx::FunctionProto& f, int64_t ir_version) {
  const std::string qualified = (f.domain().empty() ? std::string() : f.domain() + ".") + f.name();
  const std::string who = "model-local function " + quoted(qualified);
  const OpsetMap opsets = read_opsets(ctx, f.opset_import(), who + ": opset_import");
  Site site;
  site.opsets = &opsets;
  site.function = &f;
  site.scope = " in " + who;
  Scope s;
  for (const std::string& in : f.input()) {
    if (in.empty()) ctx.fail(who, "has an input without a name");
    if (!s.defs.emplace(in, "function input").second) ctx.fail(who, "lists input " + quoted(in) + " twice");
  }
  for (int i = 0; i < f.node_size(); ++i) {
    const auto& n = f.node(i);
    for (const std::string& o : n.output())
      if (!o.empty() && !s.defs.emplace(o, "node").second)
        ctx.fail(node_where(n, i, site), "output " + quoted(o) + " is already defined");
  }
  for (int i = 0; i < f.node_size(); ++i) {
    const auto& n = f.node(i);
    validate_node(ctx, n, i, site);
    for (int k = 0; k < n.input_size(); ++k)
      if (!n.input(k).empty() && !s.has(n.input(k)))
        ctx.fail(node_where(n, i, site), "input " + std::to_string(k) + " " + quoted(n.input(k)) +
                                             " is not a function input or a node output of the body");
    validate_subgraphs(ctx, n, i, s, site, ir_version);
  }
  for (const std::string& out : f.output())
    if (out.empty() || !s.has(out)) ctx.fail(who, "output " + quoted(out) + " is not produced by its body");
}

}  // namespace
}  // namespace validation

void validate_model(const onnx::ModelProto& model, const std::string& label) {
  using namespace validation;
  Context ctx;
  ctx.label = label;
  const int64_t ir = model.ir_version();
  if (ir > kMaxKnownIrVersion)
    throw Error(label + ": ir_version " + std::to_string(ir) + " is newer than any ONNX release defines (up to " +
                std::to_string(kMaxKnownIrVersion) + ")");
  if (ir < 3)
    throw Error(label + ": ir_version " + std::to_string(ir) +
                " predates opset imports (IR 3); fuseopt reads IR version 3 and later");
  if (model.opset_import_size() == 0) throw Error(label + ": the model imports no opset (IR 3 and later must)");
  const OpsetMap opsets = read_opsets(ctx, model.opset_import(), "opset_import");
  for (const auto& f : model.functions()) {
    if (f.name().empty()) ctx.fail("a model-local function", "has no name");
    ctx.functions.emplace(std::make_pair(canonical_domain(f.domain()), f.name()), &f);
  }
  Site site;
  site.opsets = &opsets;
  validate_graph(ctx, model.graph(), nullptr, site, ir);
  for (const auto& f : model.functions()) validate_function(ctx, f, ir);

  if (!ctx.unknown_ops.empty()) {
    std::string list;
    for (const auto& w : ctx.unknown_ops) list += (list.empty() ? "" : "; ") + w;
    const size_t k = ctx.unknown_ops.size();
    throw Error(label + ": " + (k == 1 ? list : std::to_string(k) + " nodes use unknown operators: " + list));
  }
  for (const auto& [key, count] : ctx.unchecked) {
    const auto& [domain, op] = key;
    ctx.warn_once(label + ": " + std::to_string(count) + (count == 1 ? " node" : " nodes") + " of " + printable(domain) +
                  "." + printable(op) + " not checked: fuseopt has no schemas for domain " + quoted(domain) +
                  " (kept as they are)");
  }
  for (const auto& w : ctx.warnings) spdlog::warn("{}", w);
}

void validate_model_bytes(const std::string& bytes, const std::string& label) {
  onnx::ModelProto m;
  FUSE_CHECK(m.ParseFromString(bytes), label << ": not a valid ONNX model (protobuf parse failed)");
  check_unknown_fields(m, label);
  validate_model(m, label);
}

}  // namespace fuseopt
