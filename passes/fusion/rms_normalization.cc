// ONNX's own RMSNormalization (opset 23) => fuseopt.RMSNorm(X, gamma){epsilon}.
//
// The dynamo exporter writes the RMS norm of T5 / Llama-family models as this one standard op
// from opset 23 on (its optimizer folds the Pow / ReduceMean / Sqrt chain RMSNorm matches at
// lower opsets). The fused norms downstream — SkipLayerNorm (residual Add + norm) and
// LayerNormLinear (norm + the GEMMs reading it) — take fuseopt.RMSNorm, so the standard op is
// turned into it first; --emit standard writes RMSNormalization back where a norm stays alone.
// Exact where the standard op computes what RMSNorm does: the last axis only (axis -1 or
// rank - 1), statistics in float32 (stash_type 1, the default), a constant scale that is a [K]
// vector (or [1, .., 1, K]) of X's dtype, Y in X's dtype.
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

namespace cap {
const ValueCapture x{"x"}, scale{"scale"};
const NodeCapture norm{"norm"};
}  // namespace cap

class OnnxRMSNormFusion : public FusionPass {
 public:
  std::string name() const override { return "OnnxRMSNorm"; }
  std::string description() const override {
    return "ONNX RMSNormalization (opset 23) over the last axis -> fuseopt.RMSNorm (so SkipLayerNorm and "
           "LayerNormLinear take it)";
  }
  Pattern pattern() const override {
    return Op("RMSNormalization", cap::x, Any(cap::scale)).as(cap::norm);
  }
  Status check(const Graph&, const Match& m) const override {
    const Node* n = m.node(cap::norm);
    const Value* x = m.value(cap::x);
    const auto r = fusion::rank_of(x);
    const int64_t axis = n->attr_int("axis", -1);
    if (axis != -1 && !(r && axis == *r - 1))
      return Status::reject("rule 6: ", n->label(), " normalises from axis ", axis, ", not the last axis only");
    if (n->attr_int("stash_type", 1) != 1)
      return Status::reject("rule 5: ", n->label(), " computes its statistics in stash_type ", n->attr_int("stash_type", 1),
                            ", not float32 as fuseopt.RMSNorm does");
    const auto d = fusion::last_dim(x);
    if (Status s = fusion::const_last_axis_vector(m.value(cap::scale), "scale", n, d.value_or(-1)); !s) return s;
    const int64_t sr = m.constant(cap::scale)->dims.size();
    if (sr != 1 && (!r || sr > *r))
      return Status::reject("rule 3: scale '", m.value(cap::scale)->name, "' of ", n->label(),
                            " has more dims than the normalised input");
    if (fusion::value_dtype(m.value(cap::scale)) != fusion::value_dtype(x) ||
        fusion::value_dtype(n->output(0)) != fusion::value_dtype(x))
      return Status::reject("rule 5: ", n->label(), ": scale or Y is of another dtype than X");
    return fusion::same_float_dtype({x}, n);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    const Node* n = m.node(cap::norm);
    Value* gamma = m.value(cap::scale);
    if (gamma->const_data->dims.size() != 1) gamma = rw.add_constant(gamma->name, fusion::as_vector(*gamma->const_data));
    Node* f = rw.create_node("fuseopt", "RMSNorm", {m.value(cap::x), gamma},
                             {Attribute::make_float("epsilon", n->attr_float("epsilon", 1e-5f))}, 1, n->name);
    rw.replace_match(m, f, name());
  }
};

}  // namespace
// Right after RMSNorm (110), before SkipLayerNorm (200) and LayerNormLinear (600), which take
// fuseopt.RMSNorm.
FUSEOPT_REGISTER_PASS(OnnxRMSNormFusion, PassCategory::Fusion, 111);
}  // namespace fuseopt
