// LayerNorm spelled in primitives (opset < 17 exporters, hand-written models):
//   d = x - ReduceMean(x); var = ReduceMean(d^2 | d*d); y = d / Sqrt(var + eps)
//   (or d * Reciprocal(Sqrt(...)), d * (1 / Sqrt(...))) * gamma + beta?
// => ONNX LayerNormalization (model opset >= 17), else fuseopt.LayerNorm.
// ReduceMean's axes may be an attribute or (opset 18) an input.
// Half-precision TorchScript exports (opset < 17, model.half()) widen the centred value:
//   dc = Cast(d, double | float); var, norm from dc; y = Cast(norm, x.dtype) * gamma + beta
// accepted for fp16/bf16 x only (the fused op's statistics are fp32: wider than the
// graph's half mean, and its output is back in x's dtype, as the casts say).
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture beta{"beta"}, eps{"eps"}, gamma{"gamma"}, two{"two"}, x{"x"};
const NodeCapture add_eps{"add_eps"}, cast_in{"cast_in"}, cast_out{"cast_out"}, d{"d"}, mean{"mean"}, norm{"norm"}, recip{"recip"}, scale{"scale"},
    shift{"shift"}, sq{"sq"}, sqrt{"sqrt"}, var{"var"};
}  // namespace cap

class LayerNormFusion : public FusionPass {
 public:
  std::string name() const override { return "LayerNorm"; }
  std::string description() const override {
    return "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> LayerNormalization (fuseopt.LayerNorm before opset 17)";
  }
  Pattern pattern() const override {
    Pattern x = Any(cap::x);
    Pattern mean = Op("ReduceMean", x).allow_extra_inputs().as(cap::mean);
    Pattern d = Op("Cast", Op("Sub", x, mean).as(cap::d)).optional().as(cap::cast_in);
    Pattern sq = AnyOf({Op("Pow", d, Const(cap::two).equals(2.0)).as(cap::sq), Op("Mul", d, d).as(cap::sq)});
    Pattern var = Op("ReduceMean", sq).allow_extra_inputs().as(cap::var);
    Pattern sd = Op("Sqrt", Op("Add", var, Any(cap::eps)).commutative().as(cap::add_eps)).as(cap::sqrt);
    Pattern norm = AnyOf({Op("Div", d, sd).as(cap::norm),
                          Op("Mul", d, Op("Reciprocal", sd).as(cap::recip)).commutative().as(cap::norm),
                          Op("Mul", d, Op("Div", Const().equals(1.0), sd).as(cap::recip)).commutative().as(cap::norm)});
    Pattern back = Op("Cast", norm).optional().as(cap::cast_out);
    Pattern scaled = Op("Mul", back, Any(cap::gamma)).commutative().as(cap::scale);
    // Only a [D]-like constant is a beta; any other Add after the norm stays outside.
    Pattern beta = Const(cap::beta).where(
        [](const Value& v) { return !v.const_data->dims.empty() && v.const_data->numel() == v.const_data->dims.back(); },
        "a [D] beta");
    return Op("Add", scaled, beta).commutative().optional().as(cap::shift);
  }
  Status check(const Graph&, const Match& m) const override {
    const Value* x = m.value(cap::x);
    for (const NodeCapture* rm : {&cap::mean, &cap::var}) {
      const Node* n = m.node(*rm);
      if (Status s = fusion::reduce_mean_last_axis(n, x); !s) return s;
    }
    float eps = 0;
    if (Status s = fusion::scalar_epsilon(m.value(cap::eps), m.node(cap::add_eps), &eps); !s) return s;
    if (Status s = check_casts(m); !s) return s;
    const auto d = fusion::last_dim(x);
    if (Status s = fusion::const_last_axis_vector(m.value(cap::gamma), "gamma", m.node(cap::scale), d.value_or(-1)); !s)
      return s;
    const int64_t gn = m.constant(cap::gamma)->dims.back();
    if (m.has(cap::beta))
      if (Status s = fusion::const_last_axis_vector(m.value(cap::beta), "beta", m.node(cap::shift), gn); !s) return s;
    // gamma/beta of rank > x's rank would broadcast the output to more dims.
    const auto xr = fusion::rank_of(x);
    for (const ValueCapture* p : {&cap::gamma, &cap::beta}) {
      if (!m.has(*p)) continue;
      const int64_t pr = *fusion::rank_of(m.value(*p));
      if (pr != 1 && (!xr || pr > *xr))
        return Status::reject("rule 2: ", p->name, " '", m.value(*p)->name, "' has more dims than the normalised input");
    }
    return fusion::same_float_dtype({x, m.value(cap::gamma), m.has(cap::beta) ? m.value(cap::beta) : nullptr},
                                    m.root);
  }
  // Rule 5: the casts are Cast(d, float | double) of a half x and Cast(norm, x's dtype), or no-ops.
  static Status check_casts(const Match& m) {
    const Node* ci = m.node(cap::cast_in);
    const Node* co = m.node(cap::cast_out);
    if (!ci && !co) return Status::ok();
    const DType xt = fusion::value_dtype(m.value(cap::x));
    const bool half = xt == DType::Float16 || xt == DType::BFloat16;
    const DType in_to = ci ? static_cast<DType>(ci->attr_int("to", 0)) : xt;
    if (ci && in_to != xt && !(half && (in_to == DType::Float || in_to == DType::Double)))
      return Status::reject("rule 5: ", ci->label(), " casts the centred ", dtype_name(xt), " input to ", dtype_name(in_to),
                            ": the fused op's statistics are float32");
    if (co) {
      const DType to = static_cast<DType>(co->attr_int("to", 0));
      if (xt == DType::Undefined || to != xt)
        return Status::reject("rule 5: ", co->label(), " casts to ", dtype_name(to), ", not back to the input's ",
                              dtype_name(xt));
      if (!ci) return Status::reject("rule 5: ", co->label(), " changes precision inside the chain");
    } else if (in_to != xt) {
      return Status::reject("rule 5: ", ci->label(), " widens the centred input, but the normalised value is not cast back to ",
                            dtype_name(xt));
    }
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    float eps = static_cast<float>(*scalar_value(m.value(cap::eps)));
    Value* gamma = m.value(cap::gamma);
    Value* beta = m.has(cap::beta) ? m.value(cap::beta) : nullptr;
    if (gamma->const_data->dims.size() != 1) gamma = rw.add_constant(gamma->name, fusion::as_vector(*gamma->const_data));
    if (beta && beta->const_data->dims.size() != 1) beta = rw.add_constant(beta->name, fusion::as_vector(*beta->const_data));
    std::vector<Value*> in{m.value(cap::x), gamma};
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
