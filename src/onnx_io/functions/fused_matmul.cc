// ONNX definition of fuseopt.FusedMatMul: Y = act(alpha * A·op(B) + bias).
// One overload per variant actually used (transB, alpha, bias, activation),
// so every body is straight-line standard ONNX.
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

struct Variant {
  bool trans_b = false, alpha = false, bias = false;
  std::string act = "none";
};

Variant variant_of(const Node& n) {
  Variant v;
  v.trans_b = n.attr_int("transB", 0) != 0;
  v.alpha = n.attr_float("alpha", 1.0f) != 1.0f;
  v.bias = n.input(2) != nullptr;
  v.act = n.attr_string("activation", "none");
  if (v.act.empty()) v.act = "none";
  return v;
}

std::string overload_of(const Graph& g, const Node& n) {
  const Variant v = variant_of(n);
  std::string s;
  auto add = [&](const std::string& p) { s += (s.empty() ? "" : "_") + p; };
  if (v.trans_b) add("transB");
  if (v.alpha) add("alpha");
  if (v.bias) add("bias");
  if (v.act != "none") add(v.act);
  return (s.empty() ? "plain" : s) + fnbody::dtype_suffix(g, n);
}

// y -> act(y); `x` names follow the op's own spelling of the activation.
std::string activation(fnbody::FnBuilder& f, const std::string& act, const std::string& x, const std::string& y) {
  if (act == "relu") return f.node("Relu", {x}, y);
  if (act == "gelu") {
    // 0.5 * x * (1 + erf(x / sqrt(2)))
    std::string e = f.node("Erf", {f.node("Div", {x, f.scalar(1.41421356237f, x)})});
    std::string one_plus = f.node("Add", {e, f.scalar(1.0f, x)});
    return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), one_plus}, y);
  }
  if (act == "gelu_tanh") {
    // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    std::string x3 = f.node("Mul", {f.node("Mul", {x, x}), x});
    std::string inner = f.node("Add", {x, f.node("Mul", {x3, f.scalar(0.044715f, x)})});
    std::string t = f.node("Tanh", {f.node("Mul", {inner, f.scalar(0.7978845608f, x)})});
    std::string one_plus = f.node("Add", {t, f.scalar(1.0f, x)});
    return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), one_plus}, y);
  }
  if (act == "tanh") return f.node("Tanh", {x}, y);
  if (act == "relu2") {
    // Squared ReLU as r * r (the exports' Pow(r, 2) is the same square; Mul needs no exponent constant).
    std::string r = f.node("Relu", {x});
    return f.node("Mul", {r, r}, y);
  }
  return f.node("Identity", {x}, y);
}

onnx::FunctionProto build_one(const Graph& g, const Node& n, const std::string& ov) {
  const Variant v = variant_of(n);
  std::vector<std::string> inputs{"A", "B"};
  if (v.bias) inputs.push_back("bias");
  fnbody::FnBuilder f("FusedMatMul", ov, inputs, {"Y"}, {"transB", "alpha", "activation"}, g.opset(""),
                      fnbody::elem_type(n));
  // transB is emitted by the fusion for 2-D weights only: Transpose's default perm is exact there.
  std::string b = v.trans_b ? f.node("Transpose", {"B"}) : "B";
  std::string y = f.node("MatMul", {"A", b});
  if (v.alpha) y = f.node("Mul", {y, f.scalar_attr("alpha", y)});
  if (v.bias) y = f.node("Add", {y, "bias"});
  activation(f, v.act, y, "Y");
  return f.take();
}

void build_fused_matmul(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

FunctionBodyRegistrar fused_matmul_body("fuseopt", "FusedMatMul", build_fused_matmul);
FunctionOverloadRegistrar fused_matmul_overload("fuseopt", "FusedMatMul", overload_of);

}  // namespace
}  // namespace fuseopt
