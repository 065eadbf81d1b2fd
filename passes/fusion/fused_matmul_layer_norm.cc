// A GEMM whose output is read only by a LayerNorm over the last axis, in two forms.
//
// 1. A GELU GEMM (the prediction-head transform of BERT-family masked-LM heads:
//    dense -> GELU -> LayerNorm, then the tied vocabulary decoder):
//
//   h    = FusedMatMul(A, W, bias?){activation = gelu | gelu_tanh}
//        | Gelu(FusedMatMul(A, W, bias?){activation = none})     (the opset-20 Gelu op)
//   x    = h | Reshape(h, shape)           (last dim kept: a 2-D Gemm view, dynamo;
//                                           before the Gelu op or after the GELU)
//   root = LayerNormalization(x, gamma, beta?) | fuseopt.LayerNorm(x, gamma, beta?)
// => fuseopt.FusedMatMulLayerNorm(A, W, bias?, gamma, beta?){transB, alpha, activation, epsilon}
//    (then the Reshape, when there was one: normalising rows of N commutes with it)
//
// 2. A GELU-free GEMM into a residual norm (post-LN encoders: the attention
//    out-projection and the second FFN GEMM of every BERT layer):
//
//   h    = FusedMatMul(A, W, bias?){activation = none}
//   root = fuseopt.SkipLayerNorm(h, residual, gamma, beta?){rms = 0}   (either summand order)
// => fuseopt.FusedMatMulLayerNorm(A, W, bias?, gamma, beta?, skip = residual){activation = none}
//    (Sum = h + residual is one fp32 add, commutative, so the summand order does not matter.
//    A GEMM behind a Reshape, dynamo's 2-D Gemm view, is left unfused in this form.)
//
// Order 350: after LayerNorm (100) has recognised the norm from primitives,
// SkipLayerNorm (200) has taken the residual Add, and FusedMatMul (300) has
// folded bias and GELU into the GEMM, before LayerNormLinear (600), which would
// otherwise take the same LayerNorm into the decoder GEMM that reads it. This
// fusion wins that LayerNorm: on CUDA it turns
// GEMM + erf-GELU pass + LayerNorm (three launches, h through memory twice) into
// GEMM + one GELU-and-LayerNorm row kernel, where LayerNormLinear's norm-then-GEMM
// saves no launch over LayerNorm + GEMM (its norm still writes the normalised rows
// to scratch). The decoder stays a FusedMatMul (docs/fused_ops.md).
//
// Legality, form 1: rule 1 (h and the Reshape are read only by the norm; the norm's
// Mean/InvStdDev unused), rule 2 (W a constant, gamma/beta constants [N]),
// rule 3 (bias along the last axis), rule 4 (W 2-D; a Reshape that keeps the
// last dim N), rule 5 (one float dtype), rule 6 (last axis).
// Form 2: rule 1 (h read only by the SkipLayerNorm; its Sum unused), rule 2 (as
// form 1), rule 3 (the residual provably of h's exact shape: the fused op does not
// broadcast it; no SkipLayerNorm bias: the fused op has no slot for it, and folding
// it into the GEMM's bias would round (h + b) + residual differently; rms = 0),
// rule 4 (W 2-D), rule 5.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture A{"A"}, W{"W"}, shape{"shape"}, residual{"residual"};
const NodeCapture fmm{"fmm"}, gelu_op{"gelu_op"}, ln{"ln"}, reshape{"reshape"}, sln{"sln"};
}  // namespace cap

bool is_gelu(const std::string& act) { return act == "gelu" || act == "gelu_tanh"; }
bool no_activation(const Node& n) {
  const std::string act = n.attr_string("activation", "none");
  return act == "none" || act.empty();
}
// A FusedMatMul that already adds a residual (input 3, ResidualMatMul) is no candidate:
// FusedMatMulLayerNorm has no slot for it.
bool no_residual(const Node& n) { return n.input(3) == nullptr; }

