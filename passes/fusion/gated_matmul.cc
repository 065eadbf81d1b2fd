// Gated MLP (SwiGLU / GeGLU / ReGLU) => fuseopt.GatedMatMul(A, [Wg | Wu], [bg | bu]?) {activation}
//
//   separate: gate = MatMul(A, Wg) (+ bg)       up = MatMul(A, Wu) (+ bu)      (same A)
//   packed:   P = MatMul(A, W) (+ b)            gate, up = the two halves of P's last axis, by
//             Split (Phi-3 dynamo, or an earlier QkvPack) or two Slices (Phi-3 TorchScript);
//             either half may be the gate (diffusers' GEGLU: `hidden, gate = proj(x).chunk(2)`,
//             the gate second: the op's weight and bias get their halves swapped)
//   root = Mul(act(gate), up)                   act = silu (gate * Sigmoid(gate), or Swish(gate)
//                                                     of opset 24) | Relu | erf-GELU | tanh-GELU
//                                                     (FusedMatMul's spellings)
//        | SwiGLU(gate, up)                     (opset 28: the same Mul(silu(gate), up) as one op)
//
// Order 250: before FusedMatMul (300) folds the activation into the gate GEMM
// and before QkvPack (400) packs gate and up into a GEMM + Split; at that point
// both GEMMs are still plain MatMul (+ Add bias) nodes, which is the exported form
// of Llama/Mistral/Qwen2 (SwiGLU) and Gemma (tanh GeGLU).
//
// Legality (DESIGN.md):
//   1. gate, act(gate) and up are read only inside the match (checked by the driver).
//   2. Wg, Wu constant 2-D with the same K; biases constant.
//   3. biases [N] or [1, ..., 1, N] (last axis only).
//   4. gate and up have the same N (the product must not broadcast), are two different
//      GEMMs, and A's last dim is K; a packed product is split on its last axis into
//      exactly [0, N) as gate and [N, 2N) as up.
//   5. A, weights and biases share one float dtype.
//   Swish / SwiGLU are silu only with alpha 1 (sigmoid(alpha · gate)): other alphas are refused
//   (rule 4), naming the node.
#include <algorithm>
#include <optional>
#include <tuple>

#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"
#include "passes/fusion/gelu_patterns.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture A{"A"}, W{"W"}, Wg{"Wg"}, Wu{"Wu"}, bg{"bg"}, bu{"bu"}, pb{"pb"};
const NodeCapture g_add{"g_add"}, g_mm{"g_mm"}, g_slice{"g_slice"}, out{"out"}, p_add{"p_add"}, p_mm{"p_mm"},
    relu{"relu"}, sigmoid{"sigmoid"}, silu{"silu"}, split{"split"}, split_gate_second{"split_gate_second"},
    swish{"swish"}, u_add{"u_add"}, u_mm{"u_mm"}, u_slice{"u_slice"};
}  // namespace cap

// [K, Ng] | [K, Nu] -> [K, Ng + Nu] (row-major, any element size).
Tensor concat_columns(const Tensor& g, const Tensor& u) {
  const size_t es = dtype_size(g.dtype);
  const int64_t k = g.dims[0], ng = g.dims[1], nu = u.dims[1];
  Tensor r(g.dtype, {k, ng + nu});
  for (int64_t i = 0; i < k; ++i) {
    std::copy(g.bytes.begin() + i * ng * es, g.bytes.begin() + (i + 1) * ng * es, r.bytes.begin() + i * (ng + nu) * es);
    std::copy(u.bytes.begin() + i * nu * es, u.bytes.begin() + (i + 1) * nu * es,
              r.bytes.begin() + (i * (ng + nu) + ng) * es);
  }
  return r;
}

// [K, 2N] -> its column halves swapped ([K, N:2N] | [K, 0:N]); a [.., 2N] bias likewise as [2N].
Tensor swap_halves(const Tensor& t) {
  const size_t es = dtype_size(t.dtype);
  const int64_t cols = t.dims.back(), rows = t.numel() / cols, half = cols / 2;
  Tensor r(t.dtype, t.dims.size() == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{cols});
  for (int64_t i = 0; i < rows; ++i) {
    auto row = t.bytes.begin() + i * cols * es;
    auto out = r.bytes.begin() + i * cols * es;
    std::copy(row + half * es, row + cols * es, out);
    std::copy(row, row + half * es, out + (cols - half) * es);
  }
  return r;
}

// A bias as [n] of `dt`: the constant's bytes, or zeros when there is none.
Tensor bias_or_zeros(const Value* b, DType dt, int64_t n) {
  if (!b) return Tensor(dt, {n});  // zero bytes = 0.0 for every float type
  Tensor t = *b->const_data;
  t.dims = {n};
  return t;
}

