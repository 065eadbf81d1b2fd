// Residual Add (optionally with the dense layer's bias Add) feeding a
// LayerNormalization / fuseopt.LayerNorm / fuseopt.RMSNorm
//   Sum = (X + bias?) + skip;  Y = norm(Sum)
// => fuseopt.SkipLayerNorm(X, skip, gamma, beta?, bias?) -> Y, Sum?
// (the bias Add of a constant-weight MatMul/Gemm is left to FusedMatMul).
// Sum is a second output when the residual stream goes on (pre-LN models read
// it again after the norm); then it is not an interior value (rule 1).
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture bias{"bias"}, skip{"skip"}, x{"x"};
const NodeCapture add{"add"}, bias_add{"bias_add"}, ln{"ln"};
}  // namespace cap

// A [N] / [1,...,1,N] constant: the dense bias the fused op may absorb. Other
// constants (a position-embedding table) stay a plain skip input.
bool is_bias_vector(const Value& v) {
  if (!v.const_data || v.const_data->dims.empty()) return false;
  const auto& d = v.const_data->dims;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  return true;
}

// The bias of a MatMul/Gemm with a constant weight is left to FusedMatMul
// (a free GEMM epilogue); absorbing it here would leave a bare GEMM and keep
// LayerNormLinear (which has no bias slot) from taking the norm.
bool bias_not_of_a_gemm(const Node& add) {
  for (const Value* in : add.inputs) {
    if (!in || in->is_const() || !in->producer) continue;
    const Node* p = in->producer;
    if ((p->is("MatMul") || p->is("Gemm")) && p->input(1) && p->input(1)->is_const()) return false;
  }
  return true;
}

class SkipLayerNormFusion : public FusionPass {
 public:
  std::string name() const override { return "SkipLayerNorm"; }
  std::string description() const override {
    return "Add(X (+ bias), skip) -> LayerNorm/RMSNorm => fuseopt.SkipLayerNorm (Sum output when reused)";
  }
  Pattern pattern() const override {
    Pattern x = Op("Add", cap::x, Const(cap::bias).where(is_bias_vector, "a [N] bias"))
                    .commutative()
                    .where_node(bias_not_of_a_gemm, "a bias that is not a GEMM's")
                    .optional()
                    .as(cap::bias_add);
    Pattern sum = Op("Add", x, cap::skip).commutative().as(cap::add);
    return AnyOf({Op("LayerNormalization", sum).allow_extra_inputs().as_node(cap::ln),
                  Op("LayerNorm", sum).domain("fuseopt").allow_extra_inputs().as_node(cap::ln),
                  Op("RMSNorm", sum).domain("fuseopt").allow_extra_inputs().as_node(cap::ln)});
  }
  std::vector<const Value*> kept_outputs(const Match& m) const override { return {m.value(cap::add)}; }

  Status check(const Graph&, const Match& m) const override {
    const Node* ln = m.node(cap::ln);
    if (ln->op_type == "LayerNormalization") {
      const int64_t axis = ln->attr_int("axis", -1);
      const auto r = fusion::rank_of(m.value(cap::add));
      if (axis != -1 && !(r && axis == *r - 1))
        return Status::reject("rule 6: ", ln->label(), " normalises from axis ", axis, ", not the last axis only");
      for (size_t i = 1; i < ln->outputs.size(); ++i)
        if (ln->outputs[i] && (ln->outputs[i]->num_uses() || ln->outputs[i]->is_graph_output))
          return Status::reject(ln->label(), " has its Mean/InvStdDev outputs in use");
    }
    const Value* gamma = ln->input(1);
    const Value* beta = ln->op_type == "RMSNorm" ? nullptr : ln->input(2);
    if (Status s = fusion::const_last_axis_vector(gamma, "gamma", ln, -1); !s) return s;
    const int64_t d = gamma->const_data->dims.back();
    if (beta)
      if (Status s = fusion::const_last_axis_vector(beta, "beta", ln, d); !s) return s;
    if (m.has(cap::bias))
      if (Status s = fusion::const_last_axis_vector(m.value(cap::bias), "bias", m.node(cap::bias_add), d); !s) return s;
    for (const ValueCapture* v : {&cap::x, &cap::skip}) {
      const auto ld = fusion::last_dim(m.value(*v));
      if (ld && *ld != d)
        return Status::reject("rule 2: '", m.value(*v)->name, "' of ", m.node(cap::add)->label(), " has last dim ", *ld,
                              ", the norm's gamma has ", d);
    }
    // A [1, ..., 1, N] bias of higher rank than the sum would broadcast the sum to more dims.
    if (m.has(cap::bias)) {
      const auto sr = fusion::rank_of(m.value(cap::x));
      const int64_t br = m.constant(cap::bias)->dims.size();
      if (br != 1 && (!sr || br > *sr))
        return Status::reject("rule 3: bias '", m.value(cap::bias)->name, "' has more dims than ", m.node(cap::add)->label());
    }
    return fusion::same_float_dtype({m.value(cap::x), m.value(cap::skip), gamma, beta,
                                     m.has(cap::bias) ? m.value(cap::bias) : nullptr},
                                    ln);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* ln = m.node(cap::ln);
    const bool rms = ln->op_type == "RMSNorm";
    auto vec = [&](Value* v) -> Value* {
      if (!v || v->const_data->dims.size() == 1) return v;
      return rw.add_constant(v->name, fusion::as_vector(*v->const_data));
    };
    Value* gamma = vec(ln->input(1));
    Value* beta = rms ? nullptr : vec(ln->input(2));
    Value* bias = m.has(cap::bias) ? vec(m.value(cap::bias)) : nullptr;
    Value* sum = m.value(cap::add);
    const bool keep_sum = sum->is_graph_output || [&] {
      for (const Use& u : sum->uses)
        if (!m.covers(u.node)) return true;
      return false;
    }();
    const float eps = ln->attr_float("epsilon", rms ? 1e-6f : 1e-5f);
    Node* f = rw.create_node("fuseopt", "SkipLayerNorm", {m.value(cap::x), m.value(cap::skip), gamma, beta, bias},
                             {Attribute::make_float("epsilon", eps), Attribute::make_int("rms", rms ? 1 : 0)},
                             keep_sum ? 2 : 1, ln->name);
    std::vector<std::pair<Value*, Value*>> outs{{ln->outputs[0], f->output(0)}};
    if (keep_sum) outs.emplace_back(sum, f->output(1));
    rw.replace_match(m, f, name(), outs);
  }
};

}  // namespace
// After LayerNorm (100) and RMSNorm (110): it extends their nodes with the residual Add.
FUSEOPT_REGISTER_PASS(SkipLayerNormFusion, PassCategory::Fusion, 200);
}  // namespace fuseopt
