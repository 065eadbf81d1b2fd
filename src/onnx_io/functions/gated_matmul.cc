// ONNX definition of fuseopt.GatedMatMul:
//   P = A·W (+ bias);  g, u = Split(P, last axis, 2 equal halves);  Y = act(g) * u
// One overload per (activation, bias) actually used, so every body is
// straight-line standard ONNX; N never appears in the body (equal Split).
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

std::string act_of(const Node& n) {
  std::string a = n.attr_string("activation", "silu");
  return a.empty() ? "silu" : a;
}

std::string overload_of(const Graph& g, const Node& n) {
  return act_of(n) + (n.input(2) ? "_bias" : "") + fnbody::dtype_suffix(g, n);
}

// act(x), written the way exporters write it (SiLU as x * Sigmoid(x)).
std::string gate_activation(fnbody::FnBuilder& f, const std::string& act, const std::string& x) {
  if (act == "silu") return f.node("Mul", {x, f.node("Sigmoid", {x})});
  if (act == "relu") return f.node("Relu", {x});
  if (act == "gelu") {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    std::string e = f.node("Erf", {f.node("Div", {x, f.scalar(1.41421356237f, x)})});
    return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), f.node("Add", {e, f.scalar(1.0f, x)})});
  }
  // gelu_tanh: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
  std::string x3 = f.node("Mul", {f.node("Mul", {x, x}), x});
  std::string inner = f.node("Add", {x, f.node("Mul", {x3, f.scalar(0.044715f, x)})});
  std::string t = f.node("Tanh", {f.node("Mul", {inner, f.scalar(0.7978845608f, x)})});
  return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), f.node("Add", {t, f.scalar(1.0f, x)})});
}

onnx::FunctionProto build_one(const Graph& g, const Node& n, const std::string& ov) {
  const bool bias = n.input(2) != nullptr;
  std::vector<std::string> inputs{"A", "W"};
  if (bias) inputs.push_back("bias");
  fnbody::FnBuilder f("GatedMatMul", ov, inputs, {"Y"}, {"activation"}, g.opset(""), fnbody::elem_type(n));
  std::string p = f.node("MatMul", {"A", "W"});
  if (bias) p = f.node("Add", {p, "bias"});
  // Split into two equal halves: opset 18 wants num_outputs, earlier opsets split equally by default.
  std::vector<onnx::AttributeProto> attrs{fnbody::FnBuilder::attr_int("axis", -1)};
  if (f.opset() >= 18) attrs.push_back(fnbody::FnBuilder::attr_int("num_outputs", 2));
  const auto gu = f.node_outputs("Split", {p}, 2, attrs);
  f.node("Mul", {gate_activation(f, act_of(n), gu[0]), gu[1]}, "Y");
  return f.take();
}

void build_gated_matmul(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

FunctionBodyRegistrar gated_matmul_body("fuseopt", "GatedMatMul", build_gated_matmul);
FunctionOverloadRegistrar gated_matmul_overload("fuseopt", "GatedMatMul", overload_of);

}  // namespace
}  // namespace fuseopt
