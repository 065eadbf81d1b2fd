// Signatures of the ONNX domains: libonnx's schema registry (OpSchemaRegistry)
// converted once into OpSignatures, then our rows for the versions after what
// the installed libonnx knows (schema_newer_opsets.cc). A newer libonnx wins
// over our rows for every opset it covers itself.
#include <onnx/defs/schema.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "onnx_io/op_schemas.h"
#include "onnx_io/onnx_io.h"

namespace fuseopt {

namespace {

constexpr int64_t kMaxKnownMlOpset = 5;

// Ops whose schema accepts attributes it does not declare (OpSchema's
// AllowUncheckedAttributes, which libonnx does not expose): found by probing
// OpSchema::Verify with an undeclared attribute over every schema, and
// confirmed against the onnx package's checker by the schema test.
const std::set<std::pair<std::string, std::string>> kAcceptsAnyAttribute = {{"", "LayerNormalization"}};

// Deprecated versions that are still run (ONNX Runtime runs them, exporters
// wrote them before the deprecation): a warning instead of an error.
struct StillRun {
  const char* domain;
  const char* op;
  int since;
  const char* why;
};
const StillRun kStillRun[] = {
    {"", "GroupNormalization", 18,
     "is deprecated since ONNX 1.16 (its scale and bias are per group; opset 21's are per channel) and the ONNX "
     "checker refuses it; ONNX Runtime and fuseopt run it as opset 18 defines it"},
};

OpSignature::Option option_of(onnx::OpSchema::FormalParameterOption o) {
  switch (o) {
    case onnx::OpSchema::Single: return OpSignature::Option::Single;
    case onnx::OpSchema::Optional: return OpSignature::Option::Optional;
    case onnx::OpSchema::Variadic: return OpSignature::Option::Variadic;
  }
  return OpSignature::Option::Single;
}

// "tensor(float16)" -> FLOAT16's number; 0 for anything else (seq(...), map(...)).
int tensor_type_of(const std::string& type_str) {
  const std::string pre = "tensor(";
  if (type_str.rfind(pre, 0) != 0 || type_str.back() != ')') return 0;
  std::string name = type_str.substr(pre.size(), type_str.size() - pre.size() - 1);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  onnx::TensorProto_DataType t;
  return onnx::TensorProto_DataType_Parse(name, &t) ? static_cast<int>(t) : 0;
}

std::vector<OpSignature::Formal> formals_of(const std::vector<onnx::OpSchema::FormalParameter>& fs) {
  std::vector<OpSignature::Formal> out;
  for (const auto& f : fs) {
    OpSignature::Formal r;
    r.name = f.GetName();
    r.type_str = f.GetTypeStr();
    r.homogeneous = f.GetIsHomogeneous();
    r.option = option_of(f.GetOption());
    if (r.option == OpSignature::Option::Variadic) r.min_arity = f.GetMinArity();
    out.push_back(r);
  }
  return out;
}

OpSignature from_libonnx(const onnx::OpSchema& s, int64_t libonnx_max) {
  OpSignature r;
  r.domain = canonical_domain(s.domain());
  r.op = s.Name();
  r.since_version = s.since_version();
  r.inputs = formals_of(s.inputs());
  r.outputs = formals_of(s.outputs());
  finish_signature(r);
  // libonnx's own counts are the reference; they agree with the formals (ONNX
  // derives them the same way) except where a schema sets them by hand.
  r.min_inputs = s.min_input();
  r.max_inputs = s.max_input();
  r.min_outputs = s.min_output();
  r.max_outputs = s.max_output();
  for (const auto& [name, a] : s.attributes())
    r.attributes[name] = OpSignature::AttrSpec{static_cast<AttrType>(a.type), a.required};
  r.deprecated = s.Deprecated();
  for (const auto& c : s.typeConstraintParams()) {
    std::vector<int>& allowed = r.type_constraints[c.type_param_str];
    for (const std::string& t : c.allowed_type_strs)
      if (int et = tensor_type_of(t)) allowed.push_back(et);
  }
  // A formal typed "tensor(int64)" itself: a constraint of its own name.
  for (const auto* fs : {&r.inputs, &r.outputs})
    for (const auto& f : *fs)
      if (!r.type_constraints.count(f.type_str))
        if (int et = tensor_type_of(f.type_str)) r.type_constraints[f.type_str] = {et};
  r.types_exact_until = libonnx_max;
  return r;
}

// Our opset-18 rows (schema_newer_opsets.cc) have no types: each formal takes
// its type from the version before it, by name (Split's split stays
// tensor(int64), a reduction's data T), and the reductions' new axes input is
// tensor(int64). The sets stay those of the earlier version, so above
// libonnx's opsets only "one variable, one type" and the integer formals are
// checked (validate_node.cc). Later rows are left untyped: opset 19 and after
// changed formals' types (QuantizeLinear's y_scale, tensor(float) -> T1).
void inherit_types(OpSignature& v, const OpSignature& prev) {
  if (v.since_version != 18 || !v.type_constraints.empty() || prev.type_constraints.empty()) return;
  const bool reduction = v.op.rfind("Reduce", 0) == 0;
  auto fill = [&](std::vector<OpSignature::Formal>& fs, const std::vector<OpSignature::Formal>& before) {
    for (auto& f : fs) {
      if (!f.type_str.empty()) continue;
      for (const auto& b : before)
        if (b.name == f.name) {
          f.type_str = b.type_str;
          f.homogeneous = b.homogeneous;
        }
      if (f.type_str.empty() && reduction && f.name == "axes") f.type_str = "tensor(int64)";
      if (f.type_str.empty()) continue;
      if (auto c = prev.type_constraints.find(f.type_str); c != prev.type_constraints.end())
        v.type_constraints[f.type_str] = c->second;
      else if (int et = tensor_type_of(f.type_str))
        v.type_constraints[f.type_str] = {et};
    }
  };
  fill(v.inputs, prev.inputs);
  fill(v.outputs, prev.outputs);
  v.types_exact_until = prev.types_exact_until;
}

// domain -> op -> versions in ascending since_version.
using Index = std::map<std::string, std::map<std::string, std::vector<OpSignature>>>;

Index build_index() {
  Index idx;
  std::map<std::string, int> libonnx_max;  // newest opset per domain libonnx itself knows
  for (const auto& [domain, range] : onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map())
    libonnx_max[canonical_domain(domain)] = range.second;
  for (const onnx::OpSchema& s : onnx::OpSchemaRegistry::get_all_schemas_with_history()) {
    const std::string d = canonical_domain(s.domain());
    if (!is_onnx_domain(d)) continue;
    idx[d][s.Name()].push_back(from_libonnx(s, libonnx_max[d]));
  }
  for (const OpSignature& s : newer_onnx_signatures())
    if (s.since_version > libonnx_max[s.domain]) idx[s.domain][s.op].push_back(s);
  for (auto& [domain, ops] : idx) {
    for (auto& [op, versions] : ops) {
      std::sort(versions.begin(), versions.end(),
                [](const OpSignature& a, const OpSignature& b) { return a.since_version < b.since_version; });
      for (size_t k = 1; k < versions.size(); ++k) inherit_types(versions[k], versions[k - 1]);
      for (OpSignature& v : versions) {
        v.any_attributes = kAcceptsAnyAttribute.count({domain, op}) > 0;
        for (const StillRun& k : kStillRun)
          if (domain == k.domain && op == k.op && v.since_version == k.since && v.deprecated) {
            v.deprecated = false;
            v.deprecation_warning = k.why;
          }
      }
    }
  }
  return idx;
}

const Index& index() {
  static const Index idx = build_index();  // thread-safe (a function-local static)
  return idx;
}

const std::vector<OpSignature>* versions_of(const std::string& domain, const std::string& op) {
  const Index& idx = index();
  auto d = idx.find(canonical_domain(domain));
  if (d == idx.end()) return nullptr;
  auto o = d->second.find(op);
  return o == d->second.end() ? nullptr : &o->second;
}

}  // namespace

bool is_onnx_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx" || domain == "ai.onnx.ml";
}

std::string canonical_domain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

int64_t newest_known_opset(const std::string& domain) {
  const std::string d = canonical_domain(domain);
  if (d.empty()) return kMaxKnownOpset;
  if (d == "ai.onnx.ml") return kMaxKnownMlOpset;
  if (d == "fuseopt") return 1;
  return 0;
}

const OpSignature* onnx_op_signature(const std::string& domain, const std::string& op, int64_t opset) {
  const std::vector<OpSignature>* vs = versions_of(domain, op);
  if (!vs) return nullptr;
  const OpSignature* best = nullptr;
  for (const OpSignature& v : *vs)
    if (v.since_version <= opset) best = &v;
  return best;
}

int onnx_op_first_version(const std::string& domain, const std::string& op) {
  const std::vector<OpSignature>* vs = versions_of(domain, op);
  return vs && !vs->empty() ? vs->front().since_version : 0;
}

std::vector<std::string> onnx_op_names(const std::string& domain) {
  std::vector<std::string> out;
  const Index& idx = index();
  auto d = idx.find(canonical_domain(domain));
  if (d != idx.end())
    for (const auto& [op, versions] : d->second) out.push_back(op);
  return out;
}

}  // namespace fuseopt