// The activation the fused op gets: the GEMM's own, or the Gelu node's.
std::string activation_of(const Match& m) {
  if (const Node* g = m.node(cap::gelu_op)) return g->attr_string("approximate", "none") == "tanh" ? "gelu_tanh" : "gelu";
  return m.node(cap::fmm)->attr_string("activation", "none");
}

class FusedMatMulLayerNormFusion : public FusionPass {
 public:
  std::string name() const override { return "FusedMatMulLayerNorm"; }
  std::string description() const override {
    return "FusedMatMul with GELU (or Gelu after it) read only by a last-axis LayerNorm, or without activation read "
           "only by a SkipLayerNorm -> fuseopt.FusedMatMulLayerNorm";
  }

  Pattern pattern() const override {
    Pattern fmm = Op("FusedMatMul", cap::A, cap::W)
                      .domain("fuseopt")
                      .allow_extra_inputs()
                      .where_node(no_residual, "a FusedMatMul without a residual input")
                      .as(cap::fmm);
    // The Reshape of a 2-D Gemm view may come before a Gelu op or after the GELU.
    Pattern h = AnyOf({Op("Gelu", Op("Reshape", fmm, cap::shape).as(cap::reshape).optional()).as(cap::gelu_op), fmm});
    Pattern x = Op("Reshape", h, cap::shape).as(cap::reshape).optional();
    // Form 2: the activation is checked in the pattern, so that when both summands are
    // GEMMs the commutative retry can still find the GELU-free one.
    Pattern plain = Op("FusedMatMul", cap::A, cap::W)
                        .domain("fuseopt")
                        .allow_extra_inputs()
                        .where_node(no_activation, "a FusedMatMul without activation")
                        .where_node(no_residual, "a FusedMatMul without a residual input")
                        .as(cap::fmm);
    return AnyOf({Op("LayerNormalization", x).allow_extra_inputs().as_node(cap::ln),
                  Op("LayerNorm", x).domain("fuseopt").allow_extra_inputs().as_node(cap::ln),
                  Op("SkipLayerNorm", plain, cap::residual)
                      .domain("fuseopt")
                      .commutative()
                      .allow_extra_inputs()
                      .as_node(cap::sln)});
  }

  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r = match_pattern(built_pattern(), root);
    if (!r || r.match->has(cap::sln)) return r;
    const Match& m = *r.match;
    // Only a GELU makes form 1 (a GELU-free GEMM before a plain norm is not a
    // candidate at all, so it leaves no rejection in the report).
    const std::string own = m.node(cap::fmm)->attr_string("activation", "none");
    const bool ok = m.has(cap::gelu_op) ? (own == "none" || own.empty()) : is_gelu(own);
    if (!ok) {
      MatchResult none;
      none.reason = root->label() + ": the GEMM before the norm has activation '" + own + "', not one GELU";
      return none;
    }
    return r;
  }

  Status check(const Graph&, const Match& m) const override {
    int64_t n = 0;
    if (Status s = check_gemm(m, &n); !s) return s;
    return m.has(cap::sln) ? check_skip_norm(m, n) : check_norm(m, n);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* fmm = m.node(cap::fmm);
    auto vec = [&](Value* v) -> Value* {
      if (!v || v->const_data->dims.size() == 1) return v;
      return rw.add_constant(v->name, fusion::as_vector(*v->const_data));
    };
    auto attrs = [&](const std::string& act, float eps) {
      return std::vector<Attribute>{Attribute::make_int("transB", fmm->attr_int("transB", 0) != 0 ? 1 : 0),
                                    Attribute::make_float("alpha", fmm->attr_float("alpha", 1.0f)),
                                    Attribute::make_string("activation", act), Attribute::make_float("epsilon", eps)};
    };
    if (Node* sln = m.node(cap::sln)) {
      // Inputs are positional: an omitted bias or beta keeps its slot before skip.
      Node* f = rw.create_node("fuseopt", "FusedMatMulLayerNorm",
                               {m.value(cap::A), m.value(cap::W), vec(fmm->input(2)), vec(sln->input(2)),
                                vec(sln->input(3)), m.value(cap::residual)},
                               attrs("none", sln->attr_float("epsilon", 1e-5f)), 1, fmm->name);
      rw.replace_match(m, f, name(), {{sln->output(0), f->output(0)}});
      return;
    }
    Node* ln = m.node(cap::ln);
    std::string act = activation_of(m);
    // --approximate-gelu: the user allows erf GELU to run as the tanh form (as FusedMatMul does).
    if (act == "gelu" && options().approximate_gelu) act = "gelu_tanh";
    std::vector<Value*> in{m.value(cap::A), m.value(cap::W), vec(fmm->input(2)), vec(ln->input(1)), vec(ln->input(2))};
    if (!in.back()) in.pop_back();
    Node* f = rw.create_node("fuseopt", "FusedMatMulLayerNorm", in, attrs(act, ln->attr_float("epsilon", 1e-5f)), 1,
                             fmm->name);
    Value* y = f->output(0);
    if (const Node* r = m.node(cap::reshape)) {
      // norm(Reshape(h)) == Reshape(norm(h)) when the last dim stays N: the Reshape moves after the op.
      y = rw.create_node("", "Reshape", {y, r->input(1)}, r->attrs, 1, r->name)->output(0);
    }
    rw.replace_match(m, f, name(), {{ln->output(0), y}});
  }

 private:
  // Both forms: W, A and the GEMM's bias (rules 2, 3, 4); the GEMM's N through *n.
  static Status check_gemm(const Match& m, int64_t* n) {
    const Node* fmm = m.node(cap::fmm);
    const Value* w = m.value(cap::W);
    if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", fmm->label(), " is not a constant");
    const auto& wd = w->const_data->dims;
    if (wd.size() != 2)
      return Status::reject("rule 4: weight '", w->name, "' of ", fmm->label(), " has shape ", shape_str(wd),
                            ", not a 2-D [K, N] (the fused op folds A's batch into the GEMM's rows)");
    const bool trans_b = fmm->attr_int("transB", 0) != 0;
    *n = trans_b ? wd[0] : wd[1];
    const int64_t k = trans_b ? wd[1] : wd[0];
    if (const auto ak = fusion::last_dim(m.value(cap::A)); ak && *ak != k)
      return Status::reject("rule 4: A '", m.value(cap::A)->name, "' of ", fmm->label(), " has K=", *ak, ", weight '",
                            w->name, "' has ", k);
    if (const auto ar = fusion::rank_of(m.value(cap::A)); ar && *ar < 1)
      return Status::reject("rule 4: A '", m.value(cap::A)->name, "' of ", fmm->label(), " is a scalar");
    if (const Value* bias = fmm->input(2))
      if (Status s = fusion::const_last_axis_vector(bias, "bias", fmm, *n); !s) return s;
    return Status::ok();
  }

  // Form 1: the norm after the GELU (rules 1, 2, 4, 5, 6).
  static Status check_norm(const Match& m, int64_t n) {
    const Node* fmm = m.node(cap::fmm);
    const Node* ln = m.node(cap::ln);
    const Value* x = ln->input(0);  // what the norm reads
    if (const Node* r = m.node(cap::reshape)) {
      // Rows of the reshaped tensor are rows of h exactly when its last dim is N.
      const auto ld = fusion::last_dim(m.value(cap::reshape));
      if (!ld || *ld != n)
        return Status::reject("rule 4: ", r->label(), " between ", fmm->label(), " and ", ln->label(),
                              ld ? " makes the last dim " + std::to_string(*ld) : std::string(" has an unknown last dim"),
                              ", not the GEMM's N=", n);
    }
    if (ln->op_type == "LayerNormalization") {
      const int64_t axis = ln->attr_int("axis", -1);
      const auto r = fusion::rank_of(x);
      if (axis != -1 && !(r && axis == *r - 1))
        return Status::reject("rule 6: ", ln->label(), " normalises from axis ", axis, ", not the last axis only");
      for (size_t i = 1; i < ln->outputs.size(); ++i)
        if (ln->outputs[i] && (ln->outputs[i]->num_uses() || ln->outputs[i]->is_graph_output))
          return Status::reject("rule 1: ", ln->label(), " output '", ln->outputs[i]->name,
                                "' (Mean/InvStdDev) is read");
    }
    const Value* gamma = ln->input(1);
    const Value* beta = ln->input(2);
    if (Status s = fusion::const_last_axis_vector(gamma, "gamma", ln, n); !s) return s;
    if (beta)
      if (Status s = fusion::const_last_axis_vector(beta, "beta", ln, n); !s) return s;
    // [1, ..., 1, N] parameters of a higher rank than the norm's input would
    // broadcast the output to more dims.
    for (const Value* p : {gamma, beta}) {
      if (!p || p->const_data->dims.size() == 1) continue;
      const auto xr = fusion::rank_of(x);
      if (!xr || static_cast<int64_t>(p->const_data->dims.size()) > *xr)
        return Status::reject("rule 2: '", p->name, "' of ", ln->label(), " has more dims than the normalised input");
    }
    return fusion::same_float_dtype({m.value(cap::A), m.value(cap::W), fmm->input(2), x, gamma, beta}, ln);
  }

  // Form 2: the SkipLayerNorm after the GELU-free GEMM (rules 1, 2, 3, 5).
  static Status check_skip_norm(const Match& m, int64_t n) {
    const Node* fmm = m.node(cap::fmm);
    const Node* sln = m.node(cap::sln);
    const Value* h = m.value(cap::fmm);
    const Value* res = m.value(cap::residual);
    // (The driver has checked that h has no reader outside the match.)
    if (res == h)
      return Status::reject("rule 1: ", sln->label(), " adds '", h->name, "' of ", fmm->label(), " to itself");
    for (size_t i = 1; i < sln->outputs.size(); ++i)
      if (sln->outputs[i] && (sln->outputs[i]->num_uses() || sln->outputs[i]->is_graph_output))
        return Status::reject("rule 1: ", sln->label(), " output '", sln->outputs[i]->name,
                              "' (Sum) is read; the fused op has no Sum output");
    if (sln->attr_int("rms", 0) != 0)
      return Status::reject("rule 3: ", sln->label(), " is an RMS norm (rms = 1); the fused op normalises as LayerNorm");
    if (const Value* b = sln->input(4))
      return Status::reject("rule 3: ", sln->label(), " adds its own bias '", b->name,
                            "', which the fused op has no slot for");
    // The fused op adds skip element by element: a residual that broadcasts (or whose
    // shape is not known to match) would change Y's shape or be read out of bounds.
    const auto hs = fusion::recorded_shape(h), rs = fusion::recorded_shape(res);
    if (!hs || !rs || *hs != *rs)
      return Status::reject("rule 3: residual '", res->name, "' ", rs ? shape_str(*rs) : std::string("(shape unknown)"),
                            " of ", sln->label(), " is not provably of the shape of '", h->name, "' ",
                            hs ? shape_str(*hs) : std::string("(shape unknown)"), " from ", fmm->label());
    const Value* gamma = sln->input(2);
    const Value* beta = sln->input(3);
    if (Status s = fusion::const_last_axis_vector(gamma, "gamma", sln, n); !s) return s;
    if (beta)
      if (Status s = fusion::const_last_axis_vector(beta, "beta", sln, n); !s) return s;
    return fusion::same_float_dtype({m.value(cap::A), m.value(cap::W), fmm->input(2), res, gamma, beta}, sln);
  }
};

}  // namespace
// After LayerNorm (100), SkipLayerNorm (200) and FusedMatMul (300), before LayerNormLinear
// (600): see "Order 350" at the top of the file.
FUSEOPT_REGISTER_PASS(FusedMatMulLayerNormFusion, PassCategory::Fusion, 350);
}  // namespace fuseopt
