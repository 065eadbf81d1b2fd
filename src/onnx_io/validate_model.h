// Schema validation on load: before the loader builds a Graph (and so before
// any pass or kernel sees the model), every node of the graph, of its
// subgraphs and of its model-local functions is checked against its
// operator's signature at the opset the model declares for its domain
// (op_schemas.h), every tensor proto is checked for well-formed data
// (validate_tensor.h), and the opset imports and the wiring the loader does
// not check (subgraph and function scopes, duplicate definitions) are checked.
//
// The first problem throws fuseopt::Error with one line naming the file, the
// node (or initializer, function, ...) and the op:
//   model.onnx: node 'Softmax_3' (Softmax, opset 13): 2 inputs, the schema allows 1
// Nodes of domains without signatures here (com.microsoft, ...) are passed
// through: one warning per op, after the model passed.
//
// The loader runs it unless LoadOptions::validate is false (fuseopt and
// fuserun --no-validate, Python optimize(..., validate=False)).
#pragma once
#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
}

namespace fuseopt {

// The newest IR version ONNX defines (ONNX 1.23); a model above it is refused.
constexpr int64_t kMaxKnownIrVersion = 14;

// Throws Error("<label>: ...") for the first problem found.
void validate_model(const onnx::ModelProto& model, const std::string& label);
// The same on a serialized model (a parse failure is an Error too); for the
// Python module's schema tests, which have no ModelProto of this build.
void validate_model_bytes(const std::string& bytes, const std::string& label);

}  // namespace fuseopt
