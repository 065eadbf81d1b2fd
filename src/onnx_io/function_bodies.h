// Fused ops carry a model-local ONNX function (domain `fuseopt`) so the saved
// model runs in any ONNX runtime. Each fused op registers a builder from its
// own file; save_model asks the builders of the ops it finds in the graph.
#pragma once
#include <functional>
#include <string>
#include <utility>
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
// Every (domain, op) with a registered body (the validation's catalogue test
// checks each fused op also has a signature).
std::vector<std::pair<std::string, std::string>> registered_function_bodies();

// IR-10 function overloads: a fused op whose body depends on its optional
// inputs or attributes registers a selector; save_model writes the returned
// name into NodeProto.overload (field 8; "" = none) and raises the model's
// ir_version to 10. The builder must emit one FunctionProto per overload name
// (FunctionProto.overload, field 13). See set_function_overload_field().
using OverloadSelector = std::function<std::string(const Graph& g, const Node& n)>;
void register_function_overload(const std::string& domain, const std::string& op, OverloadSelector s);
// The overload save_model writes for this node ("" when the op has no selector).
std::string function_overload(const Graph& g, const Node& n);

struct FunctionOverloadRegistrar {
  FunctionOverloadRegistrar(const std::string& domain, const std::string& op, OverloadSelector s) {
    register_function_overload(domain, op, std::move(s));
  }
};

struct FunctionBodyRegistrar {
  FunctionBodyRegistrar(const std::string& domain, const std::string& op, FunctionBodyBuilder b) {
    register_function_body(domain, op, std::move(b));
  }
};

}  // namespace fuseopt
