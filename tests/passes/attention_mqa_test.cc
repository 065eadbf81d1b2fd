// Attention fusion of multi-query attention whose single kv head is broadcast by
// the Q·Kᵀ and P·V MatMuls themselves (no repeat_kv), spelled the way the Hugging
// Face Falcon and GPT-BigCode exports spell it:
//   - Falcon (dynamo): one fused QKV projection viewed as [B, S, H+2, Dh]; Q is a
//     Slice of the heads, K and V are GatherND picks of the transposed
//     [H+2, B, S, Dh] view, moved back to [B, 1, S, Dh];
//   - GPT-BigCode: Split of Unsqueeze(qkv, 1), so the Q head reshape reads a
//     [B, 1, S, H·Dh] tensor, K and V stay [B, 1, S, Dh].
// Positive tests check kv_num_heads = 1 and that the fused graph gives the
// original's numbers; negative tests check that broadcasts the fused op cannot
// express (over the batch axis, K and V with different head counts, a query head
// count that K's does not divide, a key head count that is not known) and Gemma-2
// logit soft-capping are rejected
// with their reason.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 4, Dh = 3, D = H * Dh;

enum class Kv {
  Falcon,        // K, V gathered from the transposed fused QKV view: [1, B, S, Dh] -> [B, 1, S, Dh]
  BigCode,       // Split of Unsqueeze(qkv, 1): Q [B, 1, S, H·Dh] reshaped to heads, K/V [B, 1, S, Dh]
  BatchOne,      // K and V taken from batch item 0 only ([1, 1, S, Dh]): broadcast over the batch
  VAllHeads,     // K has one head, V has H heads: not one kv head count
  TwoKeyHeads,   // Q has 3 heads, K and V 2 (not a divisor; the MatMul cannot broadcast it either)
  SoftCap,       // Falcon layout plus cap * tanh(scores / cap) before the mask (Gemma-2): softcap = cap
  UnknownKeyHeads,  // K is a graph input [batch, kv_heads, seq, Dh] with a symbolic head count
};

Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  int64_t len = static_cast<int64_t>(v.size());
  return b.constant(n, Tensor::from_ints(v, {len}));
}

Value* transpose(GraphBuilder& b, Value* x, std::vector<int64_t> perm, const std::string& n) {
  return b.op("Transpose", {x}, {Attribute::make_ints("perm", perm)}, n);
}

// Slice of `x` along `axis` from `start` to `end`.
Value* slice(GraphBuilder& b, Value* x, int64_t axis, int64_t start, int64_t end, const std::string& n) {
  return b.op("Slice", {x, ints(b, n + "_s", {start}), ints(b, n + "_e", {end}), ints(b, n + "_a", {axis})}, {}, n);
}

// Dim i of x as a 1-element shape tensor (Shape with start/end, opset >= 15).
Value* dim_of(GraphBuilder& b, Value* x, int64_t i, const std::string& n) {
  return b.op("Shape", {x}, {Attribute::make_int("start", i), Attribute::make_int("end", i + 1)}, n);
}

