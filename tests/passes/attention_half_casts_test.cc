// Attention fusion of half-precision exports whose softmax runs in float32 (torch SDPA with
// the model in fp16/bf16: model.half() before torch.onnx.export):
//   s = MatMul(Q, Kᵀ) (T)  ->  Cast(s, float)  ->  scale / mask terms (fp32)  ->  Softmax
//     -> [Where(IsNaN(P), 0, P)]  ->  Cast(P, T)  ->  MatMul(P, V) (T)
// with T = float16 or bfloat16. The fused op in T does exactly that inside (fp32 scores and
// softmax, P rounded to T for P·V), so the pair of casts is absorbed. Negative cases: the
// probabilities cast to another half type than the scores', no cast back (P·V in float32
// with V widened), a cast to double, and a widened-scores value read outside the match.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 2, Dh = 4, D = H * Dh;

struct HalfSpec {
  DType t = DType::Float16;          // the model's dtype
  DType down = DType::Undefined;     // the Cast after the Softmax (Undefined: t; Float: none)
  DType up = DType::Float;           // the Cast of the scores
  bool cast_before_mask = true;      // Cast right after Q·Kᵀ (else right before the Softmax)
  bool nan_guard = false;            // Where(IsNaN(P), 0, P) before the cast back
  bool leak_up = false;              // the widened scores are also a graph output
  DType roundtrip = DType::Undefined;  // no cast of the scores; P = Cast(Cast(P, roundtrip), t)
};

Tensor to_half(const Tensor& f, DType t) {
  Tensor r(t, f.dims);
  for (int64_t i = 0; i < f.numel(); ++i)
    r.data<uint16_t>()[i] = t == DType::Float16 ? float_to_half(f.data<float>()[i]) : float_to_bf16(f.data<float>()[i]);
  return r;
}

Value* cast(GraphBuilder& b, Value* x, DType to, const std::string& n) {
  return b.op("Cast", {x}, {Attribute::make_int("to", static_cast<int64_t>(to))}, n);
}

Value* heads(GraphBuilder& b, Value* x, const std::vector<int64_t>& perm, const std::string& n) {
  Value* r = b.op("Reshape", {x, ints(b, n + "_shape", {0, 0, H, Dh})}, {}, n + "_split_heads");
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", perm)}, n + "_t");
}

void build(GraphBuilder& b, const HalfSpec& sp) {
  Value* x = cast(b, b.input("x", DType::Float, {B, S, D}), sp.t, "x_half");
  Value* mask = b.input("mask", DType::Int64, {B, S});
  auto proj = [&](const std::string& n, uint32_t seed) {
    return b.op("MatMul", {x, b.constant("W" + n, to_half(rand_tensor({D, D}, seed), sp.t))}, {}, n + "_proj");
  };
  Value* q4 = heads(b, proj("q", 1), {0, 2, 1, 3}, "q");
  Value* kt = heads(b, proj("k", 2), {0, 2, 3, 1}, "k");
  Value* v4 = heads(b, proj("v", 3), {0, 2, 1, 3}, "v");
  Value* keep = cast(b, b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})}), DType::Bool, "keep");
  Value* s = b.op("MatMul", {q4, kt}, {}, "qk");
  Value* up = nullptr;
  const bool rt = sp.roundtrip != DType::Undefined;
  if (sp.cast_before_mask && !rt) s = up = cast(b, s, sp.up, "scores_up");
  if (rt) {  // TorchScript's softmax(s, dtype=float32).to(T) on half scores: a half Softmax
    s = b.op("Mul", {s, b.constant("sqrt_d", to_half(Tensor::scalar_float(0.5f), sp.t))}, {}, "scale");
  } else if (sp.cast_before_mask) {
    s = b.op("Div", {s, b.scalar("sqrt_d", std::sqrt(static_cast<float>(Dh)))}, {}, "scale");
    s = b.op("Where", {keep, s, b.scalar("fill", -std::numeric_limits<float>::infinity())}, {}, "masked");
  } else {
    s = b.op("Div", {s, b.constant("sqrt_d", to_half(Tensor::scalar_float(std::sqrt(static_cast<float>(Dh))), sp.t))},
             {}, "scale");
    s = up = cast(b, s, sp.up, "scores_up");
  }
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  if (sp.nan_guard) {
    Value* z = sp.up == DType::Float ? b.scalar("zero", 0.0f) : nullptr;
    if (!z) {
      Tensor d(DType::Double, {});
      d.data<double>()[0] = 0.0;
      z = b.constant("zero", d);
    }
    p = b.op("Where", {b.op("IsNaN", {p}, {}, "isnan"), z, p}, {}, "nan_guard");
  }
  if (rt) p = cast(b, cast(b, p, sp.roundtrip, "probs_wide"), sp.t, "probs_back");
  const DType down = sp.down == DType::Undefined ? sp.t : sp.down;
  if (rt) {
  } else if (down == DType::Float) v4 = cast(b, v4, DType::Float, "v_up");  // P·V in float32
  else p = cast(b, p, down, "probs_down");
  if (down != DType::Float && down != sp.t) v4 = cast(b, v4, down, "v_other");  // P·V in the other half type
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(cast(b, o, DType::Float, "y"));
  if (sp.leak_up) b.output(up);
}

