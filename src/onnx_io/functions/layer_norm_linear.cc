// ONNX function body of fuseopt.LayerNormLinear (semantics in
// kernels/cpu/fused_layer_norm_linear.cc). The variant (skip/Sum, beta, bias,
// rms, transB, activation) is an IR-10 overload; epsilon is an attribute
// reference. LayerNorm uses ONNX LayerNormalization from opset 17, primitives
// before that and for RMS.
#include <string>
#include <vector>

#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

using fnbody::FnBuilder;

std::string lnl_overload(const Graph& g, const Node& n) {
  std::string ov = n.attr_int("rms", 0) ? "rms" : "ln";
  if (n.input(2)) ov += "_beta";
  if (n.input(4)) ov += "_bias";
  if (n.input(5)) ov += n.output(1) ? "_skipsum" : "_skip";
  if (n.attr_int("transB", 0)) ov += "_transB";
  std::string act = n.attr_string("activation", "none");
  if (act != "none" && !act.empty()) ov += "_" + act;
  return ov;
}

onnx::FunctionProto build_lnl(const Graph& g, const Node& n, const std::string& ov) {
  const bool skip = n.input(5) != nullptr, sum_out = skip && n.output(1) != nullptr;
  std::vector<std::string> outs = {"Y"};
  if (sum_out) outs.push_back("Sum");
  FnBuilder f("LayerNormLinear", ov, {"X", "gamma", "beta", "W", "bias", "skip"}, outs, fnbody::attr_names(n),
              g.opset(""));
  const bool rms = n.attr_int("rms", 0) != 0, beta = n.input(2) != nullptr;
  std::string z = "X";
  if (skip) z = f.node("Add", {"X", "skip"}, sum_out ? "Sum" : "");
  std::string y;
  if (!rms && f.opset() >= 17) {
    std::vector<std::string> ins = {z, "gamma"};
    if (beta) ins.push_back("beta");
    y = f.node("LayerNormalization", ins, "",
               {FnBuilder::attr_int("axis", -1), FnBuilder::attr_ref("epsilon", "epsilon", onnx::AttributeProto::FLOAT)});
  } else {
    std::string d = rms ? z : f.node("Sub", {z, f.reduce_mean_last(z)});
    std::string var = f.reduce_mean_last(f.node("Mul", {d, d}));
    std::string den = f.node("Sqrt", {f.node("Add", {var, f.scalar_attr("epsilon", "X")})});
    y = f.node("Mul", {f.node("Div", {d, den}), "gamma"});
    if (beta) y = f.node("Add", {y, "beta"});
  }
  std::string w = "W";
  if (n.attr_int("transB", 0)) {
    onnx::AttributeProto p;
    p.set_name("perm");
    p.set_type(onnx::AttributeProto::INTS);
    p.add_ints(1);
    p.add_ints(0);
    w = f.node("Transpose", {"W"}, "", {p});
  }
  std::string a = f.node("MatMul", {y, w});
  if (n.input(4)) a = f.node("Add", {a, "bias"});
  if (const std::string act = n.attr_string("activation", "none"); act != "none" && !act.empty())
    a = fnbody::activation_body(f, act, a, "");
  f.node("Identity", {a}, "Y");
  return f.take();
}

const FunctionOverloadRegistrar kOverload("fuseopt", "LayerNormLinear", lnl_overload);
const FunctionBodyRegistrar kBody("fuseopt", "LayerNormLinear",
                                  [](const Graph& g, const std::vector<const Node*>& nodes,
                                     std::vector<onnx::FunctionProto>& out) {
                                    fnbody::per_overload(g, nodes, out, lnl_overload, build_lnl);
                                  });

}  // namespace
}  // namespace fuseopt
