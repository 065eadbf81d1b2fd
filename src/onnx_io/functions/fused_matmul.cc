// ONNX definition of fuseopt.FusedMatMul: Y = act(alpha * A·op(B) + bias) (+ residual).
// One overload per variant actually used (transB, alpha, bias, activation, residual),
// so every body is straight-line standard ONNX. The residual (input 3, Y's element
// count) is added after the activation as Reshape(residual, Shape(Y)).
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

struct Variant {
  bool trans_b = false, alpha = false, bias = false, residual = false;
  std::string act = "none";
};

Variant variant_of(const Node& n) {
  Variant v;
  v.trans_b = n.attr_int("transB", 0) != 0;
  v.alpha = n.attr_float("alpha", 1.0f) != 1.0f;
  v.bias = n.input(2) != nullptr;
  v.residual = n.input(3) != nullptr;
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
  if (v.residual) add("residual");
  return (s.empty() ? "plain" : s) + fnbody::dtype_suffix(g, n);
}

onnx::FunctionProto build_one(const Graph& g, const Node& n, const std::string& ov) {
  const Variant v = variant_of(n);
  std::vector<std::string> inputs{"A", "B"};
  if (v.bias || v.residual) inputs.push_back("bias");  // declared even when omitted (positional)
  if (v.residual) inputs.push_back("residual");
  fnbody::FnBuilder f("FusedMatMul", ov, inputs, {"Y"}, {"transB", "alpha", "activation"}, g.opset(""),
                      fnbody::elem_type(n));
  // transB is emitted by the fusion for 2-D weights only: Transpose's default perm is exact there.
  std::string b = v.trans_b ? f.node("Transpose", {"B"}) : "B";
  std::string y = f.node("MatMul", {"A", b});
  if (v.alpha) y = f.node("Mul", {y, f.scalar_attr("alpha", y)});
  if (v.bias) y = f.node("Add", {y, "bias"});
  if (!v.residual) {
    fnbody::activation_body(f, v.act, y, "Y");
  } else {
    // Y = act(..) + residual read row-major as Y's shape (the pass may attach a [B, S, N]
    // residual to a [B*S, N] GEMM output that a Reshape restores afterwards).
    if (v.act != "none") y = fnbody::activation_body(f, v.act, y, "");
    f.node("Add", {y, f.node("Reshape", {"residual", f.node("Shape", {y})})}, "Y");
  }
  return f.take();
}

void build_fused_matmul(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

FunctionBodyRegistrar fused_matmul_body("fuseopt", "FusedMatMul", build_fused_matmul);
FunctionOverloadRegistrar fused_matmul_overload("fuseopt", "FusedMatMul", overload_of);

}  // namespace
}  // namespace fuseopt
