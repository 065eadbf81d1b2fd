// The ONNX schemas' type constraints as a rule of shape inference
// (register_dtype_rule, src/ir/shape_inference.h): the load validation checks
// the element types a model declares, this checks the ones inference derives
// too. Add(Shape(x) -> INT64, y FLOAT) with neither declared is a model that
// ONNX's checker and ONNX Runtime refuse; without this rule fuseopt would
// write it out with both types declared, as invalid as it came in.
#include <vector>

#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "onnx_io/op_schemas.h"

namespace fuseopt {
namespace {

std::string onnx_type_rule(const Node& n, int64_t opset) {
  if (!is_onnx_domain(n.domain)) return "";
  const OpSignature* sig = onnx_op_signature(canonical_domain(n.domain), n.op_type, opset);
  if (!sig || sig->type_constraints.empty()) return "";
  auto typed = [](const std::vector<Value*>& vs) {
    std::vector<TypedValue> out;
    out.reserve(vs.size());
    for (const Value* v : vs) out.push_back(v ? TypedValue{v->name, static_cast<int>(v->dtype)} : TypedValue{});
    return out;
  };
  return type_constraint_problem(*sig, n.op_type, opset, typed(n.inputs), typed(n.outputs));
}

const bool registered = [] {
  register_dtype_rule(onnx_type_rule);
  return true;
}();

}  // namespace
}  // namespace fuseopt
