// Fused ops carry a model-local ONNX function (domain `fuseopt`) so the saved
// model runs in any ONNX runtime. Each fused op registers a builder from its
// own file; save_model asks the builders of the ops it finds in the graph.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnx { class FunctionProto; }

namespace fuseopt {

// Given every node of this op in the graph, append the FunctionProto(s) that
// define them. May rename node op_types/overloads to pick specialised bodies.
using FunctionBodyBuilder =
    std::function<void(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out)>;

void register_function_body(const std::string& domain, const std::string& op, FunctionBodyBuilder b);
const FunctionBodyBuilder* find_function_body(const std::string& domain, const std::string& op);

struct FunctionBodyRegistrar {
  FunctionBodyRegistrar(const std::string& domain, const std::string& op, FunctionBodyBuilder b) {
    register_function_body(domain, op, std::move(b));
  }
};

}  // namespace fuseopt
