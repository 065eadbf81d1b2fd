// RMSNorm as T5 / Llama export it:
//   xc = Cast(x, float)?   ms = ReduceMean(Pow(xc, 2) | xc*xc)
//   n  = xc * Reciprocal(Sqrt(ms + eps))  |  xc / Sqrt(ms + eps)  |  xc * (1 / Sqrt(ms + eps))
//   (no `+ eps` at all is epsilon 0: torch 2.15's dynamo export of Helium's 1e-8 drops the Add)
//   y  = Cast(n, x.dtype)? * gamma
// => fuseopt.RMSNorm(x, gamma, epsilon). The casts are accepted only when they
// are what the fused op does anyway: widen x to float32 (or a no-op) and
// return to x's own dtype; any other cast changes precision (rule 5). The widening
// Cast may have other readers (fp16 Llama exports share Cast(x, float) with the
// residual Add): it reads only x, so it stays for them and the fused op reads x.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture eps{"eps"}, gamma{"gamma"}, one{"one"}, two{"two"}, x{"x"};
const NodeCapture add_eps{"add_eps"}, cast_in{"cast_in"}, cast_out{"cast_out"}, ms{"ms"}, normed{"normed"},
    recip{"recip"}, scale{"scale"}, sq{"sq"}, sqrt{"sqrt"};
}  // namespace cap

class RMSNormFusion : public FusionPass {
 public:
  std::string name() const override { return "RMSNorm"; }
  std::string description() const override {
    return "Pow/ReduceMean/Add?/Sqrt/Reciprocal|Div/Mul/Mul (T5, Llama) -> fuseopt.RMSNorm";
  }
  Pattern pattern() const override {
    Pattern xc = Op("Cast", cap::x).optional().as(cap::cast_in);
    Pattern sq = AnyOf({Op("Pow", xc, Const(cap::two).equals(2.0)).as(cap::sq), Op("Mul", xc, xc).as(cap::sq)});
    Pattern ms = Op("ReduceMean", sq).allow_extra_inputs().as(cap::ms);
    Pattern sd = Op("Sqrt", Op("Add", ms, Any(cap::eps)).commutative().optional().as(cap::add_eps)).as(cap::sqrt);
    Pattern normed = AnyOf({
        Op("Mul", xc, Op("Reciprocal", sd).as(cap::recip)).commutative().as(cap::normed),
        Op("Div", xc, sd).as(cap::normed),
        Op("Mul", xc, Op("Div", Const(cap::one).equals(1.0), sd).as(cap::recip)).commutative().as(cap::normed),
    });
    Pattern back = Op("Cast", normed).optional().as(cap::cast_out);
    return Op("Mul", back, Any(cap::gamma)).commutative().as(cap::scale);
  }
  // Cast(x, float) only reads x, which the fused op reads too: when something else
  // reads the widened x, the Cast stays for it (rewrite() erases only dead nodes).
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    if (const Node* c = m.node(cap::cast_in)) return {c->output(0)};
    return {};
  }
  Status check(const Graph&, const Match& m) const override {
    const Value* x = m.value(cap::x);
    if (Status s = fusion::reduce_mean_last_axis(m.node(cap::ms), x); !s) return s;
    float eps = 0;
    if (m.node(cap::add_eps))
      if (Status s = fusion::scalar_epsilon(m.value(cap::eps), m.node(cap::add_eps), &eps); !s) return s;
    const DType xt = fusion::value_dtype(x);
    if (const Node* c = m.node(cap::cast_in)) {
      const DType to = static_cast<DType>(c->attr_int("to", 0));
      if (to != DType::Float && to != xt)
        return Status::reject("rule 5: ", c->label(), " casts the input to ", dtype_name(to),
                              ": a Cast inside the chain changes precision");
      if (xt == DType::Undefined && to != DType::Float)
        return Status::reject("rule 5: ", c->label(), " casts an input of unknown dtype");
    }
    if (const Node* c = m.node(cap::cast_out)) {
      const DType to = static_cast<DType>(c->attr_int("to", 0));
      if (xt == DType::Undefined || to != xt)
        return Status::reject("rule 5: ", c->label(), " casts to ", dtype_name(to), ", not back to the input's ",
                              dtype_name(xt));
    }
    if (!m.node(cap::cast_in) && m.node(cap::cast_out))
      return Status::reject("rule 5: ", m.node(cap::cast_out)->label(), " changes precision inside the chain");
    const auto d = fusion::last_dim(x);
    if (Status s = fusion::const_last_axis_vector(m.value(cap::gamma), "gamma", m.node(cap::scale), d.value_or(-1)); !s)
      return s;
    const int64_t gr = m.constant(cap::gamma)->dims.size();
    const auto xr = fusion::rank_of(x);
    if (gr != 1 && (!xr || gr > *xr))
      return Status::reject("rule 2: gamma '", m.value(cap::gamma)->name, "' has more dims than the normalised input");
    // gamma in x's dtype, or in float32 applied before the cast back (T5 fp32 weights).
    const DType gt = fusion::value_dtype(m.value(cap::gamma));
    if (xt != DType::Undefined && gt != xt)
      return Status::reject("rule 5: gamma '", m.value(cap::gamma)->name, "' is ", dtype_name(gt), ", input is ",
                            dtype_name(xt));
    return fusion::same_float_dtype({x}, m.root);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    const float eps = m.node(cap::add_eps) ? static_cast<float>(*scalar_value(m.value(cap::eps))) : 0.f;
    Value* gamma = m.value(cap::gamma);
    if (gamma->const_data->dims.size() != 1) gamma = rw.add_constant(gamma->name, fusion::as_vector(*gamma->const_data));
    Node* f = rw.create_node("fuseopt", "RMSNorm", {m.value(cap::x), gamma}, {Attribute::make_float("epsilon", eps)}, 1,
                             m.root->name);
    rw.replace_match(m, f, name());
  }
};

}  // namespace
// With the norms: SkipLayerNorm (200) and LayerNormLinear (600) take fuseopt.RMSNorm too.
FUSEOPT_REGISTER_PASS(RMSNormFusion, PassCategory::Fusion, 110);
}  // namespace fuseopt