class GatedMatMulFusion : public FusionPass {
 public:
  std::string name() const override { return "GatedMatMul"; }
  std::string description() const override {
    return "Mul(act(A·Wg + bg), A·Wu + bu) with act = silu|gelu|gelu_tanh|relu -> fuseopt.GatedMatMul";
  }

  Pattern pattern() const override {
    // Separate gate and up GEMMs.
    Pattern g_mm = Op("MatMul", cap::A, cap::Wg).as(cap::g_mm);
    Pattern gate = AnyOf({Op("Add", g_mm, cap::bg).commutative().as(cap::g_add), g_mm});
    Pattern u_mm = Op("MatMul", cap::A, cap::Wu).as(cap::u_mm);
    Pattern up = AnyOf({Op("Add", u_mm, cap::bu).commutative().as(cap::u_add), u_mm});
    // One packed GEMM whose halves are taken by a Split or by two Slices.
    Pattern p_mm = Op("MatMul", cap::A, cap::W).as(cap::p_mm);
    Pattern packed = AnyOf({Op("Add", p_mm, cap::pb).commutative().as(cap::p_add), p_mm});
    Pattern split_gate = Op("Split", packed).allow_extra_inputs().as_node(cap::split).out(0);
    Pattern split_up = Op("Split", packed).allow_extra_inputs().as_node(cap::split).out(1);
    Pattern slice_gate = Op("Slice", packed).allow_extra_inputs().as(cap::g_slice);
    Pattern slice_up = Op("Slice", packed).allow_extra_inputs().as(cap::u_slice);
    Pattern split_gate2 = Op("Split", packed).allow_extra_inputs().as_node(cap::split_gate_second).out(1);
    Pattern split_up1 = Op("Split", packed).allow_extra_inputs().as_node(cap::split_gate_second).out(0);
    return AnyOf({gated(gate, up), gated(split_gate, split_up), gated(split_gate2, split_up1), gated(slice_gate, slice_up)});
  }

  Status check(const Graph&, const Match& m) const override {
    for (const Node* n : {m.has(cap::swish) ? m.node(cap::swish) : nullptr, is_swiglu(m) ? m.root : nullptr})
      if (n && n->attr_float("alpha", 1.0f) != 1.0f)
        return Status::reject("rule 4: ", n->label(), " has alpha ", n->attr_float("alpha", 1.0f),
                              ": sigmoid(alpha * gate) is not silu");
    if (m.has(cap::p_mm)) return check_packed(m);
    const Node* gmm = m.node(cap::g_mm);
    const Node* umm = m.node(cap::u_mm);
    if (gmm == umm) return Status::reject("rule 4: gate and up are the same GEMM ", gmm->label());
    const Value* wg = m.value(cap::Wg);
    const Value* wu = m.value(cap::Wu);
    for (auto [w, mm] : {std::pair{wg, gmm}, std::pair{wu, umm}}) {
      if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", mm->label(), " is not a constant");
      if (w->const_data->dims.size() != 2)
        return Status::reject("rule 2: weight '", w->name, "' of ", mm->label(), " has shape ",
                              shape_str(w->const_data->dims), ", not [K, N]");
    }
    const auto& gd = wg->const_data->dims;
    const auto& ud = wu->const_data->dims;
    if (gd[0] != ud[0])
      return Status::reject("rule 2: weights of ", gmm->label(), " and ", umm->label(), " differ in K (", gd[0], " vs ",
                            ud[0], ")");
    if (gd[1] != ud[1])
      return Status::reject("rule 4: gate ", gmm->label(), " has N=", gd[1], ", up ", umm->label(), " has N=", ud[1],
                            ": the product would broadcast");
    if (const auto k = fusion::last_dim(m.value(cap::A)); k && *k != gd[0])
      return Status::reject("rule 4: A '", m.value(cap::A)->name, "' has K=", *k, ", weights have ", gd[0]);
    const int64_t n = gd[1];
    const auto ar = fusion::rank_of(m.value(cap::A));
    for (auto [b, at] : {std::pair{m.value(cap::bg), m.node(cap::g_add)}, std::pair{m.value(cap::bu), m.node(cap::u_add)}}) {
      if (!b) continue;
      if (Status s = fusion::const_last_axis_vector(b, "bias", at, n); !s) return s;
      const int64_t br = static_cast<int64_t>(b->const_data->dims.size());
      // A·W with a 2-D W has A's rank: a [1, ..., 1, N] bias must not add dims to it.
      if (br > 1 && (!ar || br > *ar))
        return Status::reject("rule 3: bias '", b->name, "' of ", at->label(), " has more dims than the product");
    }
    return fusion::same_float_dtype({m.value(cap::A), wg, wu, m.value(cap::bg), m.value(cap::bu)}, m.node(cap::out));
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    if (m.has(cap::p_mm)) {
      // Already packed: W and its bias are the op's inputs as they are ([1, ..., 1, 2N] -> [2N]),
      // their halves swapped when the gate is the second one.
      Value* w = m.value(cap::W);
      Value* bias = m.value(cap::pb);
      if (gate_second(m)) {
        w = rw.add_constant(w->name + "_gate_first", swap_halves(*w->const_data));
        if (bias) bias = rw.add_constant(bias->name + "_gate_first", swap_halves(fusion::as_vector(*bias->const_data)));
      } else if (bias && bias->const_data->dims.size() != 1) {
        bias = rw.add_constant(bias->name, fusion::as_vector(*bias->const_data));
      }
      emit(m, rw, w, bias, m.node(cap::p_mm)->name);
      return;
    }
    const Tensor& wg = *m.value(cap::Wg)->const_data;
    const Tensor& wu = *m.value(cap::Wu)->const_data;
    const int64_t n = wg.dims[1];
    Value* w = rw.add_constant(m.value(cap::Wg)->name + "_gated", concat_columns(wg, wu));
    Value* bias = nullptr;
    if (m.value(cap::bg) || m.value(cap::bu)) {
      const Tensor bg = bias_or_zeros(m.value(cap::bg), wg.dtype, n);
      const Tensor bu = bias_or_zeros(m.value(cap::bu), wg.dtype, n);
      Tensor b(wg.dtype, {2 * n});
      std::copy(bg.bytes.begin(), bg.bytes.end(), b.bytes.begin());
      std::copy(bu.bytes.begin(), bu.bytes.end(), b.bytes.begin() + bg.bytes.size());
      bias = rw.add_constant(m.node(cap::g_mm)->name + "_gated_bias", b);
    }
    emit(m, rw, w, bias, m.node(cap::g_mm)->name);
  }

