// MatMul / Gemm with a constant weight, plus a constant bias and a following
// activation => fuseopt.FusedMatMul(A, W, bias?) {transB, alpha, activation}.
//
//   core  = Add(MatMul(A, W), bias) | Gemm(A, W, C?) | MatMul(A, W)
//   W     = W | Transpose(W)                 (2-D, folded into transB)
//   y     = core | Reshape(core, shape)      (an activation commutes with Reshape:
//                                             GPT-2's Conv1D is Gemm on a 2-D view)
//   root  = Relu(y) | erf-GELU(y) | tanh-GELU(y) | Tanh(y) | relu2(y) | core
//                                            (Tanh: BERT's pooler, RoBERTa's
//                                             classification head)
//   relu2 = Pow(Relu(y), 2) | Mul(r, r) with r = Relu(y)
//                                           (squared ReLU: Nemotron, Persimmon;
//                                            the exponent is checked in check())
//   quick_gelu = Mul(y, Sigmoid(Mul(y, 1.702)))  (CLIP's QuickGELU, Stable Diffusion's
//                                            text encoder; 1.702 as float32 exactly)
//   silu  = Mul(y, Sigmoid(y))               (a plain SiLU after one GEMM)
//
// A MatMul with neither bias nor activation is left alone (nothing to fuse).
#include <cmath>

#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"
#include "passes/fusion/gelu_patterns.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture A{"A"}, W{"W"}, bias{"bias"}, shape{"shape"}, exponent{"exponent"};
const NodeCapture bias_add{"bias_add"}, gemm{"gemm"}, mm{"mm"}, relu{"relu"}, reshape{"reshape"},
    tanh{"tanh"}, w_t{"w_t"}, relu2{"relu2"}, relu2_relu{"relu2_relu"}, quick_gelu{"quick_gelu"},
    quick_gelu_scale{"quick_gelu_scale"}, silu{"silu"}, sigmoid{"sigmoid"};
}  // namespace cap

// The GELU spellings live in gelu_patterns.h (shared with GatedMatMul).
using fusion::erf_gelu;
using fusion::tanh_gelu;

// Squared ReLU's exponent (Pow form): exactly 2 in any numeric type (an int64 2 is
// the same square), one element, and not of a higher rank than its base (a
// [1, 1, 1, 1] exponent on a rank-3 value would add a dim to the result).
Status squared_exponent(const Value* e, const Node* pow, const Value* base) {
  if (!e->const_data) return Status::reject("rule 2: exponent '", e->name, "' of ", pow->label(), " is not a constant");
  const Tensor& t = *e->const_data;
  if (t.numel() != 1 || t.dtype == DType::String)
    return Status::reject("rule 2: exponent '", e->name, "' of ", pow->label(), " has shape ", shape_str(t.dims),
                          ", not one number");
  const auto base_rank = fusion::rank_of(base);
  if (t.dims.size() > 1 && (!base_rank || static_cast<int64_t>(t.dims.size()) > *base_rank))
    return Status::reject("rule 3: exponent '", e->name, "' of ", pow->label(), " has rank ", t.dims.size(),
                          ", more than its base: it would broadcast the result");
  if (t.as_double(0) != 2.0)
    return Status::reject(pow->label(), " raises to ", t.as_double(0), ", not 2: not a squared ReLU");
  return Status::ok();
}

class FusedMatMulFusion : public FusionPass {
 public:
  std::string name() const override { return "FusedMatMul"; }
  std::string description() const override {
    return "MatMul|Gemm (+ bias) (+ Relu | GELU | tanh-GELU | Tanh | squared Relu | QuickGELU | SiLU) with a constant "
           "weight -> "
           "fuseopt.FusedMatMul";
  }

