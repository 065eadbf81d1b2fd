// Attention fusion: score chains that are not plain scale·Q·Kᵀ + mask, spelled as a small
// program of steps applied to the raw Q·Kᵀ scores (forward order):
//   - logit soft-capping (Gemma-2): cap·tanh(scale·s / cap) -> softcap = cap; any
//     a·tanh(b·s) is softcap |a| with scale a·b (tanh is odd);
//   - mask terms before the scale (GPT-J / CodeGen: Where(causal, s, min) / sqrt(d) + mask;
//     (s + mask)·c): a Where fill is scaled with the scores (exact: the masked entries are
//     fill·c either way), an additive term is carried as mask·c (a proven key padding gets
//     mask_filter_value = fill·c, which is finfo.min·c, not -inf: fully masked rows stay
//     uniform as in the original).
// Positive cases compare the fused graph with the original on the CPU Session; negative
// cases (a mask inside the Tanh, a second non-linearity, a mask scaled by a negative
// factor) check the rule and node the report names.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 2, Dh = 4, D = H * Dh;
const float kMin = -std::numeric_limits<float>::max();

// One step of the scores program: M mul, D div, T tanh, G sigmoid, P HF additive key padding
// (1 - m)·value, W Where(m, s, value), C Where(causal [S, S] table, s, value), B + float bias,
// K torch SDPA's is_causal term Where(Trilu(ones, upper=0) == 0, min, 0), U the same with upper=1,
// X the clamp Max(s, value) (XGLM's torch.max(w, finfo.min)), H a per-head factor [H, 1, 1]
// (SwinV2's logit scale), V Swin's shifted-window mask: the scores viewed [B / 2, 2, H, S, S], a
// [1, 2, 1, S, S] term added (value 1: a Where instead), viewed back.
struct Step {
  char op;
  float value = 0;
};

Value* heads(GraphBuilder& b, Value* x, const std::vector<int64_t>& perm, const std::string& n) {
  Value* r = b.op("Reshape", {x, ints(b, n + "_shape", {0, 0, H, Dh})}, {}, n + "_split_heads");
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", perm)}, n + "_t");
}

void build(GraphBuilder& b, const std::vector<Step>& steps) {
  Value* x = b.input("x", DType::Float, {B, S, D});
  Value* mask = b.input("mask", DType::Int64, {B, S});
  auto proj = [&](const std::string& n, uint32_t seed) {
    return b.op("MatMul", {x, b.constant("W" + n, rand_tensor({D, D}, seed))}, {}, n + "_proj");
  };
  Value* q4 = heads(b, proj("q", 1), {0, 2, 1, 3}, "q");
  Value* kt = heads(b, proj("k", 2), {0, 2, 3, 1}, "k");
  Value* v4 = heads(b, proj("v", 3), {0, 2, 1, 3}, "v");
  Value* s = b.op("MatMul", {q4, kt}, {}, "qk");
  Value* m4 = b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})});
  Value* keep = b.op("Cast", {m4}, {Attribute::make_int("to", 9)});
  int i = 0;
  for (const Step& st : steps) {
    const std::string n = std::string(1, st.op) + std::to_string(i++);
    switch (st.op) {
      case 'M': s = b.op("Mul", {s, b.scalar(n + "_c", st.value)}, {}, n); break;
      case 'D': s = b.op("Div", {s, b.scalar(n + "_c", st.value)}, {}, n); break;
      case 'T': s = b.op("Tanh", {s}, {}, n); break;
      case 'X': s = b.op("Max", {s, b.scalar(n + "_floor", st.value)}, {}, n); break;
      case 'H': s = b.op("Mul", {s, b.constant(n + "_per_head", rand_tensor({H, 1, 1}, 23, 0.5f, 4.0f))}, {}, n); break;
      case 'V': {
        constexpr int64_t nW = 2;
        Value* v5 = b.op("Reshape", {s, ints(b, n + "_5d", {B / nW, nW, H, S, S})}, {}, n + "_windows");
        Tensor m = rand_tensor({1, nW, 1, S, S}, 29, -3, 0);
        for (int64_t i = 0; i < m.numel(); i += 3) m.data<float>()[i] = -100.0f;  // Swin's -100 regions
        if (st.value == 0) {
          v5 = b.op("Add", {v5, b.constant(n + "_mask", m)}, {}, n + "_add");
        } else {
          Tensor keep(DType::Bool, {1, nW, 1, S, S});
          for (int64_t i = 0; i < keep.numel(); ++i) keep.data<uint8_t>()[i] = i % 3 != 0;
          v5 = b.op("Where", {b.constant(n + "_keep", keep), v5, b.scalar(n + "_fill", -100.0f)}, {}, n + "_where");
        }
        s = b.op("Reshape", {v5, ints(b, n + "_4d", {B, H, S, S})}, {}, n + "_merge");
        break;
      }
      case 'G': s = b.op("Sigmoid", {s}, {}, n); break;
      case 'P': {
        Value* inv = b.op("Sub", {b.scalar(n + "_one", 1.0f), b.op("Cast", {keep}, {Attribute::make_int("to", 1)})});
        s = b.op("Add", {s, b.op("Mul", {inv, b.scalar(n + "_fill", st.value)})}, {}, n);
        break;
      }
      case 'W': s = b.op("Where", {keep, s, b.scalar(n + "_fill", st.value)}, {}, n); break;
      case 'C': {
        Tensor tril(DType::Bool, {S, S});
        for (int64_t r = 0; r < S; ++r)
          for (int64_t c = 0; c < S; ++c) tril.data<uint8_t>()[r * S + c] = c <= r;
        s = b.op("Where", {b.constant(n + "_tril", tril), s, b.scalar(n + "_fill", st.value)}, {}, n);
        break;
      }
      case 'B': s = b.op("Add", {s, b.constant(n + "_bias", rand_tensor({1, H, S, S}, 7, -2, 2))}, {}, n); break;
      case 'K':    // torch SDPA is_causal: Where(Trilu(ones [S, S], upper=0) == 0, min, 0) (value 1: upper=1, a near miss)
      case 'U': {
        Value* ones = b.op("Expand", {b.scalar(n + "_one", 1.0f), ints(b, n + "_ss", {S, S})});
        Value* tri = b.op("Trilu", {ones}, {Attribute::make_int("upper", st.op == 'U' ? 1 : 0)});
        Value* hidden = b.op("Equal", {tri, b.scalar(n + "_zero", 0.0f)});
        s = b.op("Add", {s, b.op("Where", {hidden, b.scalar(n + "_fill", kMin), b.scalar(n + "_z", 0.0f)})}, {}, n);
        break;
      }
      default: FAIL("unknown step");
    }
  }
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({D, D}, 13))}, {}, "out_proj"));
}