 private:
  static bool is_swiglu(const Match& m) { return m.root->op_type == "SwiGLU" && m.root->domain.empty(); }

  // The packed product's gate is its second half: a Split's output 1, or the Slice from N.
  static bool gate_second(const Match& m) {
    if (m.has(cap::split_gate_second)) return true;
    if (!m.has(cap::g_slice)) return false;
    const auto starts = const_ints(m.node(cap::g_slice), 1, {});
    return starts && starts->size() == 1 && (*starts)[0] != 0;
  }

  // Mul(act(gate), up) for every activation spelling.
  static Pattern gated(const Pattern& gate, const Pattern& up) {
    Pattern silu = Op("Mul", gate, Op("Sigmoid", gate).as(cap::sigmoid)).commutative().as(cap::silu);
    Pattern act = AnyOf({silu, Op("Swish", gate).as(cap::swish), Op("Relu", gate).as(cap::relu), fusion::erf_gelu(gate),
                         fusion::tanh_gelu(gate)});
    return AnyOf({Op("Mul", act, up).commutative().as(cap::out), Op("SwiGLU", gate, up).as(cap::out)});
  }

  void emit(const Match& m, Rewriter& rw, Value* w, Value* bias, const std::string& base) const {
    const bool silu = m.has(cap::silu) || m.has(cap::swish) || is_swiglu(m);
    std::string act = silu ? "silu" : m.has(cap::relu) ? "relu" : m.has(fusion::gelu_cap::gelu) ? "gelu" : "gelu_tanh";
    // --approximate-gelu: the user allows erf GELU to run as the tanh form (DESIGN: numerics).
    if (act == "gelu" && options().approximate_gelu) act = "gelu_tanh";
    Node* f = rw.create_node("fuseopt", "GatedMatMul", {m.value(cap::A), w, bias},
                             {Attribute::make_string("activation", act)}, 1, base + "_gated");
    rw.replace_match(m, f, name(), {{m.root->output(0), f->output(0)}});
  }

  // A constant int64 vector input of `n` (nullptr input: `dflt`); nullopt when not constant.
  static std::optional<std::vector<int64_t>> const_ints(const Node* n, size_t i, std::vector<int64_t> dflt) {
    const Value* v = n->input(i);
    if (!v) return dflt;
    if (!v->const_data) return std::nullopt;
    return v->const_data->to_int_vector();
  }

