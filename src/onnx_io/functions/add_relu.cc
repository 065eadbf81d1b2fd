// ONNX definition of fuseopt.AddRelu: Y = Relu(Add(A, B)).
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

void build_add_relu(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::FnBuilder f("AddRelu", "", {"A", "B"}, {"Y"}, {}, g.opset(""));
  f.node("Relu", {f.node("Add", {"A", "B"})}, "Y");
  out.push_back(f.take());
}

FunctionBodyRegistrar add_relu_body("fuseopt", "AddRelu", build_add_relu);

}  // namespace
}  // namespace fuseopt
