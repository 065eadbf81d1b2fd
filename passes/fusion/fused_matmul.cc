// MatMul / Gemm with a constant weight, plus a constant bias and a following
// activation => fuseopt.FusedMatMul(A, W, bias?) {transB, alpha, activation}.
//
//   core  = Add(MatMul(A, W), bias) | Gemm(A, W, C?) | MatMul(A, W)
//   W     = W | Transpose(W)                 (2-D, folded into transB)
//   y     = core | Reshape(core, shape)      (an activation commutes with Reshape:
//                                             GPT-2's Conv1D is Gemm on a 2-D view)
//   root  = Relu(y) | erf-GELU(y) | tanh-GELU(y) | core
//
// A MatMul with neither bias nor activation is left alone (nothing to fuse).
#include <cmath>

#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// c * x in every commutative spelling.
Pattern times(Pattern x, Pattern c) { return Op("Mul", std::move(x), std::move(c)).commutative(); }

// x * 0.5 * p, with the 0.5 attached to either factor or to the product.
Pattern half_times(const Pattern& x, const Pattern& p, const std::string& tag) {
  Pattern half = Const().equals(0.5, 1e-6);
  return AnyOf({
      Op("Mul", Op("Mul", x, p).commutative().as(tag + "_m1"), half).commutative().as(tag),
      Op("Mul", Op("Mul", x, half).commutative().as(tag + "_m1"), p).commutative().as(tag),
      Op("Mul", x, Op("Mul", p, half).commutative().as(tag + "_m1")).commutative().as(tag),
  });
}

// 0.5 * y * (1 + erf(y / sqrt(2)))  (Div by 1.4142135 or Mul by 0.70710678)
Pattern erf_gelu(const Pattern& y) {
  Pattern scaled = AnyOf({Op("Div", y, Const().equals(1.41421356, 1e-5)).as("g_scale"),
                          times(y, Const().equals(0.70710678, 1e-5)).as("g_scale")});
  Pattern p = Op("Add", Op("Erf", scaled).as("g_erf"), Const().equals(1.0)).commutative().as("g_p");
  return half_times(y, p, "gelu");
}

// 0.5 * y * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3)))  (Pow or Mul spellings,
// and FastGELU's factored form)
Pattern tanh_gelu(const Pattern& y) {
  Pattern cube = AnyOf({Op("Pow", y, Const().equals(3.0)).as("t_cube"),
                        Op("Mul", Op("Mul", y, y).as("t_sq"), y).commutative().as("t_cube")});
  Pattern inner = Op("Add", y, times(cube, Const().equals(0.044715, 1e-6)).as("t_c")).commutative().as("t_in");
  // HF FastGELU spells the argument y * 0.7978845608 * (1 + 0.044715 * y * y).
  Pattern fast_inner = Op("Add", times(times(y, Const().equals(0.044715, 1e-6)).as("t_c"), y).as("t_cube"),
                          Const().equals(1.0))
                           .commutative()
                           .as("t_in");
  Pattern arg = AnyOf({times(inner, Const().equals(0.7978845608, 1e-5)).as("t_k"),
                       times(times(y, Const().equals(0.7978845608, 1e-5)).as("t_ky"), fast_inner).as("t_k")});
  Pattern t = Op("Tanh", arg).as("t_tanh");
  Pattern p = Op("Add", t, Const().equals(1.0)).commutative().as("t_p");
  return half_times(y, p, "gelu_tanh");
}

class FusedMatMulFusion : public FusionPass {
 public:
  std::string name() const override { return "FusedMatMul"; }
  std::string description() const override {
    return "MatMul|Gemm (+ bias) (+ Relu | GELU | tanh-GELU) with a constant weight -> fuseopt.FusedMatMul";
  }