  // The packed form: W [K, 2N] constant, bias [2N], halves [0, N) and [N, 2N) of the last axis.
  static Status check_packed(const Match& m) {
    const Node* pmm = m.node(cap::p_mm);
    const Value* w = m.value(cap::W);
    if (!w->const_data) return Status::reject("rule 2: weight '", w->name, "' of ", pmm->label(), " is not a constant");
    const auto& wd = w->const_data->dims;
    if (wd.size() != 2)
      return Status::reject("rule 2: weight '", w->name, "' of ", pmm->label(), " has shape ", shape_str(wd),
                            ", not [K, 2N]");
    if (const auto k = fusion::last_dim(m.value(cap::A)); k && *k != wd[0])
      return Status::reject("rule 4: A '", m.value(cap::A)->name, "' has K=", *k, ", weight has ", wd[0]);
    const int64_t two_n = wd[1];
    if (two_n % 2 != 0)
      return Status::reject("rule 4: packed weight '", w->name, "' has an odd width ", two_n, ": no equal halves");
    const int64_t n = two_n / 2;
    const auto ar = fusion::rank_of(m.value(cap::A));
    if (!ar) return Status::reject("rule 4: rank of A '", m.value(cap::A)->name, "' unknown: cannot prove the last axis");
    const int64_t last = *ar - 1;  // A·W with a 2-D W has A's rank
    auto is_last = [&](int64_t axis) { return axis == -1 || axis == last; };
    if (const Value* b = m.value(cap::pb)) {
      if (Status s = fusion::const_last_axis_vector(b, "bias", m.node(cap::p_add), two_n); !s) return s;
      if (b->const_data->dims.size() > 1 && static_cast<int64_t>(b->const_data->dims.size()) > last + 1)
        return Status::reject("rule 3: bias '", b->name, "' of ", m.node(cap::p_add)->label(), " has more dims than the product");
    }
    const Node* sp = m.has(cap::split) ? m.node(cap::split) : m.has(cap::split_gate_second) ? m.node(cap::split_gate_second) : nullptr;
    if (sp) {
      if (sp->outputs.size() != 2) return Status::reject("rule 4: ", sp->label(), " has ", sp->outputs.size(), " outputs, not 2");
      if (!is_last(sp->attr_int("axis", 0))) return Status::reject("rule 4: ", sp->label(), " does not split the last axis");
      std::vector<int64_t> sizes = sp->attr_ints("split");
      if (sp->input(1)) {
        if (!sp->input(1)->const_data) return Status::reject("rule 4: split sizes of ", sp->label(), " are not constant");
        sizes = sp->input(1)->const_data->to_int_vector();
      }
      if (!sizes.empty() && sizes != std::vector<int64_t>{n, n})
        return Status::reject("rule 4: ", sp->label(), " splits ", two_n, " columns into ", shape_str(sizes),
                              ", not two halves of ", n);
    } else {
      // Two Slices: gate = [0, N), up = [N, 2N) (an end past 2N is clamped), step 1, last axis; or
      // the gate second (gate_second: the gate Slice starts at N).
      const bool swapped = gate_second(m);
      const int64_t g_lo = swapped ? n : 0, u_lo = swapped ? 0 : n;
      for (auto [sl, lo, hi] : {std::tuple{m.node(cap::g_slice), g_lo, g_lo + n}, std::tuple{m.node(cap::u_slice), u_lo, u_lo + n}}) {
        const auto starts = const_ints(sl, 1, {}), ends = const_ints(sl, 2, {});
        const auto axes = const_ints(sl, 3, {0}), steps = const_ints(sl, 4, {1});
        if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
            steps->size() != 1)
          return Status::reject("rule 4: ", sl->label(), " is not a constant one-axis Slice");
        if (!is_last((*axes)[0]) || (*steps)[0] != 1)
          return Status::reject("rule 4: ", sl->label(), " does not take a step-1 range of the last axis");
        const bool end_ok = hi == two_n ? (*ends)[0] >= two_n : (*ends)[0] == hi;
        if ((*starts)[0] != lo || !end_ok)
          return Status::reject("rule 4: ", sl->label(), " takes [", (*starts)[0], ", ", (*ends)[0], ") of ", two_n,
                                " columns, not [", lo, ", ", hi, ")");
      }
    }
    return fusion::same_float_dtype({m.value(cap::A), w, m.value(cap::pb)}, m.node(cap::out));
  }
};

}  // namespace
// Before FusedMatMul (300) and QkvPack (400): see "Order 250" at the top of the file.
FUSEOPT_REGISTER_PASS(GatedMatMulFusion, PassCategory::Fusion, 250);
}  // namespace fuseopt
