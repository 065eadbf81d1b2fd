// ONNX definition of fuseopt.FusedMatMulLayerNorm:
//   h = act(alpha · A·op(W) + bias) (+ skip);  Y = LayerNorm(h) · gamma (+ beta) over the last axis.
// One overload per variant used (transB, alpha, bias, beta, skip, activation; the element
// type before opset 15), so every body is straight-line standard ONNX. The GELU is
// spelled in primitives as in FusedMatMul's body; the norm is LayerNormalization
// from opset 17, its primitives (mean, centred square mean, + eps, Sqrt, Div) before.
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

using fnbody::FnBuilder;

struct Variant {
  bool trans_b = false, alpha = false, bias = false, beta = false, skip = false;
  std::string act = "gelu";  // "none" with skip (the shape function allows nothing else)
};

Variant variant_of(const Node& n) {
  Variant v;
  v.trans_b = n.attr_int("transB", 0) != 0;
  v.alpha = n.attr_float("alpha", 1.0f) != 1.0f;
  v.bias = n.input(2) != nullptr;
  v.beta = n.input(4) != nullptr;
  v.skip = n.input(5) != nullptr;
  v.act = n.attr_string("activation", v.skip ? "none" : "gelu");
  return v;
}

std::string overload_of(const Graph& g, const Node& n) {
  const Variant v = variant_of(n);
  std::string s = v.act;
  if (v.trans_b) s += "_transB";
  if (v.alpha) s += "_alpha";
  if (v.bias) s += "_bias";
  if (v.beta) s += "_beta";
  if (v.skip) s += "_skip";
  return s + fnbody::dtype_suffix(g, n);
}

// GELU of x: erf form 0.5·x·(1 + erf(x/√2)), tanh form 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
std::string gelu(FnBuilder& f, const std::string& act, const std::string& x) {
  std::string one_plus;
  if (act == "gelu_tanh") {
    std::string x3 = f.node("Mul", {f.node("Mul", {x, x}), x});
    std::string inner = f.node("Add", {x, f.node("Mul", {x3, f.scalar(0.044715f, x)})});
    std::string t = f.node("Tanh", {f.node("Mul", {inner, f.scalar(0.7978845608f, x)})});
    one_plus = f.node("Add", {t, f.scalar(1.0f, x)});
  } else {
    std::string e = f.node("Erf", {f.node("Div", {x, f.scalar(1.41421356237f, x)})});
    one_plus = f.node("Add", {e, f.scalar(1.0f, x)});
  }
  return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), one_plus});
}

// Y = LayerNorm(h) over the last axis, · gamma (+ beta).
void layer_norm(FnBuilder& f, const std::string& h, bool beta, const std::string& y) {
  if (f.opset() >= 17) {
    std::vector<std::string> in{h, "gamma"};
    if (beta) in.push_back("beta");
    f.node("LayerNormalization", in, y,
           {FnBuilder::attr_int("axis", -1), FnBuilder::attr_ref("epsilon", "epsilon", onnx::AttributeProto::FLOAT)});
    return;
  }
  std::string d = f.node("Sub", {h, f.reduce_mean_last(h)});
  std::string var = f.reduce_mean_last(f.node("Mul", {d, d}));
  std::string den = f.node("Sqrt", {f.node("Add", {var, f.scalar_attr("epsilon", var)})});
  std::string scaled = f.node("Mul", {f.node("Div", {d, den}), "gamma"}, beta ? "" : y);
  if (beta) f.node("Add", {scaled, "beta"}, y);
}

onnx::FunctionProto build_one(const Graph& g, const Node& n, const std::string& ov) {
  const Variant v = variant_of(n);
  // Input names are positional: an omitted bias still takes its slot before gamma, an
  // omitted beta its slot before skip.
  std::vector<std::string> inputs{"A", "W", "bias", "gamma"};
  if (v.beta || v.skip) inputs.push_back("beta");
  if (v.skip) inputs.push_back("skip");
  FnBuilder f("FusedMatMulLayerNorm", ov, inputs, {"Y"}, {"transB", "alpha", "activation", "epsilon"}, g.opset(""),
              fnbody::elem_type(n));
  // transB: W is 2-D (the fusion and the kernels require it), so Transpose's default perm is exact.
  std::string w = v.trans_b ? f.node("Transpose", {"W"}) : "W";
  std::string h = f.node("MatMul", {"A", w});
  if (v.alpha) h = f.node("Mul", {h, f.scalar_attr("alpha", h)});
  if (v.bias) h = f.node("Add", {h, "bias"});
  if (v.act != "none") h = gelu(f, v.act, h);
  if (v.skip) h = f.node("Add", {h, "skip"});
  layer_norm(f, h, v.beta, "Y");
  return f.take();
}

void build_all(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

const FunctionBodyRegistrar kBody("fuseopt", "FusedMatMulLayerNorm", build_all);
const FunctionOverloadRegistrar kOverload("fuseopt", "FusedMatMulLayerNorm", overload_of);

}  // namespace
}  // namespace fuseopt
