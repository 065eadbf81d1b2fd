// Conv -> BatchNormalization (inference mode, constant statistics) folds into
// the Conv's weight and bias; the result is a standard ONNX Conv:
//   s = scale / sqrt(var + eps);  W'[m] = W[m] * s[m];  B'[m] = (B[m] - mean[m]) * s[m] + bias[m]
// Computed in double, stored in the weight's dtype (float or double).
#include <cmath>

#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture W{"W"}, X{"X"}, bn_bias{"bn_bias"}, mean{"mean"}, scale{"scale"}, var{"var"};
const NodeCapture bn{"bn"}, conv{"conv"};
}  // namespace cap

class ConvBnFold : public FusionPass {
 public:
  std::string name() const override { return "ConvBnFold"; }
  std::string description() const override {
    return "Conv -> BatchNormalization with constant parameters -> Conv with folded weight and bias";
  }
  Pattern pattern() const override {
    Pattern conv = Op("Conv", cap::X, cap::W).allow_extra_inputs().as(cap::conv);
    return Op("BatchNormalization", conv, cap::scale, cap::bn_bias, cap::mean, cap::var).as_node(cap::bn);
  }
  Status check(const Graph&, const Match& m) const override {
    const Node* bn = m.node(cap::bn);
    const Node* conv = m.node(cap::conv);
    if (bn->attr_int("training_mode", 0) != 0) return Status::reject(bn->label(), " is in training mode");
    for (size_t i = 1; i < bn->outputs.size(); ++i)
      if (bn->outputs[i] && (bn->outputs[i]->num_uses() || bn->outputs[i]->is_graph_output))
        return Status::reject(bn->label(), " has its running statistics outputs in use");
    const Value* w = m.value(cap::W);
    if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", conv->label(), " is not a constant");
    const DType wt = w->const_data->dtype;
    if (wt != DType::Float && wt != DType::Double)
      return Status::reject("rule 5: weight '", w->name, "' of ", conv->label(), " is ", dtype_name(wt),
                            " (folding supports float and double)");
    if (w->const_data->dims.empty()) return Status::reject("rule 2: weight of ", conv->label(), " is a scalar");
    const int64_t channels = w->const_data->dims[0];
    std::vector<const Value*> params{m.value(cap::scale), m.value(cap::bn_bias), m.value(cap::mean), m.value(cap::var)};
    if (const Value* b = conv->input(2)) params.push_back(b);
    for (const Value* p : params) {
      if (!p->const_data)
        return Status::reject("rule 2: '", p->name, "' of ", (p == conv->input(2) ? conv : bn)->label(),
                              " is not a constant");
      if (p->const_data->dims != std::vector<int64_t>{channels})
        return Status::reject("rule 2: '", p->name, "' has shape ", shape_str(p->const_data->dims), ", expected [",
                              channels, "]");
      if (p->const_data->dtype != wt)
        return Status::reject("rule 5: '", p->name, "' is ", dtype_name(p->const_data->dtype), ", the weight is ",
                              dtype_name(wt));
    }
    return fusion::same_float_dtype({m.value(cap::X), w}, conv);
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    const Node* bn = m.node(cap::bn);
    const Node* conv = m.node(cap::conv);
    const Tensor& w = *m.value(cap::W)->const_data;
    const int64_t channels = w.dims[0];
    const int64_t per = w.numel() / std::max<int64_t>(1, channels);
    const double eps = bn->attr_float("epsilon", 1e-5f);
    auto at = [](const Value* v, int64_t i) { return v->const_data->as_double(i); };
    Tensor nw(w.dtype, w.dims), nb(w.dtype, {channels});
    auto put = [](Tensor& t, int64_t i, double v) {
      if (t.dtype == DType::Float) t.data<float>()[i] = static_cast<float>(v);
      else t.data<double>()[i] = v;
    };
    for (int64_t c = 0; c < channels; ++c) {
      const double s = at(m.value(cap::scale), c) / std::sqrt(at(m.value(cap::var), c) + eps);
      for (int64_t k = 0; k < per; ++k) put(nw, c * per + k, w.as_double(c * per + k) * s);
      const double b0 = conv->input(2) ? at(conv->input(2), c) : 0.0;
      put(nb, c, (b0 - at(m.value(cap::mean), c)) * s + at(m.value(cap::bn_bias), c));
    }
    Value* wv = rw.add_constant(m.value(cap::W)->name + "_bnfold", std::move(nw));
    Value* bv = rw.add_constant(conv->name + "_bnfold_bias", std::move(nb));
    Node* f = rw.create_node("", "Conv", {m.value(cap::X), wv, bv}, conv->attrs, 1, conv->name);
    rw.replace_match(m, f, name(), {{bn->outputs[0], f->output(0)}});
  }
};

}  // namespace
// First fusion: it leaves a standard Conv, so a BatchNormalization no longer stands
// between the Conv and what reads it when the other fusions run.
FUSEOPT_REGISTER_PASS(ConvBnFold, PassCategory::Fusion, 50);
}  // namespace fuseopt