std::map<std::string, Tensor> feeds(bool fully_padded = false) {
  // Batch 1 has two padded keys (batch 0 all of them when fully_padded: uniform rows with a
  // finite fill); x large enough that the scores reach the cap.
  std::vector<int64_t> m = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  if (fully_padded) std::fill(m.begin(), m.begin() + S, 0);
  return {{"x", rand_tensor({B, S, D}, 41, -3, 3)}, {"mask", Tensor::from_ints(m, {B, S})}};
}

const Node* attention(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "Attention") return n.get();
  return nullptr;
}

// Fuses, checks the numbers against the original graph, returns the Attention node's graph.
std::unique_ptr<Graph> fused(const std::vector<Step>& steps, GraphBuilder& b) {
  build(b, steps);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  CHECK(count_op(b.graph(), "Tanh") == 0);
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
  require_same_outputs(*before, b.graph(), feeds(true), 1e-4f);
  return before;
}

void expect_rejected(const std::vector<Step>& steps, const std::string& reason) {
  GraphBuilder b(17);
  build(b, steps);
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains(reason));
}

}  // namespace

TEST_CASE("Attention: Gemma-2 soft-capping cap*tanh(scale*s/cap) fuses with softcap", "[passes][Attention]") {
  GraphBuilder b(17);
  fused({{'M', 0.5f}, {'D', 2.0f}, {'T'}, {'M', 2.0f}, {'P', kMin}}, b);
  const Node* a = attention(b.graph());
  REQUIRE(a);
  CHECK(a->attr_float("softcap", 0) == Approx(2.0f));
  CHECK(a->attr_float("scale", 0) == Approx(0.5f));
  CHECK(a->input(3));  // the key padding is still proven after the cap
}

TEST_CASE("Attention: a*tanh(b*s) in other spellings is softcap |a|, scale a*b", "[passes][Attention]") {
  {  // no division inside, the cap multiplied in twice, a where mask after the cap
    GraphBuilder b(17);
    fused({{'M', 0.25f}, {'T'}, {'M', 1.5f}, {'M', 2.0f}, {'W', -1e30f}}, b);
    const Node* a = attention(b.graph());
    CHECK(a->attr_float("softcap", 0) == Approx(3.0f));
    CHECK(a->attr_float("scale", 0) == Approx(0.75f));
  }
  {  // negative outer and inner factors: (-3)·tanh(-0.2·s) = 3·tanh(0.2·s)
    GraphBuilder b(17);
    fused({{'M', -0.2f}, {'T'}, {'M', -3.0f}, {'B'}}, b);
    const Node* a = attention(b.graph());
    CHECK(a->attr_float("softcap", 0) == Approx(3.0f));
    CHECK(a->attr_float("scale", 0) == Approx(0.6f));
  }
}