  Pattern pattern() const override {
    Pattern w = AnyOf({Op("Transpose", "W").as("w_t"), Any("W")});
    Pattern mm = Op("MatMul", "A", w).as("mm");
    Pattern core = AnyOf({Op("Add", mm, Const("bias")).commutative().as("bias_add"),
                          Op("Gemm", "A", w).allow_extra_inputs().as("gemm"), mm});
    Pattern y = Op("Reshape", core, "shape").as("reshape").optional();
    return AnyOf({Op("Relu", y).as("relu"), erf_gelu(y), tanh_gelu(y), core});
  }

  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r = match_pattern(pattern(), root);
    if (!r) return r;
    const Match& m = *r.match;
    const bool act = m.has("relu") || m.has("gelu") || m.has("gelu_tanh");
    // A bare MatMul (no bias, no activation) is not a fusion candidate at all.
    if (!act && !m.has("bias_add") && !m.has("gemm")) {
      MatchResult none;
      none.reason = root->label() + ": a MatMul without bias or activation";
      return none;
    }
    return r;
  }

  Status check(const Graph&, const Match& m) const override {
    const Node* mm = m.has("gemm") ? m.node("gemm") : m.node("mm");
    const Value* w = m.value("W");
    if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", mm->label(), " is not a constant");
    const auto& wd = w->const_data->dims;
    if (wd.size() < 2)
      return Status::reject("rule 4: weight '", w->name, "' of ", mm->label(), " has shape ", shape_str(wd),
                            ", not [K, N]");
    bool trans_b = false;
    if (const Node* t = m.node("w_t")) {
      const auto perm = t->attr_ints("perm");
      if (wd.size() != 2 || !(perm.empty() || perm == std::vector<int64_t>{1, 0}))
        return Status::reject("rule 4: ", t->label(), " before the weight is not a 2-D [1, 0] transpose");
      trans_b = true;
    }
    if (const Node* g = m.node("gemm")) {
      if (g->attr_int("transA", 0) != 0)
        return Status::reject("rule 4: ", g->label(), " has transA=1 on a non-constant A");
      if (wd.size() != 2) return Status::reject("rule 4: weight of ", g->label(), " is not 2-D");
      if (g->attr_int("transB", 0) != 0) trans_b = !trans_b;
    }
    const int64_t n = trans_b ? wd[wd.size() - 2] : wd.back();
    const auto k = fusion::last_dim(m.value("A"));
    const int64_t wk = trans_b ? wd.back() : wd[wd.size() - 2];
    if (k && *k != wk)
      return Status::reject("rule 4: A '", m.value("A")->name, "' has K=", *k, ", weight '", w->name, "' has ", wk);
    const Value* bias = bias_value(m);
    if (bias) {
      if (const Node* g = m.node("gemm"); g && bias->const_data && bias->const_data->numel() == 1) {
        // A scalar C broadcasts to every column: exact as a [N] bias.
      } else {
        const Node* at = m.has("bias_add") ? m.node("bias_add") : m.node("gemm");
        if (Status s = fusion::const_last_axis_vector(bias, "bias", at, n); !s) return s;
        // [1, ..., 1, N] must not add dims to the product.
        const int64_t br = bias->const_data->dims.size();
        const auto ar = fusion::rank_of(m.value("A"));
        const int64_t out_rank = std::max<int64_t>(ar.value_or(0), static_cast<int64_t>(wd.size()));
        if (br > 1 && (!ar || br > out_rank))
          return Status::reject("rule 3: bias '", bias->name, "' of ", at->label(), " has more dims than the product");
      }
    }
    return fusion::same_float_dtype({m.value("A"), w, bias}, mm);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Value* w = m.value("W");
    bool trans_b = m.has("w_t");
    float alpha = 1.0f;
    Value* bias = bias_value(m);
    if (const Node* g = m.node("gemm")) {
      if (g->attr_int("transB", 0) != 0) trans_b = !trans_b;
      alpha = g->attr_float("alpha", 1.0f);
      const float beta = g->attr_float("beta", 1.0f);
      if (bias && beta == 0.0f) bias = nullptr;
      if (bias) {
        const auto& wd = w->const_data->dims;
        const int64_t n = trans_b ? wd[0] : wd[1];
        const Tensor& c = *bias->const_data;
        if (c.numel() == 1 || beta != 1.0f || c.dims.size() != 1) {
          // beta * C computed once here is the same single rounding Gemm does.
          Tensor nb(c.dtype, {n});
          for (int64_t j = 0; j < n; ++j) {
            const double cj = c.as_double(c.numel() == 1 ? 0 : j);
            // Gemm multiplies in the tensor's type: float stays a float product.
            const float f = beta * static_cast<float>(cj);
            switch (c.dtype) {
              case DType::Float: nb.data<float>()[j] = f; break;
              case DType::Double: nb.data<double>()[j] = beta * cj; break;
              case DType::Float16: nb.data<uint16_t>()[j] = float_to_half(f); break;
              default: nb.data<uint16_t>()[j] = float_to_bf16(f); break;  // BFloat16 (rule 5 allows floats only)
            }
          }
          bias = rw.add_constant(bias->name, nb);
        }
      }
    }
    std::string act = m.has("relu") ? "relu" : m.has("gelu") ? "gelu" : m.has("gelu_tanh") ? "gelu_tanh" : "none";
    // --approximate-gelu: the user allows erf GELU to run as the tanh form (DESIGN: numerics).
    if (act == "gelu" && options().approximate_gelu) act = "gelu_tanh";
    const Node* mm = m.has("gemm") ? m.node("gemm") : m.node("mm");
    Node* f = rw.create_node("fuseopt", "FusedMatMul", {m.value("A"), w, bias},
                             {Attribute::make_int("transB", trans_b ? 1 : 0), Attribute::make_float("alpha", alpha),
                              Attribute::make_string("activation", act)},
                             1, mm->name);
    if (const Node* r = m.node("reshape")) {
      // act(Reshape(core)) == Reshape(act(core)): the Reshape moves after the fused op.
      Node* nr = rw.create_node("", "Reshape", {f->output(0), r->input(1)}, r->attrs, 1, r->name);
      rw.replace_match(m, f, name(), {{m.root->output(0), nr->output(0)}});
    } else {
      rw.replace_match(m, f, name(), {{m.root->output(0), f->output(0)}});
    }
  }

 private:
  static Value* bias_value(const Match& m) {
    if (m.has("bias_add")) return m.value("bias");
    if (const Node* g = m.node("gemm")) return g->input(2);
    return nullptr;
  }
};

}  // namespace
FUSEOPT_REGISTER_PASS(FusedMatMulFusion, PassCategory::Fusion, 300);
}  // namespace fuseopt