// Builds the graph; returns the query head count it uses.
int64_t build(GraphBuilder& b, Kv kind, bool with_mask) {
  const int64_t hq = kind == Kv::TwoKeyHeads ? 3 : H;
  const int64_t hkv = kind == Kv::TwoKeyHeads ? 2 : 1;
  const int64_t heads_total = hq + 2 * hkv;
  Value* x = b.input("x", DType::Float, {-1, -1, D}, {"batch", "seq"});
  Value* mask = with_mask ? b.input("mask", DType::Int64, {-1, -1}, {"batch", "seq"}) : nullptr;
  Value* qkv = b.op("MatMul", {x, b.constant("Wqkv", rand_tensor({D, heads_total * Dh}, 1))}, {}, "qkv_proj");
  Value *q4 = nullptr, *kt = nullptr, *v4 = nullptr;
  if (kind == Kv::BigCode) {
    Value* u = b.op("Unsqueeze", {qkv, ints(b, "u_ax", {1})}, {}, "qkv_unsq");  // [B, 1, S, (H+2)·Dh]
    Node* sp = b.node("Split", {u, ints(b, "sizes", {H * Dh, Dh, Dh})}, 3, {Attribute::make_int("axis", -1)});
    Value* target = b.op("Concat", {dim_of(b, x, 0, "bdim"), dim_of(b, x, 1, "sdim"), ints(b, "h_minus", {-1}),
                                    ints(b, "h_dim", {Dh})},
                         {Attribute::make_int("axis", 0)}, "q_target");
    q4 = transpose(b, b.op("Reshape", {sp->outputs[0], target}, {}, "q_view"), {0, 2, 1, 3}, "q_t");
    kt = transpose(b, sp->outputs[1], {0, 1, 3, 2}, "k_t");  // [B, 1, Dh, S]
    v4 = sp->outputs[2];                                      // [B, 1, S, Dh]
  } else {
    Value* view = b.op("Reshape", {qkv, ints(b, "view_shape", {0, 0, heads_total, Dh})}, {}, "qkv_view");
    q4 = transpose(b, slice(b, view, 2, 0, hq, "q_slice"), {0, 2, 1, 3}, "q_t");
    if (kind == Kv::TwoKeyHeads) {
      kt = transpose(b, slice(b, view, 2, hq, hq + 2, "k_slice"), {0, 2, 3, 1}, "k_t");
      v4 = transpose(b, slice(b, view, 2, hq + 2, hq + 4, "v_slice"), {0, 2, 1, 3}, "v_t");
    } else if (kind == Kv::BatchOne) {
      Value* first = slice(b, view, 0, 0, 1, "batch0");  // [1, S, H+2, Dh]
      kt = transpose(b, slice(b, first, 2, H, H + 1, "k_slice"), {0, 2, 3, 1}, "k_t");
      v4 = transpose(b, slice(b, first, 2, H + 1, H + 2, "v_slice"), {0, 2, 1, 3}, "v_t");
    } else {
      Value* hbsd = transpose(b, view, {2, 0, 1, 3}, "heads_first");  // [H+2, B, S, Dh]
      auto pick = [&](int64_t i, const std::string& n) {
        Value* idx = b.constant(n + "_idx", Tensor::from_ints({i - heads_total}, {1, 1}));  // negative, like the export
        Value* g = b.op("GatherND", {hbsd, idx}, {Attribute::make_int("batch_dims", 0)}, n);  // [1, B, S, Dh]
        return transpose(b, g, {1, 0, 2, 3}, n + "_t");                                     // [B, 1, S, Dh]
      };
      kt = transpose(b, pick(H, "k_pick"), {0, 1, 3, 2}, "k_tt");
      if (kind == Kv::UnknownKeyHeads)
        kt = transpose(b, b.input("k_in", DType::Float, {-1, -1, -1, Dh}, {"batch", "kv_heads", "seq"}), {0, 1, 3, 2},
                       "k_in_t");
      v4 = kind == Kv::VAllHeads ? transpose(b, slice(b, view, 2, 0, H, "v_slice"), {0, 2, 1, 3}, "v_t")
                                 : pick(H + 1, "v_pick");
    }
  }
  Value* sc = b.op("MatMul", {q4, kt}, {}, "qk");
  sc = b.op("Div", {sc, b.scalar("sqrt_d", std::sqrt(static_cast<float>(Dh)))}, {}, "scale");
  if (kind == Kv::SoftCap) {
    Value* cap = b.scalar("cap", 50.0f);
    sc = b.op("Mul", {b.op("Tanh", {b.op("Div", {sc, cap})}, {}, "softcap_tanh"), cap});
  }
  if (mask) {  // HF additive mask over a bool cast: provably a [B, S_kv] key-padding mask
    Value* m4 = b.op("Cast", {b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})})}, {Attribute::make_int("to", 9)});
    Value* inv = b.op("Sub", {b.scalar("one", 1.0f), b.op("Cast", {m4}, {Attribute::make_int("to", 1)})});
    sc = b.op("Add", {sc, b.op("Mul", {inv, b.scalar("min", -std::numeric_limits<float>::max())})}, {}, "mask_add");
  }
  Value* p = b.op("Softmax", {sc}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = transpose(b, o, {0, 2, 1, 3}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({hq * Dh, D}, 13))}, {}, "out_proj"));
  return hq;
}