TEST_CASE("Attention: a mask inside the soft-capping Tanh is refused (rule 7)", "[passes][Attention]") {
  // tanh((s + mask) / cap): the masked scores would be capped to -cap, not kept at the fill.
  expect_rejected({{'M', 0.5f}, {'P', kMin}, {'D', 2.0f}, {'T'}, {'M', 2.0f}},
                  "rule 7: Add 'P1' adds a mask term inside the soft-capping Tanh 'T3'");
  expect_rejected({{'W', kMin}, {'T'}, {'M', 2.0f}},
                  "rule 7: Where 'W0' masks the scores inside the soft-capping Tanh 'T1'");
}

TEST_CASE("Attention: other non-linear score maps stay refused (rule 7)", "[passes][Attention]") {
  expect_rejected({{'M', 0.5f}, {'P', kMin}, {'G'}}, "rule 7: Sigmoid 'G2' transforms the attention scores non-linearly");
  expect_rejected({{'T'}, {'T'}, {'M', 2.0f}}, "rule 7: Tanh 'T0' transforms the attention scores non-linearly");
}

TEST_CASE("Attention: GPT-J's Where(causal, s, min) / sqrt(d) + mask fuses (causal + mask)", "[passes][Attention]") {
  GraphBuilder b(17);
  fused({{'C', kMin}, {'D', 2.0f}, {'P', kMin}}, b);
  const Node* a = attention(b.graph());
  REQUIRE(a);
  CHECK(a->attr_int("causal", 0) == 1);
  CHECK(a->attr_float("scale", 0) == Approx(0.5f));
  CHECK(a->input(3));
  CHECK(a->input(4) == nullptr);
}

TEST_CASE("Attention: a mask before the scale is carried scaled", "[passes][Attention]") {
  {  // (s + (1 - m)·min)·c: key padding with mask_filter_value = min·c (finite, not -inf)
    GraphBuilder b(17);
    fused({{'P', kMin}, {'M', 0.5f}}, b);
    const Node* a = attention(b.graph());
    REQUIRE(a->input(3));
    CHECK(a->attr_float("mask_filter_value", 0) == kMin * 0.5f);
    CHECK(std::isfinite(a->attr_float("mask_filter_value", 0)));
  }
  {  // Where(m, s, min) / 2: the fill is divided with the scores
    GraphBuilder b(17);
    fused({{'W', kMin}, {'D', 2.0f}}, b);
    const Node* a = attention(b.graph());
    REQUIRE(a->input(3));
    CHECK(a->attr_float("mask_filter_value", 0) == kMin / 2.0f);
    CHECK(a->attr_float("scale", 0) == Approx(0.5f));
  }
  {  // a float bias before the scale: attn_bias = bias·c, outside the op
    GraphBuilder b(17);
    fused({{'B'}, {'M', 0.5f}}, b);
    const Node* a = attention(b.graph());
    REQUIRE(a->input(4));
    REQUIRE(a->input(4)->producer);
    CHECK(a->input(4)->producer->op_type == "Mul");
  }
  {  // bias before the scale, padding after it: attn_bias = bias·c + padding
    GraphBuilder b(17);
    fused({{'B'}, {'M', 0.5f}, {'P', kMin}}, b);
    CHECK(count_op(b.graph(), "Mul") == 2);  // bias·c and the padding's (1 - m)·min
  }
}

TEST_CASE("Attention: a mask multiplied by a negative factor is refused (rule 7)", "[passes][Attention]") {
  expect_rejected({{'P', kMin}, {'M', -0.5f}}, "rule 7: Add 'P0' adds a mask term that is then multiplied by the non-positive factor");
  expect_rejected({{'W', kMin}, {'M', -1.0f}}, "rule 7: Where 'W0' masks the scores, which are then multiplied by the non-positive factor");
}

TEST_CASE("Attention rule 4: channels-first attention on 1x1-Conv projections is refused with its reason",
          "[passes][Attention]") {
  // The Stable Diffusion VAE AttnBlock: q, k, v = Conv1x1(x) [B, C, H, W] -> [B, C, H·W];
  // softmax(qᵀk · C^-1/2); out = v · Pᵀ -> [B, C, H, W].
  constexpr int64_t C = 4;
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, C, 3, 2});
  auto conv = [&](const std::string& n, uint32_t seed) {
    return b.op("Conv", {x, b.constant(n + "_w", rand_tensor({C, C, 1, 1}, seed)), b.constant(n + "_b", rand_tensor({C}, seed + 1))},
                {Attribute::make_ints("kernel_shape", {1, 1})}, n);
  };
  Value* flat = ints(b, "flat", {2, C, 6});
  Value* q = b.op("Transpose", {b.op("Reshape", {conv("q_conv", 1), flat})}, {Attribute::make_ints("perm", {0, 2, 1})});
  Value* s = b.op("Mul", {b.op("MatMul", {q, b.op("Reshape", {conv("k_conv", 3), flat})}), b.scalar("c", 0.5f)});
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {b.op("Reshape", {conv("v_conv", 5), flat}), b.op("Transpose", {p}, {Attribute::make_ints("perm", {0, 2, 1})})},
                  {}, "out_bmm");
  b.output(b.op("Reshape", {o, ints(b, "back", {2, C, 3, 2})}, {}, "out_view"));
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains("rule 4: channels-first attention MatMul 'out_bmm'"));
  CHECK_THAT(reasons(r, "Attention"), Contains("Conv 'v_conv', a 1x1-convolution projection"));
}

