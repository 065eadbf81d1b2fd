// What a node of an operator may look like at a given opset: its formal
// inputs and outputs (single, optional, variadic), its attributes (type,
// required) and whether that version is deprecated. The load-time schema
// validation (validate_model.h) checks every node against one of these.
//
// Where they come from:
//   - the ONNX domains ("" and ai.onnx.ml): libonnx's schema registry for the
//     opsets it knows, and our table of the later versions (schema_standard.cc,
//     schema_newer_opsets.cc);
//   - fuseopt's own domain: the signatures its fused ops register
//     (schema_fuseopt.cc, FUSEOPT_OP_SIGNATURE).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fuseopt {

// The values of onnx::AttributeProto::AttributeType, so a proto's type
// compares directly.
enum class AttrType : int {
  Undefined = 0, Float = 1, Int = 2, String = 3, Tensor = 4, Graph = 5, Floats = 6, Ints = 7, Strings = 8,
  Tensors = 9, Graphs = 10, SparseTensor = 11, SparseTensors = 12, TypeProto = 13, TypeProtos = 14,
};
const char* attr_type_name(AttrType t);  // "INT", "FLOATS", ... as ONNX spells them

struct OpSignature {
  enum class Option { Single, Optional, Variadic };
  struct Formal {
    std::string name;
    Option option = Option::Single;
    int min_arity = 1;  // variadic only: how many it takes at least
    // Its type: a type variable of type_constraints ("T") or a type itself
    // ("tensor(int64)"); empty where the signature has no types (our tables).
    std::string type_str;
    bool homogeneous = true;  // variadic: every value of it has the same type
  };
  struct AttrSpec {
    AttrType type = AttrType::Undefined;
    bool required = false;
  };

  std::string domain;   // "" for ai.onnx
  std::string op;
  int since_version = 1;
  std::vector<Formal> inputs, outputs;
  int min_inputs = 0, max_inputs = 0, min_outputs = 0, max_outputs = 0;  // max: INT32_MAX when variadic
  std::map<std::string, AttrSpec> attributes;
  bool any_attributes = false;  // the schema accepts attributes it does not list
  // Type variable -> the tensor element types (onnx::TensorProto::DataType)
  // it allows, from libonnx's schema; absent for our tables' rows. The sets
  // hold up to opset types_exact_until (libonnx's newest): later opsets may
  // widen a set without a new row here, so above it only "one variable, one
  // type" is checked (validate_node.cc).
  std::map<std::string, std::vector<int>> type_constraints;
  int64_t types_exact_until = 0;
  bool deprecated = false;
  // Deprecated after release and still run by ONNX Runtime (GroupNormalization-18):
  // a warning naming this, not an error.
  std::string deprecation_warning;

  // The formal parameter that node input/output `i` binds to (the last one
  // for a variadic tail); nullptr past the end.
  const Formal* input_formal(int i) const;
  const Formal* output_formal(int i) const;
};

// Builds a signature from a compact spelling, the form our tables use:
//   inputs  "X scale bias?"   ('?' optional, '*' variadic, '*0' variadic of zero or more)
//   attrs   "epsilon:f num_groups:i!"   (f i s t g sp tp fs is ss ts gs sps tps; '!' required)
// min/max counts follow ONNX's rule: the minimum runs to the last single formal.
// Throws Error on a malformed spelling (a bug in a table, caught by the tests).
OpSignature make_signature(const std::string& domain, const std::string& op, int since_version,
                           const std::string& inputs, const std::string& outputs, const std::string& attrs);

// Recomputes min/max counts from the formals (after filling them in by hand).
void finish_signature(OpSignature& s);

}  // namespace fuseopt