std::map<std::string, Tensor> feeds(bool with_mask) {
  std::map<std::string, Tensor> f{{"x", rand_tensor({B, S, D}, 41, -2, 2)}};
  if (with_mask) f["mask"] = Tensor::from_ints({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {B, S});
  return f;
}

FusionReport fuse(Graph& g) { return run_passes(g, {"FusedMatMul", "QkvPack", "Attention"}); }
// Rejection cases include graphs that are inconsistent on purpose (head counts
// that disagree): the pass's refusal is under test, not the load-time check.
FusionReport fuse_unchecked(Graph& g) { return run_passes_unchecked(g, {"FusedMatMul", "QkvPack", "Attention"}); }

const Node* find_attention(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->domain == "fuseopt" && n->op_type == "Attention") return n.get();
  return nullptr;
}

void expect_fused(Kv kind, bool with_mask) {
  GraphBuilder b(17);
  build(b, kind, with_mask);
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  const Graph& g = b.graph();
  CHECK(count_op(g, "Softmax") == 0);
  const Node* a = find_attention(g);
  REQUIRE(a);
  CHECK(a->attr_int("num_heads", 0) == H);
  CHECK(a->attr_int("kv_num_heads", 0) == 1);
  CHECK(std::fabs(a->attr_float("scale", 0) - 1.0f / std::sqrt(float(Dh))) < 1e-6f);
  REQUIRE(a->input(1) != nullptr);  // separate Q, K, V
  // The key-padding mask is proven through the K operand's layout and goes in as `mask`.
  CHECK((a->inputs.size() > 3 && a->input(3) && a->input(3)->name == "mask") == with_mask);
  require_same_outputs(*before, g, feeds(with_mask), 1e-4f);
  const int nodes = static_cast<int>(g.num_nodes());
  FusionReport again = fuse(b.graph());
  CHECK(matched(again, "Attention") == 0);
  CHECK(static_cast<int>(b.graph().num_nodes()) == nodes);
}

void expect_rejected(Kv kind, const std::string& reason) {
  GraphBuilder b(17);
  build(b, kind, false);
  FusionReport r = fuse_unchecked(b.graph());
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains(reason));
}

}  // namespace

TEST_CASE("Attention MQA: Falcon one kv head gathered from the fused QKV, broadcast by the MatMuls", "[passes][Attention]") {
  expect_fused(Kv::Falcon, false);
  expect_fused(Kv::Falcon, true);
}

TEST_CASE("Attention MQA: GPT-BigCode head reshape of a [B, 1, S, H*Dh] split", "[passes][Attention]") {
  expect_fused(Kv::BigCode, false);
  expect_fused(Kv::BigCode, true);
}

TEST_CASE("Attention MQA rule 7: K/V broadcast over the batch axis is rejected", "[passes][Attention]") {
  expect_rejected(Kv::BatchOne, "broadcasts it over the batch");
}

TEST_CASE("Attention MQA rule 7: one-head K with an all-heads V is rejected", "[passes][Attention]") {
  expect_rejected(Kv::VAllHeads, "key and value have different kv head counts");
}

TEST_CASE("Attention MQA rule 7: two key heads for three query heads are rejected", "[passes][Attention]") {
  expect_rejected(Kv::TwoKeyHeads, "disagree on num_heads");
}

TEST_CASE("Attention MQA: logit soft-capping (Gemma-2 cap*tanh(s/cap)) fuses with softcap", "[passes][Attention]") {
  // tests/passes/attention_score_forms_test.cc has the other spellings and the refusals.
  expect_fused(Kv::SoftCap, false);
  expect_fused(Kv::SoftCap, true);
}

TEST_CASE("Attention MQA rule 7: a key head count that is not known is rejected", "[passes][Attention]") {
  expect_rejected(Kv::UnknownKeyHeads, "head count of the key operand 'k_in' is unknown");
}