TEST_CASE("Attention: torch SDPA's is_causal Where(Trilu(ones) == 0, min, 0) is causal = 1", "[passes][Attention]") {
  {
    GraphBuilder b(17);
    fused({{'M', 0.5f}, {'K'}, {'P', kMin}}, b);
    const Node* a = attention(b.graph());
    CHECK(a->attr_int("causal", 0) == 1);
    CHECK(a->input(3));  // the padding is proven once the causal term is gone
    CHECK((a->inputs.size() < 5 || a->input(4) == nullptr));
  }
  {  // near miss: the upper triangle (keys after the query visible, the past hidden) stays attn_bias
    GraphBuilder b(17);
    fused({{'M', 0.5f}, {'U'}}, b);
    const Node* a = attention(b.graph());
    CHECK(a->attr_int("causal", 1) == 0);
    CHECK(a->input(4));
  }
}

TEST_CASE("Attention: XGLM's clamp Max(s + mask, finfo.min) after a proven mask fuses", "[passes][Attention]") {
  {
    GraphBuilder b(17);
    fused({{'D', 2.0f}, {'P', kMin}, {'X', kMin}}, b);
    const Node* a = attention(b.graph());
    REQUIRE(a);
    CHECK(count_op(b.graph(), "Max") == 0);
    CHECK(a->input(3));  // the key-padding mask, no attn_bias
    CHECK(!a->input(4));
    CHECK(a->attr_float("mask_filter_value", 0) == kMin);
  }
  {
    // A -inf fill under the clamp is finfo.min in effect: fully padded rows stay uniform.
    GraphBuilder b(17);
    fused({{'W', -std::numeric_limits<float>::infinity()}, {'X', kMin}, {'D', 2.0f}}, b);
    const Node* a = attention(b.graph());
    REQUIRE(a);
    CHECK(a->attr_float("mask_filter_value", 0) == kMin);
  }
}

TEST_CASE("Attention: a clamp over an unproven bias is refused; other floors are not clamps", "[passes][Attention]") {
  expect_rejected({{'B', 0}, {'X', kMin}}, "clamps scores that carry a bias the fused op adds unclamped");
  GraphBuilder b(17);
  build(b, {{'P', kMin}, {'X', -100.0f}});  // Max(s, -100) changes finite scores
  CHECK(matched(run_passes(b.graph(), {"Attention"}), "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK(count_op(b.graph(), "Max") == 1);
}

TEST_CASE("Attention: a per-head factor on Q·Kᵀ (SwinV2's logit scale) moves onto Q", "[passes][Attention]") {
  GraphBuilder b(17);
  fused({{'H', 0}, {'P', kMin}}, b);
  const Node* a = attention(b.graph());
  REQUIRE(a);
  CHECK(a->attr_float("scale", 0) == 1.0f);
  REQUIRE(a->input(0)->producer);
  CHECK(a->input(0)->producer->op_type == "Mul");  // Q times the factor repeated per channel
  GraphBuilder b2(17);
  fused({{'H', 0}, {'D', 2.0f}, {'B', 0}}, b2);
}

TEST_CASE("Attention: a per-head factor after a mask term is refused", "[passes][Attention]") {
  expect_rejected({{'P', kMin}, {'H', 0}}, "is not a constant");
}

TEST_CASE("Attention: Swin's shifted-window mask on the [B', nW, H, S, S] view is tiled into attn_bias",
          "[passes][Attention]") {
  GraphBuilder b(17);
  fused({{'D', 2.0f}, {'V', 0}}, b);
  const Node* a = attention(b.graph());
  REQUIRE(a);
  REQUIRE(a->input(4));  // the tiled [B, 1, S, S] bias
  CHECK(count_op(b.graph(), "Tile") == 1);
  GraphBuilder b2(17);
  fused({{'H', 0}, {'V', 0}, {'P', kMin}}, b2);  // SwinV2: per-head scale, window mask, then padding
}

TEST_CASE("Attention: a Where inside Swin's window view is refused", "[passes][Attention]") {
  expect_rejected({{'D', 2.0f}, {'V', 1}}, "window view with a Where");
}
