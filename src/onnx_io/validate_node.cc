// One node against its operator's signature (validate_node.h).
#include "onnx_io/validate_node.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "onnx_io/function_bodies.h"
#include "onnx_io/op_schemas.h"
#include "onnx_io/validate_attribute_values.h"
#include "onnx_io/validate_tensor.h"
#include "util/error.h"

namespace fuseopt::validation {

namespace {

using AP = onnx::AttributeProto;

std::string op_text(const onnx::NodeProto& n) {
  const std::string d = canonical_domain(n.domain());
  return printable(d.empty() ? n.op_type() : d + "." + n.op_type());
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The attribute names a model-local function declares: `attribute`, and the
// names in `attribute_proto` (field 11, IR 9: attributes with defaults), which
// this build's ONNX classes keep as an unknown field.
std::set<std::string> function_attribute_names(const onnx::FunctionProto& f) {
  std::set<std::string> names(f.attribute().begin(), f.attribute().end());
  const auto& unknown = f.GetReflection()->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& field = unknown.field(i);
    if (field.number() != 11 || field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    AP a;
    if (a.ParseFromString(field.length_delimited())) names.insert(a.name());
  }
  return names;
}

// Every value field an attribute carries, with the type it belongs to.
std::vector<std::pair<const char*, AP::AttributeType>> value_fields(const AP& a) {
  std::vector<std::pair<const char*, AP::AttributeType>> f;
  if (a.has_f()) f.emplace_back("f", AP::FLOAT);
  if (a.has_i()) f.emplace_back("i", AP::INT);
  if (a.has_s()) f.emplace_back("s", AP::STRING);
  if (a.has_t()) f.emplace_back("t", AP::TENSOR);
  if (a.has_g()) f.emplace_back("g", AP::GRAPH);
  if (a.has_sparse_tensor()) f.emplace_back("sparse_tensor", AP::SPARSE_TENSOR);
  if (a.has_tp()) f.emplace_back("tp", AP::TYPE_PROTO);
  if (a.floats_size()) f.emplace_back("floats", AP::FLOATS);
  if (a.ints_size()) f.emplace_back("ints", AP::INTS);
  if (a.strings_size()) f.emplace_back("strings", AP::STRINGS);
  if (a.tensors_size()) f.emplace_back("tensors", AP::TENSORS);
  if (a.graphs_size()) f.emplace_back("graphs", AP::GRAPHS);
  if (a.sparse_tensors_size()) f.emplace_back("sparse_tensors", AP::SPARSE_TENSORS);
  if (a.type_protos_size()) f.emplace_back("type_protos", AP::TYPE_PROTOS);
  return f;
}

std::string tensor_label(const onnx::TensorProto& t) {
  return t.name().empty() ? std::string("its tensor") : "tensor " + quoted(t.name());
}

// What ONNX's checker asks of any attribute, whatever the op: a name, a type
// tag, at most one value field and that of the tag's type, well-formed
// tensors, and attribute references only inside a function body.
void check_attribute(const Context& ctx, const AP& a, const std::string& where, const Site& site) {
  if (a.name().empty()) ctx.fail(where, "an attribute has no name");
  const std::string an = "attribute " + quoted(a.name());
  const auto fields = value_fields(a);
  if (fields.size() > 1)
    ctx.fail(where, an + " has two value fields, " + fields[0].first + " and " + fields[1].first + " (ONNX allows one)");
  if (a.type() == AP::UNDEFINED) ctx.fail(where, an + " has no type");
  const AttrType tag = static_cast<AttrType>(a.type());
  if (!fields.empty() && fields[0].second != a.type())
    ctx.fail(where, an + " is tagged " + attr_type_name(tag) + " but carries a " +
                        attr_type_name(static_cast<AttrType>(fields[0].second)) + " value (field " + fields[0].first + ")");
  if (!a.ref_attr_name().empty()) {
    if (!site.function) ctx.fail(where, an + " refers to " + quoted(a.ref_attr_name()) + ", but only a function body may refer to attributes");
    if (!fields.empty()) ctx.fail(where, an + " refers to " + quoted(a.ref_attr_name()) + " and also carries a value");
    // A reference to an attribute the function does not declare is legal ONNX (it
    // resolves to nothing, as for a caller that leaves a declared one out).
    return;
  }
  // Scalars may lack their field (a proto3 writer omits 0 and ""); the rest may not.
  if (fields.empty() && (a.type() == AP::TENSOR || a.type() == AP::GRAPH || a.type() == AP::SPARSE_TENSOR ||
                         a.type() == AP::TYPE_PROTO))
    ctx.fail(where, an + " is " + attr_type_name(tag) + " but carries no value");
  if (a.has_t())
    if (std::string p = tensor_proto_problem(a.t()); !p.empty()) ctx.fail(where, an + ": " + tensor_label(a.t()) + " " + p);
  for (int i = 0; i < a.tensors_size(); ++i)
    if (std::string p = tensor_proto_problem(a.tensors(i)); !p.empty())
      ctx.fail(where, an + ": tensor " + std::to_string(i) + " " + p);
  if (a.has_sparse_tensor())
    if (std::string p = sparse_tensor_proto_problem(a.sparse_tensor()); !p.empty()) ctx.fail(where, an + " " + p);
  for (int i = 0; i < a.sparse_tensors_size(); ++i)
    if (std::string p = sparse_tensor_proto_problem(a.sparse_tensors(i)); !p.empty())
      ctx.fail(where, an + ": sparse tensor " + std::to_string(i) + " " + p);
}

// Constant: the value is exactly one of its attributes (ONNX's inference
// rule; the schema makes each of them optional, so check_against cannot).
void check_constant(const Context& ctx, const onnx::NodeProto& n, const std::string& where) {
  static const std::set<std::string> kValues = {"value",        "value_float",  "value_floats", "value_int",
                                                "value_ints",   "value_string", "value_strings", "sparse_value"};
  std::vector<std::string> given;
  for (const AP& a : n.attribute())
    if (kValues.count(a.name())) given.push_back(a.name());
  if (given.empty())
    ctx.fail(where, "a Constant needs exactly one of value, value_float(s), value_int(s), value_string(s), "
                    "sparse_value; it has none");
  if (given.size() > 1) ctx.fail(where, "a Constant needs exactly one value attribute; it has " + join(given));
}

// Cast's 'to' names a type ONNX defines (the schema only says it is an INT).
void check_cast_to(const Context& ctx, const onnx::NodeProto& n, const std::string& where) {
  for (const AP& a : n.attribute())
    if (a.name() == "to" && (a.i() <= 0 || a.i() > kMaxOnnxDataType))
      ctx.fail(where, "attribute 'to' is " + std::to_string(a.i()) + ", which is not an ONNX element type");
}

// Int attributes that are flags: 0 or 1 only. ONNX's schema says INT, ONNX
// Runtime refuses anything else ("attribute reverse can only be 0 or 1":
// mutate_models.py seed 3 m135, CumSum reverse = 65536). keepdims is held to
// 0/1 by shape inference (reduce.cc).
void check_flags(const Context& ctx, const onnx::NodeProto& n, const std::string& where) {
  static const std::map<std::string, std::set<std::string>> kFlags = {{"CumSum", {"exclusive", "reverse"}},
                                                                              {"CumProd", {"exclusive", "reverse"}}};
  auto op = kFlags.find(n.op_type());
  if (op == kFlags.end()) return;
  for (const AP& a : n.attribute())
    if (a.type() == AP::INT && op->second.count(a.name()) && a.i() != 0 && a.i() != 1)
      ctx.fail(where, "attribute " + quoted(a.name()) + " is " + std::to_string(a.i()) + "; it is 0 or 1");
}

void check_against(const Context& ctx, const onnx::NodeProto& n, const OpSignature& sig, const std::string& where) {
  const int ni = n.input_size(), no = n.output_size();
  if (ni < sig.min_inputs || ni > sig.max_inputs)
    ctx.fail(where, std::to_string(ni) + (ni == 1 ? " input" : " inputs") + ", the schema allows " +
                        count_range(sig.min_inputs, sig.max_inputs));
  if (no < sig.min_outputs || no > sig.max_outputs)
    ctx.fail(where, std::to_string(no) + (no == 1 ? " output" : " outputs") + ", the schema allows " +
                        count_range(sig.min_outputs, sig.max_outputs));
  for (int i = 0; i < ni; ++i) {
    const OpSignature::Formal* f = sig.input_formal(i);
    if (!f || !n.input(i).empty()) continue;
    if (f->option == OpSignature::Option::Single)
      ctx.fail(where, "input " + std::to_string(i) + " ('" + f->name + "') is required but its name is empty");
    if (f->option == OpSignature::Option::Variadic)
      ctx.fail(where, "input " + std::to_string(i) + " is empty; the variadic input '" + f->name +
                          "' cannot leave out values");
  }
  for (int i = 0; i < no; ++i) {
    const OpSignature::Formal* f = sig.output_formal(i);
    if (f && n.output(i).empty() && f->option == OpSignature::Option::Single)
      ctx.fail(where, "output " + std::to_string(i) + " ('" + f->name + "') is required but its name is empty");
  }
  std::set<std::string> seen;
  for (const AP& a : n.attribute()) {
    const auto spec = sig.attributes.find(a.name());
    if (spec == sig.attributes.end()) {
      // "__name": implementation details ONNX's checker ignores too.
      if (sig.any_attributes || a.name().rfind("__", 0) == 0) continue;
      std::vector<std::string> names;
      for (const auto& [name, s] : sig.attributes) names.push_back(name);
      ctx.fail(where, "attribute " + quoted(a.name()) + " is not one of " + printable(n.op_type()) + "'s" +
                          (names.empty() ? " (it has none)" : " (" + join(names) + ")"));
    }
    if (static_cast<AttrType>(a.type()) != spec->second.type)
      ctx.fail(where, "attribute " + quoted(a.name()) + " is " + attr_type_name(static_cast<AttrType>(a.type())) +
                          "; the schema wants " + attr_type_name(spec->second.type));
    seen.insert(a.name());
  }
  for (const auto& [name, spec] : sig.attributes)
    if (spec.required && !seen.count(name)) ctx.fail(where, "required attribute '" + name + "' is missing");
}

const char* type_name(int et) {
  const std::string& n = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(et));
  return n.empty() ? "?" : n.c_str();
}

std::string type_list(const std::vector<int>& ts) {
  std::vector<std::string> names;
  for (int t : ts) names.push_back(type_name(t));
  return join(names);
}

// The declared element types of a node's inputs and outputs against the
// schema's type constraints, where both are known (what ONNX's inference
// checks first; type_constraint_problem says what is checked).
void check_types(const Context& ctx, const onnx::NodeProto& n, const OpSignature& sig, int64_t opset,
                 const std::string& where, const Site& site) {
  if (!site.types || sig.type_constraints.empty()) return;
  std::vector<TypedValue> in, out;
  for (const std::string& name : n.input()) in.push_back({name, name.empty() ? 0 : site.types->find(name)});
  for (const std::string& name : n.output()) out.push_back({name, name.empty() ? 0 : site.types->find(name)});
  if (std::string p = type_constraint_problem(sig, n.op_type(), opset, in, out); !p.empty()) ctx.fail(where, p);
}

// A call of a model-local function: no more inputs/outputs than it declares,
// only attributes it declares.
void check_call(const Context& ctx, const onnx::NodeProto& n, const onnx::FunctionProto& f, const std::string& where) {
  if (n.input_size() > f.input_size())
    ctx.fail(where, std::to_string(n.input_size()) + " inputs, the model-local function declares " +
                        std::to_string(f.input_size()));
  if (n.output_size() > f.output_size())
    ctx.fail(where, std::to_string(n.output_size()) + " outputs, the model-local function declares " +
                        std::to_string(f.output_size()));
  const std::set<std::string> declared = function_attribute_names(f);
  for (const AP& a : n.attribute())
    if (!declared.count(a.name()) && a.name().rfind("__", 0) != 0)
      ctx.fail(where, "attribute " + quoted(a.name()) + " is not one the model-local function declares");
}

const onnx::FunctionProto* local_function(const Context& ctx, const std::string& domain, const std::string& op) {
  auto it = ctx.functions.find({domain, op});
  return it == ctx.functions.end() ? nullptr : it->second;
}

}  // namespace

std::string count_range(int lo, int hi) {
  if (hi == std::numeric_limits<int>::max()) return "at least " + std::to_string(lo);
  if (lo == hi) return std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

void Context::fail(const std::string& where, const std::string& what) const {
  throw Error(label + ": " + where + ": " + what);
}

void Context::warn_once(const std::string& text) {
  for (const auto& w : warnings)
    if (w == text) return;
  warnings.push_back(text);
}

std::string node_where(const onnx::NodeProto& n, int index, const Site& site) {
  std::string s = n.name().empty() ? "node #" + std::to_string(index) : "node " + quoted(n.name());
  s += " (" + (n.op_type().empty() ? std::string("no op_type") : op_text(n));
  auto it = site.opsets->find(canonical_domain(n.domain()));
  if (it != site.opsets->end()) s += ", opset " + std::to_string(it->second);
  return s + ")" + site.scope;
}

void validate_node(Context& ctx, const onnx::NodeProto& n, int index, const Site& site) {
  const std::string where = node_where(n, index, site);
  if (n.op_type().empty()) ctx.fail(where, "the node has no op_type");
  for (const AP& a : n.attribute()) check_attribute(ctx, a, where, site);
  {
    std::set<std::string> names;
    for (const AP& a : n.attribute())
      if (!names.insert(a.name()).second) ctx.fail(where, "attribute " + quoted(a.name()) + " is given twice");
  }
  const std::string domain = canonical_domain(n.domain());
  auto imported = site.opsets->find(domain);
  if (imported == site.opsets->end())
    ctx.fail(where, std::string(site.function ? "the function" : "the model") + " imports no opset for domain '" +
                        printable(domain.empty() ? std::string("ai.onnx") : domain) + "'");
  const int64_t opset = imported->second;

  if (is_onnx_domain(domain)) {
    const std::string dname = domain.empty() ? "default-domain" : domain;
    if (opset > newest_known_opset(domain))
      ctx.fail(where, dname + " opset " + std::to_string(opset) + " is newer than this fuseopt knows (up to " +
                          std::to_string(newest_known_opset(domain)) + ")");
    const OpSignature* sig = onnx_op_signature(domain, n.op_type(), opset);
    if (!sig) {
      const int first = onnx_op_first_version(domain, n.op_type());
      if (first == 0) {
        ctx.unknown_ops.push_back(where + ": " + printable(n.op_type()) + " is not an " +
                                  (domain.empty() ? std::string("ONNX") : printable(domain)) + " operator");
        return;
      }
      ctx.fail(where, printable(n.op_type()) + " does not exist at opset " + std::to_string(opset) + " (ONNX added it in opset " +
                          std::to_string(first) + ")");
    }
    if (sig->deprecated)
      ctx.fail(where, n.op_type() + " is deprecated from opset " + std::to_string(sig->since_version) +
                          " on; ONNX Runtime and the ONNX checker refuse it");
    if (!sig->deprecation_warning.empty())
      ctx.warn_once(ctx.label + ": " + n.op_type() + "-" + std::to_string(sig->since_version) + " " +
                    sig->deprecation_warning);
    check_against(ctx, n, *sig, where);
    if (domain.empty() && n.op_type() == "Constant") check_constant(ctx, n, where);
    if (domain.empty() && n.op_type() == "Cast") check_cast_to(ctx, n, where);
    if (domain.empty()) check_flags(ctx, n, where);
    if (domain.empty())
      if (std::string p = enum_attribute_problem(n); !p.empty()) ctx.fail(where, p);
    check_types(ctx, n, *sig, opset, where, site);
    return;
  }
  if (domain == "fuseopt") {
    if (opset != newest_known_opset(domain))
      ctx.fail(where, "fuseopt opset " + std::to_string(opset) + " is not one this fuseopt knows (its ops are version " +
                          std::to_string(newest_known_opset(domain)) + ")");
    if (const OpSignature* sig = fuseopt_op_signature(n.op_type())) {
      check_against(ctx, n, *sig, where);
      return;
    }
    if (const onnx::FunctionProto* f = local_function(ctx, domain, n.op_type())) {
      check_call(ctx, n, *f, where);
      return;
    }
    // An op with a function body but no row in schema_fuseopt.cc yet (a test
    // flags it): ours, so it passes; its arity is not checked.
    if (find_function_body(domain, n.op_type())) return;
    ctx.fail(where, printable(n.op_type()) + " is not a fuseopt op (they are: " + join(fuseopt_op_names()) + ")");
  }
  if (const onnx::FunctionProto* f = local_function(ctx, domain, n.op_type())) {
    check_call(ctx, n, *f, where);
    return;
  }
  ++ctx.unchecked[{domain, n.op_type()}];
}

}  // namespace fuseopt::validation

namespace fuseopt {

namespace {
const std::set<int> kIndexTypes = {onnx::TensorProto::INT8,   onnx::TensorProto::UINT8,  onnx::TensorProto::INT16,
                                   onnx::TensorProto::UINT16, onnx::TensorProto::INT32,  onnx::TensorProto::UINT32,
                                   onnx::TensorProto::INT64,  onnx::TensorProto::UINT64, onnx::TensorProto::BOOL};
// The floating element types by number (ONNX 1.23's TensorProto: FLOAT, FLOAT16, DOUBLE,
// BFLOAT16, the float8s 17-20, FLOAT4E2M1 23, FLOAT8E8M0 24; not all are in libonnx 1.12's enum).
bool is_float_type(int et) { return et == 1 || et == 10 || et == 11 || et == 16 || (et >= 17 && et <= 20) || et >= 23; }
// The default-domain opset in which ONNX's operators first took an element type: the float8s
// (17-20) came with opset 19, INT4/UINT4 with 21, FLOAT4E2M1 with 23, FLOAT8E8M0 with 24, the
// 2-bit ints with 25 and FLOAT6 with 28; the older types were there from the start.
int64_t first_opset_of_type(int et) {
  if (et >= 17 && et <= 20) return 19;
  if (et == 21 || et == 22) return 21;
  if (et == 23) return 23;
  if (et == 24) return 24;
  if (et == 25 || et == 26) return 25;  // UINT2, INT2
  if (et > 26) return 28;               // FLOAT6E2M3, FLOAT6E3M2 (Cast, QuantizeLinear 28)
  return 1;
}
}  // namespace

std::string type_constraint_problem(const OpSignature& sig, const std::string& op_type, int64_t opset,
                                    const std::vector<TypedValue>& inputs, const std::vector<TypedValue>& outputs) {
  if (sig.type_constraints.empty()) return "";
  const bool exact = opset <= sig.types_exact_until;
  std::map<std::string, std::pair<int, std::string>> bound;  // variable -> (type, which value set it)
  std::string problem;
  auto check = [&](const TypedValue& v, const OpSignature::Formal* f, const std::string& what) {
    if (!problem.empty() || v.name.empty() || !f || v.elem_type == 0) return;
    const int et = v.elem_type;
    auto c = sig.type_constraints.find(f->type_str);
    if (c == sig.type_constraints.end() || c->second.empty()) return;
    const std::string who = what + " " + quoted(v.name);
    const bool variable = f->type_str.rfind("tensor(", 0) != 0;
    // No operator of an opset takes an element type ONNX added later (mutate_models.py seed 40
    // m625: a float8 attention_mask read by Shape and Cast at opset 18 was written back; the
    // checker refuses it). Above libonnx's opsets the sets below cannot say so themselves.
    if (sig.domain.empty() && opset > 0 && et >= 17 && first_opset_of_type(et) > opset) {
      problem = who + " is " + onnx_dtype_name(et) + ", an element type ONNX's operators take from opset " +
                std::to_string(first_opset_of_type(et)) + " on; this is opset " + std::to_string(opset);
      return;
    }
    // A formal of one integer or bool type (Reshape's shape, Unsqueeze's axes,
    // Where's condition B, Shape's output T1) keeps it in every later opset; the
    // float ones did not (DequantizeLinear-19's y became T2), so above libonnx's
    // opsets only these are held to their set.
    const bool fixed_index = c->second.size() == 1 && kIndexTypes.count(c->second[0]);
    // A set of floating types only stays one through opset 23: later versions added
    // float types (bfloat16, float8, float4), never an integer, bool or string (checked
    // against the onnx package's schemas; mutate_models.py seed 19 m189: an int64
    // LayerNormalization X at opset 18 came out invalid).
    const bool float_only = std::all_of(c->second.begin(), c->second.end(), is_float_type);
    if (!exact && !fixed_index && float_only && !is_float_type(et)) {
      problem = who + " is " + validation::type_name(et) + ", which " + printable(op_type) + "'s " +
                (variable ? f->type_str : "'" + f->name + "'") + " does not allow (it takes floating types only)";
      return;
    }
    // A set of integer types only gained integers and the 8- and 4-bit floats of the
    // quantization ops (QuantizeLinear's y, QLinearMatMul's a), never float32/16/64,
    // bfloat16, bool or string (the same check; mutate_models.py seed 20 m203: a float
    // Gather index at opset 18 came out invalid).
    const bool int_only = std::all_of(c->second.begin(), c->second.end(), [](int t) { return kIndexTypes.count(t) && t != onnx::TensorProto::BOOL; });
    const bool narrow = kIndexTypes.count(et) || (et >= 17 && et <= 20) || et >= 21;  // float8s, int4/uint4 (21/22), float4...
    if (!exact && !fixed_index && int_only && (!narrow || et == onnx::TensorProto::BOOL)) {
      problem = who + " is " + validation::type_name(et) + ", which " + printable(op_type) + "'s " +
                (variable ? f->type_str : "'" + f->name + "'") + " does not allow (it takes integer types)";
      return;
    }
    if ((exact || fixed_index) && std::find(c->second.begin(), c->second.end(), et) == c->second.end()) {
      problem = who + " is " + validation::type_name(et) + ", which " + printable(op_type) + "'s " +
                (variable ? f->type_str + " does not allow (it allows " + validation::type_list(c->second) + ")"
                          : "'" + f->name + "' does not allow (it takes " + validation::type_list(c->second) + ")");
      return;
    }
    if (!variable || (f->option == OpSignature::Option::Variadic && !f->homogeneous)) return;
    auto [it, fresh] = bound.emplace(f->type_str, std::make_pair(et, who));
    if (!fresh && it->second.first != et)
      problem = who + " is " + validation::type_name(et) + " but " + it->second.second + " is " + validation::type_name(it->second.first) +
                "; both are " + printable(op_type) + "'s " + f->type_str + ", one type";
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    check(inputs[i], sig.input_formal(static_cast<int>(i)), "input " + std::to_string(i));
  for (size_t i = 0; i < outputs.size(); ++i)
    check(outputs[i], sig.output_formal(static_cast<int>(i)), "output " + std::to_string(i));
  return problem;
}

}  // namespace fuseopt
