// RMSNorm as T5 / Llama export it:
//   xc = Cast(x, float)?   ms = ReduceMean(Pow(xc, 2) | xc*xc)
//   n  = xc * Reciprocal(Sqrt(ms + eps))  |  xc / Sqrt(ms + eps)  |  xc * (1 / Sqrt(ms + eps))
//   y  = Cast(n, x.dtype)? * gamma
// => fuseopt.RMSNorm(x, gamma, epsilon). The casts are accepted only when they
// are what the fused op does anyway: widen x to float32 (or a no-op) and
// return to x's own dtype; any other cast changes precision (rule 5).
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

class RMSNormFusion : public FusionPass {
 public:
  std::string name() const override { return "RMSNorm"; }
  std::string description() const override {
    return "Pow/ReduceMean/Add/Sqrt/Reciprocal|Div/Mul/Mul (T5, Llama) -> fuseopt.RMSNorm";
  }
  Pattern pattern() const override {
    Pattern xc = Op("Cast", "x").optional().as("cast_in");
    Pattern sq = AnyOf({Op("Pow", xc, Const("two").equals(2.0)).as("sq"), Op("Mul", xc, xc).as("sq")});
    Pattern ms = Op("ReduceMean", sq).allow_extra_inputs().as("ms");
    Pattern sd = Op("Sqrt", Op("Add", ms, Any("eps")).commutative().as("add_eps")).as("sqrt");
    Pattern normed = AnyOf({
        Op("Mul", xc, Op("Reciprocal", sd).as("recip")).commutative().as("normed"),
        Op("Div", xc, sd).as("normed"),
        Op("Mul", xc, Op("Div", Const("one").equals(1.0), sd).as("recip")).commutative().as("normed"),
    });
    Pattern back = Op("Cast", normed).optional().as("cast_out");
    return Op("Mul", back, Any("gamma")).commutative().as("scale");
  }
  Status check(const Graph&, const Match& m) const override {
    const Value* x = m.value("x");
    if (Status s = fusion::reduce_mean_last_axis(m.node("ms"), x); !s) return s;
    float eps = 0;
    if (Status s = fusion::scalar_epsilon(m.value("eps"), m.node("add_eps"), &eps); !s) return s;
    const DType xt = fusion::value_dtype(x);
    if (const Node* c = m.node("cast_in")) {
      const DType to = static_cast<DType>(c->attr_int("to", 0));
      if (to != DType::Float && to != xt)
        return Status::reject("rule 5: ", c->label(), " casts the input to ", dtype_name(to),
                              ": a Cast inside the chain changes precision");
      if (xt == DType::Undefined && to != DType::Float)
        return Status::reject("rule 5: ", c->label(), " casts an input of unknown dtype");
    }
    if (const Node* c = m.node("cast_out")) {
      const DType to = static_cast<DType>(c->attr_int("to", 0));
      if (xt == DType::Undefined || to != xt)
        return Status::reject("rule 5: ", c->label(), " casts to ", dtype_name(to), ", not back to the input's ",
                              dtype_name(xt));
    }
    if (!m.node("cast_in") && m.node("cast_out"))
      return Status::reject("rule 5: ", m.node("cast_out")->label(), " changes precision inside the chain");
    const auto d = fusion::last_dim(x);
    if (Status s = fusion::const_last_axis_vector(m.value("gamma"), "gamma", m.node("scale"), d.value_or(-1)); !s)
      return s;
    const int64_t gr = m.constant("gamma")->dims.size();
    const auto xr = fusion::rank_of(x);
    if (gr != 1 && (!xr || gr > *xr))
      return Status::reject("rule 2: gamma '", m.value("gamma")->name, "' has more dims than the normalised input");
    // gamma in x's dtype, or in float32 applied before the cast back (T5 fp32 weights).
    const DType gt = fusion::value_dtype(m.value("gamma"));
    if (xt != DType::Undefined && gt != xt)
      return Status::reject("rule 5: gamma '", m.value("gamma")->name, "' is ", dtype_name(gt), ", input is ",
                            dtype_name(xt));
    return fusion::same_float_dtype({x}, m.root);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    float eps = static_cast<float>(*scalar_value(m.value("eps")));
    Value* gamma = m.value("gamma");
    if (gamma->const_data->dims.size() != 1) gamma = rw.add_constant(gamma->name, fusion::as_vector(*gamma->const_data));
    Node* f = rw.create_node("fuseopt", "RMSNorm", {m.value("x"), gamma}, {Attribute::make_float("epsilon", eps)}, 1,
                             m.root->name);
    rw.replace_match(m, f, name());
  }
};

}  // namespace
// With the norms: SkipLayerNorm (200) and LayerNormLinear (600) take fuseopt.RMSNorm too.
FUSEOPT_REGISTER_PASS(RMSNormFusion, PassCategory::Fusion, 110);
}  // namespace fuseopt
