// LayerNorm spelled in primitives (opset < 17 exporters, hand-written models):
//   d = x - ReduceMean(x); var = ReduceMean(d^2 | d*d); y = d / Sqrt(var + eps)
//   (or d * Reciprocal(Sqrt(...)), d * (1 / Sqrt(...))) * gamma + beta?
// => ONNX LayerNormalization (model opset >= 17), else fuseopt.LayerNorm.
// ReduceMean's axes may be an attribute or (opset 18) an input.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

class LayerNormFusion : public FusionPass {
 public:
  std::string name() const override { return "LayerNorm"; }
  std::string description() const override {
    return "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> LayerNormalization (fuseopt.LayerNorm before opset 17)";
  }
  Pattern pattern() const override {
    Pattern x = Any("x");
    Pattern mean = Op("ReduceMean", x).allow_extra_inputs().as("mean");
    Pattern d = Op("Sub", x, mean).as("d");
    Pattern sq = AnyOf({Op("Pow", d, Const("two").equals(2.0)).as("sq"), Op("Mul", d, d).as("sq")});
    Pattern var = Op("ReduceMean", sq).allow_extra_inputs().as("var");
    Pattern sd = Op("Sqrt", Op("Add", var, Any("eps")).commutative().as("add_eps")).as("sqrt");
    Pattern norm = AnyOf({Op("Div", d, sd).as("norm"),
                          Op("Mul", d, Op("Reciprocal", sd).as("recip")).commutative().as("norm"),
                          Op("Mul", d, Op("Div", Const().equals(1.0), sd).as("recip")).commutative().as("norm")});
    Pattern scaled = Op("Mul", norm, Any("gamma")).commutative().as("scale");
    // Only a [D]-like constant is a beta; any other Add after the norm stays outside.
    Pattern beta = Const("beta").where(
        [](const Value& v) { return !v.const_data->dims.empty() && v.const_data->numel() == v.const_data->dims.back(); },
        "a [D] beta");
    return Op("Add", scaled, beta).commutative().optional().as("shift");
  }
  Status check(const Graph&, const Match& m) const override {
    const Value* x = m.value("x");
    for (const char* rm : {"mean", "var"}) {
      const Node* n = m.node(rm);
      if (Status s = fusion::reduce_mean_last_axis(n, x); !s) return s;
    }
    float eps = 0;
    if (Status s = fusion::scalar_epsilon(m.value("eps"), m.node("add_eps"), &eps); !s) return s;
    const auto d = fusion::last_dim(x);
    if (Status s = fusion::const_last_axis_vector(m.value("gamma"), "gamma", m.node("scale"), d.value_or(-1)); !s)
      return s;
    const int64_t gn = m.constant("gamma")->dims.back();
    if (m.has("beta"))
      if (Status s = fusion::const_last_axis_vector(m.value("beta"), "beta", m.node("shift"), gn); !s) return s;
    // gamma/beta of rank > x's rank would broadcast the output to more dims.
    const auto xr = fusion::rank_of(x);
    for (const char* p : {"gamma", "beta"}) {
      if (!m.has(p)) continue;
      const int64_t pr = *fusion::rank_of(m.value(p));
      if (pr != 1 && (!xr || pr > *xr))
        return Status::reject("rule 2: ", p, " '", m.value(p)->name, "' has more dims than the normalised input");
    }
    return fusion::same_float_dtype({x, m.value("gamma"), m.has("beta") ? m.value("beta") : nullptr},
                                    m.root);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    float eps = static_cast<float>(*scalar_value(m.value("eps")));
    Value* gamma = m.value("gamma");
    Value* beta = m.has("beta") ? m.value("beta") : nullptr;
    if (gamma->const_data->dims.size() != 1) gamma = rw.add_constant(gamma->name, fusion::as_vector(*gamma->const_data));
    if (beta && beta->const_data->dims.size() != 1) beta = rw.add_constant(beta->name, fusion::as_vector(*beta->const_data));
    std::vector<Value*> in{m.value("x"), gamma};
    if (beta) in.push_back(beta);
    Node* f;
    if (rw.opset("") >= 17) {
      f = rw.create_node("", "LayerNormalization", in,
                         {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", eps)}, 1,
                         m.root->name);
    } else {
      f = rw.create_node("fuseopt", "LayerNorm", in, {Attribute::make_float("epsilon", eps)}, 1, m.root->name);
    }
    rw.replace_match(m, f, name());
  }
};

}  // namespace
// First of the norms: SkipLayerNorm (200), FusedMatMulLayerNorm (350) and
// LayerNormLinear (600) extend the node it writes.
FUSEOPT_REGISTER_PASS(LayerNormFusion, PassCategory::Fusion, 100);
}  // namespace fuseopt
