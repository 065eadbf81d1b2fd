// ONNX definitions of fuseopt.LayerNorm, RMSNorm, SkipLayerNorm and
// EmbedLayerNorm (normalisation over the last axis). Where the model's
// opset has LayerNormalization (>= 17) the body uses it; otherwise it spells
// the statistics out: mean, centred square mean, + eps, Sqrt, Div.
#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"

namespace fuseopt {
namespace {

using fnbody::FnBuilder;

// Y = norm(x) * gamma (+ beta); rms: no centring.
void norm_body(FnBuilder& f, const std::string& x, const std::string& gamma, const std::string& beta, bool rms,
               const std::string& y) {
  if (!rms && f.opset() >= 17) {
    std::vector<std::string> in{x, gamma};
    if (!beta.empty()) in.push_back(beta);
    f.node("LayerNormalization", in, y,
           {FnBuilder::attr_int("axis", -1),
            FnBuilder::attr_ref("epsilon", "epsilon", onnx::AttributeProto::FLOAT)});
    return;
  }
  std::string c = x;
  if (!rms) c = f.node("Sub", {x, f.reduce_mean_last(x)});
  std::string var = f.reduce_mean_last(f.node("Mul", {c, c}));
  std::string den = f.node("Sqrt", {f.node("Add", {var, f.scalar_attr("epsilon", var)})});
  std::string scaled = f.node("Mul", {f.node("Div", {c, den}), gamma}, beta.empty() ? y : "");
  if (!beta.empty()) f.node("Add", {scaled, beta}, y);
}

// ---- LayerNorm (opset < 17 models) --------------------------------------------------
std::string ln_overload(const Graph& g, const Node& n) {
  return (n.input(2) ? "beta" : "nobeta") + fnbody::dtype_suffix(g, n);
}

onnx::FunctionProto ln_build(const Graph& g, const Node& n, const std::string& ov) {
  const bool beta = n.input(2) != nullptr;
  std::vector<std::string> in{"X", "gamma"};
  if (beta) in.push_back("beta");
  FnBuilder f("LayerNorm", ov, in, {"Y"}, {"epsilon"}, g.opset(""), fnbody::elem_type(n));
  norm_body(f, "X", "gamma", beta ? "beta" : "", false, "Y");
  return f.take();
}

// ---- RMSNorm ------------------------------------------------------------------------
// Overloads only where the element type matters (opset < 15, not float32).
std::string rms_overload(const Graph& g, const Node& n) {
  const std::string s = fnbody::dtype_suffix(g, n);
  return s.empty() ? "" : "rms" + s;
}

onnx::FunctionProto rms_build(const Graph& g, const Node& n, const std::string& ov) {
  FnBuilder f("RMSNorm", ov, {"X", "gamma"}, {"Y"}, {"epsilon"}, g.opset(""), fnbody::elem_type(n));
  norm_body(f, "X", "gamma", "", true, "Y");
  return f.take();
}

// ---- SkipLayerNorm: Sum = (X + bias) + skip; Y = norm(Sum) ----------------------------
struct SkipVariant {
  bool rms, beta, bias, sum;
};
SkipVariant skip_variant(const Node& n) {
  return {n.attr_int("rms", 0) != 0, n.input(3) != nullptr, n.input(4) != nullptr, n.output(1) != nullptr};
}
std::string skip_overload(const Graph& g, const Node& n) {
  const SkipVariant v = skip_variant(n);
  std::string s = v.rms ? "rms" : "ln";
  if (v.beta) s += "_beta";
  if (v.bias) s += "_bias";
  if (v.sum) s += "_sum";
  return s + fnbody::dtype_suffix(g, n);
}

onnx::FunctionProto skip_build(const Graph& g, const Node& n, const std::string& ov) {
  const SkipVariant v = skip_variant(n);
  // Input names are positional: an omitted beta still takes its slot when bias follows.
  std::vector<std::string> in{"X", "skip", "gamma"};
  if (v.beta || v.bias) in.push_back("beta");
  if (v.bias) in.push_back("bias");
  std::vector<std::string> outs{"Y"};
  if (v.sum) outs.push_back("Sum");
  FnBuilder f("SkipLayerNorm", ov, in, outs, {"epsilon", "rms"}, g.opset(""), fnbody::elem_type(n));
  std::string x = v.bias ? f.node("Add", {"X", "bias"}) : "X";
  std::string sum = f.node("Add", {x, "skip"}, v.sum ? "Sum" : "");
  norm_body(f, sum, "gamma", v.beta ? "beta" : "", v.rms, "Y");
  return f.take();
}

// ---- EmbedLayerNorm: Y = norm(Gather(table0, ids0) + Gather(table1, ids1) (+ ...)) ------
// The lookups are summed left to right, the order the kernels use.
size_t embed_lookups(const Node& n) { return n.inputs.size() >= 8 && n.input(6) ? 3 : 2; }
std::string embed_overload(const Graph& g, const Node& n) {
  return std::string(n.input(1) ? "beta" : "nobeta") + "_" + std::to_string(embed_lookups(n)) +
         fnbody::dtype_suffix(g, n);
}

onnx::FunctionProto embed_build(const Graph& g, const Node& n, const std::string& ov) {
  const size_t k = embed_lookups(n);
  // Positional: an omitted beta keeps its slot (the lookups follow it).
  std::vector<std::string> in{"gamma", "beta"};
  for (size_t i = 0; i < k; ++i) {
    in.push_back("table" + std::to_string(i));
    in.push_back("ids" + std::to_string(i));
  }
  FnBuilder f("EmbedLayerNorm", ov, in, {"Y"}, {"epsilon"}, g.opset(""), fnbody::elem_type(n));
  std::string sum;
  for (size_t i = 0; i < k; ++i) {
    std::string e = f.node("Gather", {"table" + std::to_string(i), "ids" + std::to_string(i)});
    sum = sum.empty() ? e : f.node("Add", {sum, e});
  }
  norm_body(f, sum, "gamma", n.input(1) ? "beta" : "", false, "Y");
  return f.take();
}

void build_embed(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, embed_overload, embed_build);
}

void build_ln(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, ln_overload, ln_build);
}
void build_rms(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, rms_overload, rms_build);
}
void build_skip(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, skip_overload, skip_build);
}

FunctionBodyRegistrar ln_body("fuseopt", "LayerNorm", build_ln);
FunctionOverloadRegistrar ln_overload_reg("fuseopt", "LayerNorm", ln_overload);
FunctionBodyRegistrar rms_body("fuseopt", "RMSNorm", build_rms);
FunctionOverloadRegistrar rms_overload_reg("fuseopt", "RMSNorm", rms_overload);
FunctionBodyRegistrar skip_body("fuseopt", "SkipLayerNorm", build_skip);
FunctionOverloadRegistrar skip_overload_reg("fuseopt", "SkipLayerNorm", skip_overload);
FunctionBodyRegistrar embed_body("fuseopt", "EmbedLayerNorm", build_embed);
FunctionOverloadRegistrar embed_overload_reg("fuseopt", "EmbedLayerNorm", embed_overload);

}  // namespace
}  // namespace fuseopt
