// The operator signatures the load-time validation checks nodes against
// (validate_model.h), by domain:
//   - "" (ai.onnx) and ai.onnx.ml: onnx_op_signature(); libonnx's registry
//     for the opsets the installed libonnx knows (Debian's 1.12: up to 17 and
//     ml 3), our table of the versions after it (schema_newer_opsets.cc) up to
//     kMaxKnownOpset (28) and ml 5;
//   - fuseopt: fuseopt_op_signature(), the catalogue in schema_fuseopt.cc.
// Other domains have no signatures here; the validation passes their nodes
// through with a warning.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "onnx_io/op_signature.h"

namespace fuseopt {

// "" and "ai.onnx" (the same domain) and "ai.onnx.ml".
bool is_onnx_domain(const std::string& domain);
// "" for "ai.onnx", else the name as given.
std::string canonical_domain(const std::string& domain);

// The newest opset of a domain we have signatures for: 23 for "", 5 for
// ai.onnx.ml, 1 for fuseopt; 0 for any other domain.
int64_t newest_known_opset(const std::string& domain);

// The signature in force at `opset` of the domain (the op's latest version
// <= opset); nullptr when the op does not exist there: an unknown name, or
// an op introduced in a later opset (onnx_op_first_version says which).
const OpSignature* onnx_op_signature(const std::string& domain, const std::string& op, int64_t opset);
// The opset that introduced `op`; 0 when no opset of the domain has it.
int onnx_op_first_version(const std::string& domain, const std::string& op);
// Every op name of an ONNX domain (for the tests and for messages).
std::vector<std::string> onnx_op_names(const std::string& domain);

// The ONNX versions after what the installed libonnx knows, from our own
// table (schema_newer_opsets.cc): one row per version whose inputs, outputs,
// attributes or deprecation changed, and every op new in those opsets.
const std::vector<OpSignature>& newer_onnx_signatures();

// fuseopt's fused ops (domain "fuseopt", version 1); nullptr for a name that
// is not one.
const OpSignature* fuseopt_op_signature(const std::string& op);

// One value a node reads or writes, with its element type
// (onnx::TensorProto::DataType; 0 where it is not known).
struct TypedValue {
  std::string name;
  int elem_type = 0;
};
// The element types of a node's inputs and outputs against the signature's
// type constraints (the load validation's check of declared types, and shape
// inference's of inferred ones: src/onnx_io/inferred_types.cc): each value's
// type is one its variable allows (up to the opset sig.types_exact_until; a
// later opset may have widened the set) and the values of one variable ("T"
// of Add's A, B and C) have one type. "" when they fit, else the first problem
// in one line: "output 0 'y' is FLOAT but input 0 'x' is INT64; both are Add's
// T, one type". Values of unknown type (0) and empty names are skipped.
std::string type_constraint_problem(const OpSignature& sig, const std::string& op_type, int64_t opset,
                                    const std::vector<TypedValue>& inputs, const std::vector<TypedValue>& outputs);
std::vector<std::string> fuseopt_op_names();

}  // namespace fuseopt