  Pattern pattern() const override {
    Pattern w = AnyOf({Op("Transpose", cap::W).as(cap::w_t), Any(cap::W)});
    Pattern mm = Op("MatMul", cap::A, w).as(cap::mm);
    Pattern core = AnyOf({Op("Add", mm, Const(cap::bias)).commutative().as(cap::bias_add),
                          Op("Gemm", cap::A, w).allow_extra_inputs().as(cap::gemm), mm});
    Pattern y = Op("Reshape", core, cap::shape).as(cap::reshape).optional();
    // Squared ReLU: the one Relu node read twice by the Mul (the capture binds it once).
    Pattern r = Op("Relu", y).as(cap::relu2_relu);
    Pattern relu2 = AnyOf({Op("Pow", r, cap::exponent).as(cap::relu2), Op("Mul", r, r).as(cap::relu2)});
    // y * sigmoid(1.702 * y) and y * sigmoid(y): y is read twice (its captures bind it once).
    Pattern scaled = Op("Mul", y, Const().equals(1.702, 1e-7)).commutative().as(cap::quick_gelu_scale);
    Pattern quick_gelu = Op("Mul", y, Op("Sigmoid", scaled).as(cap::sigmoid)).commutative().as(cap::quick_gelu);
    Pattern silu = Op("Mul", y, Op("Sigmoid", y).as(cap::sigmoid)).commutative().as(cap::silu);
    return AnyOf({relu2, quick_gelu, silu, Op("Relu", y).as(cap::relu), erf_gelu(y), tanh_gelu(y),
                  Op("Tanh", y).as(cap::tanh), core});
  }

  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r = match_pattern(built_pattern(), root);
    if (!r) return r;
    const Match& m = *r.match;
    const bool act = m.has(cap::relu) || m.has(fusion::gelu_cap::gelu) || m.has(fusion::gelu_cap::gelu_tanh) ||
                     m.has(cap::tanh) || m.has(cap::relu2) || m.has(cap::quick_gelu) || m.has(cap::silu);
    // A bare MatMul (no bias, no activation) is not a fusion candidate at all.
    if (!act && !m.has(cap::bias_add) && !m.has(cap::gemm)) {
      MatchResult none;
      none.reason = root->label() + ": a MatMul without bias or activation";
      return none;
    }
    return r;
  }

  Status check(const Graph&, const Match& m) const override {
    const Node* mm = m.has(cap::gemm) ? m.node(cap::gemm) : m.node(cap::mm);
    if (const Node* p = m.node(cap::relu2); p && p->is("Pow"))
      if (Status s = squared_exponent(m.value(cap::exponent), p, m.value(cap::relu2_relu)); !s) return s;
    const Value* w = m.value(cap::W);
    if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", mm->label(), " is not a constant");
    const auto& wd = w->const_data->dims;
    if (wd.size() < 2)
      return Status::reject("rule 4: weight '", w->name, "' of ", mm->label(), " has shape ", shape_str(wd),
                            ", not [K, N]");
    bool trans_b = false;
    if (const Node* t = m.node(cap::w_t)) {
      const auto perm = t->attr_ints("perm");
      if (wd.size() != 2 || !(perm.empty() || perm == std::vector<int64_t>{1, 0}))
        return Status::reject("rule 4: ", t->label(), " before the weight is not a 2-D [1, 0] transpose");
      trans_b = true;
    }
    if (const Node* g = m.node(cap::gemm)) {
      if (g->attr_int("transA", 0) != 0)
        return Status::reject("rule 4: ", g->label(), " has transA=1 on a non-constant A");
      if (wd.size() != 2) return Status::reject("rule 4: weight of ", g->label(), " is not 2-D");
      if (g->attr_int("transB", 0) != 0) trans_b = !trans_b;
    }
    const int64_t n = trans_b ? wd[wd.size() - 2] : wd.back();
    const auto k = fusion::last_dim(m.value(cap::A));
    const int64_t wk = trans_b ? wd.back() : wd[wd.size() - 2];
    if (k && *k != wk)
      return Status::reject("rule 4: A '", m.value(cap::A)->name, "' has K=", *k, ", weight '", w->name, "' has ", wk);
    const Value* bias = bias_value(m);
    if (bias) {
      if (const Node* g = m.node(cap::gemm); g && bias->const_data && bias->const_data->numel() == 1) {
        // A scalar C broadcasts to every column: exact as a [N] bias.
      } else {
        const Node* at = m.has(cap::bias_add) ? m.node(cap::bias_add) : m.node(cap::gemm);
        if (Status s = fusion::const_last_axis_vector(bias, "bias", at, n); !s) return s;
        // [1, ..., 1, N] must not add dims to the product.
        const int64_t br = bias->const_data->dims.size();
        const auto ar = fusion::rank_of(m.value(cap::A));
        const int64_t out_rank = std::max<int64_t>(ar.value_or(0), static_cast<int64_t>(wd.size()));
        if (br > 1 && (!ar || br > out_rank))
          return Status::reject("rule 3: bias '", bias->name, "' of ", at->label(), " has more dims than the product");
      }
    }
    return fusion::same_float_dtype({m.value(cap::A), w, bias}, mm);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Value* w = m.value(cap::W);
    bool trans_b = m.has(cap::w_t);
    float alpha = 1.0f;
    Value* bias = bias_value(m);
    if (const Node* g = m.node(cap::gemm)) {
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
    std::string act = m.has(cap::quick_gelu)               ? "quick_gelu"
                      : m.has(cap::silu)                   ? "silu"
                      : m.has(cap::relu2)                  ? "relu2"
                      : m.has(cap::relu)                   ? "relu"
                      : m.has(fusion::gelu_cap::gelu)      ? "gelu"
                      : m.has(fusion::gelu_cap::gelu_tanh) ? "gelu_tanh"
                      : m.has(cap::tanh)                   ? "tanh"
                                                           : "none";
    // --approximate-gelu: the user allows erf GELU to run as the tanh form (DESIGN: numerics).
    if (act == "gelu" && options().approximate_gelu) act = "gelu_tanh";
    const Node* mm = m.has(cap::gemm) ? m.node(cap::gemm) : m.node(cap::mm);
    Node* f = rw.create_node("fuseopt", "FusedMatMul", {m.value(cap::A), w, bias},
                             {Attribute::make_int("transB", trans_b ? 1 : 0), Attribute::make_float("alpha", alpha),
                              Attribute::make_string("activation", act)},
                             1, mm->name);
    if (const Node* r = m.node(cap::reshape)) {
      // act(Reshape(core)) == Reshape(act(core)): the Reshape moves after the fused op.
      Node* nr = rw.create_node("", "Reshape", {f->output(0), r->input(1)}, r->attrs, 1, r->name);
      rw.replace_match(m, f, name(), {{m.root->output(0), nr->output(0)}});
    } else {
      rw.replace_match(m, f, name(), {{m.root->output(0), f->output(0)}});
    }
  }

 private:
  static Value* bias_value(const Match& m) {
    if (m.has(cap::bias_add)) return m.value(cap::bias);
    if (const Node* g = m.node(cap::gemm)) return g->input(2);
    return nullptr;
  }
};

}  // namespace
// After GatedMatMul (250), which needs the gate's activation still apart; before
// AddRelu (310: Relu(MatMul + bias) is a FusedMatMul), QkvPack (400) and
// LayerNormLinear (600), which build on its nodes.
FUSEOPT_REGISTER_PASS(FusedMatMulFusion, PassCategory::Fusion, 300);
}  // namespace fuseopt
