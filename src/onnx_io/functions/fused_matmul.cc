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
  fnbody::activation_body(f, v.act, y, "Y");
  return f.take();
}

void build_fused_matmul(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

FunctionBodyRegistrar fused_matmul_body("fuseopt", "FusedMatMul", build_fused_matmul);
FunctionOverloadRegistrar fused_matmul_overload("fuseopt", "FusedMatMul", overload_of);

}  // namespace
}  // namespace fuseopt
