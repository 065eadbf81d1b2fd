// --emit standard for fuseopt.FusedMatMulLayerNorm (emit_standard.h):
//   MatMul (+ Transpose for transB, Mul alpha, Add bias) + Gelu-20 (approximate
//   none / tanh) + LayerNormalization-17 (axis = -1, epsilon)
// The function body's sequence with the GELU in one standard op instead of its
// erf / tanh primitives (the rule of the FusedMatMul and LayerNormLinear GELU
// mappings in emit_standard_ops.cc), so exact, at opset 20. The skip variant (no
// activation) stays fuseopt: its body is MatMul + Add + LayerNormalization at
// opset >= 17, the standard sequence itself (as for SkipLayerNorm's LayerNorm variant).
#include <string>

#include "onnx_io/emit_standard.h"

namespace fuseopt {
namespace {

std::string fmln_check(const Graph&, const Node& n) {
  const Value* a = n.input(0);
  if (!a || !(a->dtype == DType::Float || a->dtype == DType::Float16 || a->dtype == DType::BFloat16 ||
              a->dtype == DType::Double))
    return "A is not a float tensor of known type";
  if (n.input(5))
    return "the skip variant: its function body is MatMul (+ Add bias) + Add skip + LayerNormalization at opset >= "
           "17, the standard sequence itself, so runtimes run the same ops; kept fused for fuserun";
  const std::string act = n.attr_string("activation", "gelu");
  if (act != "gelu" && act != "gelu_tanh") return "activation '" + act + "' is not a GELU";
  if (!n.input(1) || !n.input(3)) return "W or gamma missing";
  return "";
}

void fmln_rewrite(EmitContext& c, Node* n) {
  Value* w = n->input(1);
  if (n->attr_int("transB", 0))
    w = c.node("Transpose", {w}, {Attribute::make_ints("perm", {1, 0})}, 1, n->name + "_wT")->output(0);
  Value* h = c.node("MatMul", {n->input(0), w}, {}, 1, n->name)->output(0);
  const float alpha = n->attr_float("alpha", 1.0f);
  if (alpha != 1.0f)
    h = c.node("Mul", {h, c.scalar(n->input(0)->dtype, alpha, "alpha")}, {}, 1, n->name + "_alpha")->output(0);
  if (Value* bias = n->input(2)) h = c.node("Add", {h, bias}, {}, 1, n->name + "_bias")->output(0);
  const bool tanh_form = n->attr_string("activation", "gelu") == "gelu_tanh";
  h = c.node("Gelu", {h}, {Attribute::make_string("approximate", tanh_form ? "tanh" : "none")}, 1, n->name + "_gelu")
          ->output(0);
  std::vector<Value*> in{h, n->input(3)};
  if (Value* beta = n->input(4)) in.push_back(beta);
  Node* ln = c.node("LayerNormalization", in,
                    {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-5f))},
                    1, n->name + "_norm");
  c.take_over(n->output(0), ln->output(0));
  c.rw.erase_node(n);
}

const EmitterRegistrar kFmln({"FusedMatMulLayerNorm", "MatMul + Gelu + LayerNormalization",
                              [](const Graph&, const Node&) -> int64_t { return 20; }, fmln_check, fmln_rewrite});

}  // namespace
}  // namespace fuseopt
