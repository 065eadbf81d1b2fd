#include "onnx_io/op_signature.h"

#include <limits>
#include <sstream>

#include "util/error.h"

namespace fuseopt {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::Undefined: return "UNDEFINED";
    case AttrType::Float: return "FLOAT";
    case AttrType::Int: return "INT";
    case AttrType::String: return "STRING";
    case AttrType::Tensor: return "TENSOR";
    case AttrType::Graph: return "GRAPH";
    case AttrType::Floats: return "FLOATS";
    case AttrType::Ints: return "INTS";
    case AttrType::Strings: return "STRINGS";
    case AttrType::Tensors: return "TENSORS";
    case AttrType::Graphs: return "GRAPHS";
    case AttrType::SparseTensor: return "SPARSE_TENSOR";
    case AttrType::SparseTensors: return "SPARSE_TENSORS";
    case AttrType::TypeProto: return "TYPE_PROTO";
    case AttrType::TypeProtos: return "TYPE_PROTOS";
  }
  return "UNKNOWN";
}

namespace {

const OpSignature::Formal* formal_at(const std::vector<OpSignature::Formal>& fs, int i) {
  if (i < 0) return nullptr;
  if (static_cast<size_t>(i) < fs.size()) return &fs[static_cast<size_t>(i)];
  if (!fs.empty() && fs.back().option == OpSignature::Option::Variadic) return &fs.back();
  return nullptr;
}

// ONNX's arity rule (OpSchema::Finalize): the minimum runs up to the last
// single formal (optional ones before it count: they must be written, empty);
// a variadic tail adds its minimum arity and lifts the maximum.
void counts(const std::vector<OpSignature::Formal>& fs, int& lo, int& hi) {
  lo = hi = 0;
  for (const auto& f : fs) {
    switch (f.option) {
      case OpSignature::Option::Single: lo = ++hi; break;
      case OpSignature::Option::Optional: ++hi; break;
      case OpSignature::Option::Variadic:
        lo = hi + f.min_arity;
        hi = std::numeric_limits<int>::max();
        return;
    }
  }
}

std::vector<OpSignature::Formal> parse_formals(const std::string& spec, const std::string& who) {
  std::vector<OpSignature::Formal> out;
  std::istringstream in(spec);
  std::string tok;
  while (in >> tok) {
    OpSignature::Formal f;
    const size_t star = tok.find('*');
    if (star != std::string::npos) {
      f.option = OpSignature::Option::Variadic;
      const std::string arity = tok.substr(star + 1);
      FUSE_CHECK(arity.empty() || arity == "0", "signature of " << who << ": bad variadic '" << tok << "'");
      f.min_arity = arity.empty() ? 1 : 0;
      tok = tok.substr(0, star);
    } else if (!tok.empty() && tok.back() == '?') {
      f.option = OpSignature::Option::Optional;
      tok.pop_back();
    }
    FUSE_CHECK(!tok.empty(), "signature of " << who << ": a formal without a name in '" << spec << "'");
    FUSE_CHECK(out.empty() || out.back().option != OpSignature::Option::Variadic,
               "signature of " << who << ": only the last formal may be variadic");
    f.name = tok;
    out.push_back(f);
  }
  return out;
}

AttrType parse_attr_type(const std::string& code, const std::string& who) {
  static const std::map<std::string, AttrType> codes = {
      {"f", AttrType::Float},          {"i", AttrType::Int},           {"s", AttrType::String},
      {"t", AttrType::Tensor},         {"g", AttrType::Graph},         {"fs", AttrType::Floats},
      {"is", AttrType::Ints},          {"ss", AttrType::Strings},      {"ts", AttrType::Tensors},
      {"gs", AttrType::Graphs},        {"sp", AttrType::SparseTensor}, {"sps", AttrType::SparseTensors},
      {"tp", AttrType::TypeProto},     {"tps", AttrType::TypeProtos},
  };
  auto it = codes.find(code);
  FUSE_CHECK(it != codes.end(), "signature of " << who << ": unknown attribute type code '" << code << "'");
  return it->second;
}

}  // namespace

const OpSignature::Formal* OpSignature::input_formal(int i) const { return formal_at(inputs, i); }
const OpSignature::Formal* OpSignature::output_formal(int i) const { return formal_at(outputs, i); }

void finish_signature(OpSignature& s) {
  counts(s.inputs, s.min_inputs, s.max_inputs);
  counts(s.outputs, s.min_outputs, s.max_outputs);
}

OpSignature make_signature(const std::string& domain, const std::string& op, int since_version,
                           const std::string& inputs, const std::string& outputs, const std::string& attrs) {
  const std::string who = (domain.empty() ? std::string() : domain + ".") + op + "-" + std::to_string(since_version);
  OpSignature s;
  s.domain = domain;
  s.op = op;
  s.since_version = since_version;
  s.inputs = parse_formals(inputs, who);
  s.outputs = parse_formals(outputs, who);
  std::istringstream in(attrs);
  std::string tok;
  while (in >> tok) {
    const size_t colon = tok.find(':');
    FUSE_CHECK(colon != std::string::npos && colon > 0, "signature of " << who << ": bad attribute '" << tok << "'");
    OpSignature::AttrSpec a;
    std::string code = tok.substr(colon + 1);
    if (!code.empty() && code.back() == '!') {
      a.required = true;
      code.pop_back();
    }
    a.type = parse_attr_type(code, who);
    FUSE_CHECK(s.attributes.emplace(tok.substr(0, colon), a).second,
               "signature of " << who << ": attribute '" << tok.substr(0, colon) << "' listed twice");
  }
  finish_signature(s);
  return s;
}

}  // namespace fuseopt