std::map<std::string, Tensor> feeds() {
  std::vector<int64_t> m = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};  // batch 1: two padded keys
  return {{"x", rand_tensor({B, S, D}, 41, -2, 2)}, {"mask", Tensor::from_ints(m, {B, S})}};
}

void expect_fused(const HalfSpec& sp) {
  GraphBuilder b(17);
  build(b, sp);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  CHECK(count_op(b.graph(), "Cast") == 3);  // x_half, keep, y: the attention casts absorbed
  const Node* a = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  CHECK(a->output(0)->dtype == sp.t);
  // The CPU backend widens half nodes to fp32: the original's P rounding to T is the difference.
  require_same_outputs(*before, b.graph(), feeds(), sp.t == DType::BFloat16 ? 3e-2f : 5e-3f);
}

void expect_rejected(const HalfSpec& sp, const std::string& reason) {
  GraphBuilder b(17);
  build(b, sp);
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains(reason));
}

}  // namespace

TEST_CASE("Attention: fp16 scores widened to fp32 for mask + Softmax, P cast back, fuse", "[passes][Attention]") {
  expect_fused({});
  HalfSpec g;
  g.nan_guard = true;  // torch SDPA's Where(IsNaN(P), 0, P) before the cast back
  expect_fused(g);
  HalfSpec direct;
  direct.cast_before_mask = false;  // the Cast right before the Softmax
  expect_fused(direct);
}

TEST_CASE("Attention: bf16 scores widened to fp32, P cast back to bf16, fuse", "[passes][Attention]") {
  HalfSpec s;
  s.t = DType::BFloat16;
  s.nan_guard = true;
  expect_fused(s);
}

TEST_CASE("Attention rule 5: bf16 scores, probabilities cast to fp16", "[passes][Attention][legality]") {
  HalfSpec s;
  s.t = DType::BFloat16;
  s.down = DType::Float16;
  // (V cast to fp16 as well: P·V runs in fp16 in a bf16 model.)
  expect_rejected(s, "rule 5: Cast 'scores_up' widens bfloat16 scores to float32, but Cast 'probs_down' casts the "
                     "probabilities to float16, not back to bfloat16");
}

TEST_CASE("Attention rule 5: fp16 scores widened, P·V in float32 (V widened)", "[passes][Attention][legality]") {
  HalfSpec s;
  s.down = DType::Float;
  expect_rejected(s, "rule 5: Cast 'scores_up' widens the float16 scores to float32, but the probabilities are not "
                     "cast back to float16 before the P·V MatMul");
}

TEST_CASE("Attention rule 5: scores cast to double for the Softmax", "[passes][Attention][legality]") {
  HalfSpec s;
  s.up = DType::Double;
  s.cast_before_mask = false;  // Cast(s, double) -> Softmax -> Cast(P, float16)
  expect_rejected(s, "rule 5: Cast 'scores_up' changes the precision inside the attention chain");
}

TEST_CASE("Attention rule 1: the widened scores are read outside the match", "[passes][Attention][legality]") {
  HalfSpec s;
  s.leak_up = true;
  expect_rejected(s, "rule 1: interior value 'scores_up_y' of Cast 'scores_up' is a graph output");
}

TEST_CASE("Attention: a half Softmax with the exact round trip Cast(Cast(P, float), T) fuses", "[passes][Attention]") {
  for (DType t : {DType::Float16, DType::BFloat16}) {
    HalfSpec s;
    s.t = t;
    s.roundtrip = DType::Float;
    expect_fused(s);
  }
}

TEST_CASE("Attention rule 5: a half Softmax cast through the other half type", "[passes][Attention][legality]") {
  HalfSpec s;
  s.t = DType::BFloat16;
  s.roundtrip = DType::Float16;  // Cast(Cast(P bf16, fp16), bf16) rounds P to fp16's precision and range
  expect_rejected(s, "rule 5: Cast 'probs_wide' changes the precision of the attention probabilities");
}
