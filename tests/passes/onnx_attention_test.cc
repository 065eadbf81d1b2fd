// OnnxAttention: the standard ONNX Attention node (opset 23, as the dynamo exporter writes
// scaled_dot_product_attention) becomes fuseopt.Attention. Positive cases compare every output
// of the CPU Session before (the ONNX Attention reference kernel) and after (the fused kernel):
// 4-D between head transposes (folded), 3-D with GQA, a bool mask with a fully masked row,
// is_causal, ONNX-level past/present, and a KV-cache Concat + repeat_kv traced into past inputs
// and present outputs. Negative cases, one per legality rule the pass adds: is_causal with other
// query and key lengths, the qk_matmul_output output, a mask shorter than the keys.
#include <map>
#include <random>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

// [B, S, H·D] -> [B, H, S, D] as exporters write it: Reshape [0, 0, H, D] then Transpose(0, 2, 1, 3).
Value* to_heads(GraphBuilder& b, Value* x, int64_t heads, int64_t d) {
  Value* r = b.op("Reshape", {x, b.constant(x->name + "_hshape", Tensor::from_ints({0, 0, heads, d}, {4}))});
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
}

// [B, H, S, D] -> [B, S, H·D].
Value* from_heads(GraphBuilder& b, Value* y, int64_t width) {
  Value* t = b.op("Transpose", {y}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  return b.op("Reshape", {t, b.constant("y_shape", Tensor::from_ints({0, 0, width}, {3}))});
}

Tensor bool_mask(std::vector<int64_t> dims, uint32_t seed) {
  Tensor m(DType::Bool, dims);
  std::mt19937 rng(seed);
  const int64_t last = dims.back();
  for (int64_t i = 0; i < m.numel(); ++i) m.data<uint8_t>()[i] = (rng() % 4) != 0;
  for (int64_t j = 0; j < last; ++j) m.data<uint8_t>()[j] = 0;  // the first row: every key masked
  return m;
}

// Runs the pass on b's graph and requires one match, no ONNX Attention left, one
// fuseopt.Attention, and every output equal to the graph's before on fresh random inputs: one per
// graph input, in order, of the given dims (a bool input gets a mask with a fully masked row).
// Returns the fused node.
Node* fuses_to_one_attention(GraphBuilder& b, const std::vector<std::vector<int64_t>>& dims, uint32_t seed) {
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "OnnxAttention");
  CHECK(matched(r, "OnnxAttention") == 1);
  CHECK(count_domain_op(b.graph(), "", "Attention") == 0);
  CHECK(count_domain_op(b.graph(), "fuseopt", "Attention") == 1);
  const std::vector<Value*>& ins = before->inputs;
  REQUIRE(ins.size() == dims.size());
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < ins.size(); ++i)
    feeds.emplace(ins[i]->name, ins[i]->dtype == DType::Bool ? bool_mask(dims[i], seed + uint32_t(i))
                                                             : rand_tensor(dims[i], seed + uint32_t(i)));
  require_same_outputs(*before, b.graph(), feeds);
  for (const auto& n : b.graph().nodes())
    if (n->domain == "fuseopt" && n->op_type == "Attention") return n.get();
  return nullptr;
}

// Runs the pass on b's graph and requires no match, the rejection naming rule 7 and `what`.
void rejected(GraphBuilder& b, const std::string& what, bool unchecked = false) {
  FusionReport r = unchecked ? run_one_pass_unchecked(b.graph(), "OnnxAttention") : run_one_pass(b.graph(), "OnnxAttention");
  CHECK(matched(r, "OnnxAttention") == 0);
  CHECK(count_domain_op(b.graph(), "", "Attention") == 1);
  CHECK_THAT(reasons(r, "OnnxAttention"), Contains("rule 7") && Contains(what));
}

}  // namespace

TEST_CASE("OnnxAttention: 4-D between head transposes becomes fuseopt.Attention, transposes folded",
          "[passes][OnnxAttention]") {
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  Value* k = b.input("k", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  Value* v = b.input("v", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  Node* att = b.node("Attention", {to_heads(b, q, 4, 16), to_heads(b, k, 4, 16), to_heads(b, v, 4, 16)}, 1,
                     {Attribute::make_int("is_causal", 1)});
  b.output(from_heads(b, att->outputs[0], 64));
  fuses_to_one_attention(b, {{2, 7, 64}, {2, 7, 64}, {2, 7, 64}}, 1);
  CHECK(count_op(b.graph(), "Transpose") == 0);  // both sides folded into reshapes
}

TEST_CASE("OnnxAttention: a bool attn_mask proven causal under a sliding window keeps the window",
          "[passes][OnnxAttention]") {
  // transformers' sdpa mask for a sliding-window layer: kv_idx <= q_idx and kv_idx > q_idx - 3,
  // over Ranges of the sequence length, as the 4-D [1, 1, S, S] attn_mask of the standard op.
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  Value* k = b.input("k", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  Value* v = b.input("v", DType::Float, {-1, -1, 64}, {"batch", "seq"});
  auto ints = [&](const std::string& n, std::vector<int64_t> x) {
    const int64_t len = static_cast<int64_t>(x.size());
    return b.constant(n, Tensor::from_ints(x, {len}));
  };
  auto scalar = [&](const std::string& n, int64_t x) { return b.constant(n, Tensor::from_ints({x}, {})); };
  Value* seq = b.op("Squeeze", {b.op("Shape", {k}, {Attribute::make_int("start", 1), Attribute::make_int("end", 2)})});
  Value* r = b.op("Range", {scalar("r0", 0), seq, scalar("r1", 1)});
  Value* kv = b.op("Unsqueeze", {r, ints("kv_axes", {0, 1, 2})});  // [1, 1, 1, S]
  Value* qi = b.op("Unsqueeze", {r, ints("q_axes", {0, 1, 3})});   // [1, 1, S, 1]
  Value* keep = b.op("And", {b.op("LessOrEqual", {kv, qi}), b.op("Greater", {kv, b.op("Sub", {qi, scalar("w", 3)})})});
  Node* att = b.node("Attention", {to_heads(b, q, 4, 16), to_heads(b, k, 4, 16), to_heads(b, v, 4, 16), keep}, 1, {});
  b.output(from_heads(b, att->outputs[0], 64));
  Node* f = fuses_to_one_attention(b, {{2, 7, 64}, {2, 7, 64}, {2, 7, 64}}, 11);
  REQUIRE(f);
  CHECK(f->attr_int("causal", 0) == 1);
  CHECK(f->attr_int("window", 0) == 3);
  CHECK(f->inputs.size() <= 4);  // no attn_bias
}

TEST_CASE("OnnxAttention: 3-D GQA with a bool mask (a fully masked row gives 0) and softcap", "[passes][OnnxAttention]") {
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {2, 5, 64});
  Value* k = b.input("k", DType::Float, {2, 6, 32});
  Value* v = b.input("v", DType::Float, {2, 6, 32});
  Value* m = b.input("m", DType::Bool, {2, 1, 5, 6});
  Node* att = b.node("Attention", {q, k, v, m}, 1,
                     {Attribute::make_int("q_num_heads", 4), Attribute::make_int("kv_num_heads", 2),
                      Attribute::make_float("softcap", 3.0f), Attribute::make_float("scale", 0.2f)});
  b.output(att->outputs[0]);
  fuses_to_one_attention(b, {{2, 5, 64}, {2, 6, 32}, {2, 6, 32}, {2, 1, 5, 6}}, 4);
}

TEST_CASE("OnnxAttention: the node's own past_key/past_value and presents", "[passes][OnnxAttention]") {
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {2, 3, 32});
  Value* k = b.input("k", DType::Float, {2, 3, 32});
  Value* v = b.input("v", DType::Float, {2, 3, 32});
  Value* pk = b.input("past_key", DType::Float, {2, 2, 4, 16});
  Value* pv = b.input("past_value", DType::Float, {2, 2, 4, 16});
  Node* att = b.node("Attention", {q, k, v, nullptr, pk, pv}, 3,
                     {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                      Attribute::make_int("is_causal", 1)});
  for (Value* o : att->outputs) b.output(o);
  fuses_to_one_attention(b, {{2, 3, 32}, {2, 3, 32}, {2, 3, 32}, {2, 2, 4, 16}, {2, 2, 4, 16}}, 8);
}

TEST_CASE("OnnxAttention: a KV-cache Concat and repeat_kv become past inputs and present outputs",
          "[passes][OnnxAttention]") {
  // transformers' sdpa decode step at opset 23: present = Concat(past, new, axis 2) is the graph's
  // output, repeated to the query heads (Unsqueeze, Expand, Reshape) before the Attention node.
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {2, 1, 64});
  Value* k = b.input("k", DType::Float, {2, 1, 32});
  Value* v = b.input("v", DType::Float, {2, 1, 32});
  Value* pk = b.input("past_key", DType::Float, {2, 2, 3, 16});
  Value* pv = b.input("past_value", DType::Float, {2, 2, 3, 16});
  auto cached = [&](Value* x, Value* past, const std::string& name) {
    Value* present = b.op("Concat", {past, to_heads(b, x, 2, 16)}, {Attribute::make_int("axis", 2)}, name);
    b.output(present);
    Value* u = b.op("Unsqueeze", {present, b.constant(name + "_axes", Tensor::from_ints({2}, {1}))});
    Value* e = b.op("Expand", {u, b.constant(name + "_rep", Tensor::from_ints({2, 2, 2, 4, 16}, {5}))});
    return b.op("Reshape", {e, b.constant(name + "_heads", Tensor::from_ints({2, 4, 4, 16}, {4}))});
  };
  Value* kr = cached(k, pk, "present_key");
  Value* vr = cached(v, pv, "present_value");
  Node* att = b.node("Attention", {to_heads(b, q, 4, 16), kr, vr}, 1);
  b.output(from_heads(b, att->outputs[0], 64));
  Node* f = fuses_to_one_attention(b, {{2, 1, 64}, {2, 1, 32}, {2, 1, 32}, {2, 2, 3, 16}, {2, 2, 3, 16}}, 13);
  CHECK(count_op(b.graph(), "Concat") == 0);  // the presents are the fused op's outputs
  CHECK(count_op(b.graph(), "Expand") == 0);
  REQUIRE(f);
  CHECK(f->attr_int("kv_num_heads", 0) == 2);
  CHECK(f->input(5) == pk);
  CHECK(f->outputs.size() == 3);
}

TEST_CASE("OnnxAttention rule 7: is_causal with query and key lengths that differ", "[passes][OnnxAttention][legality]") {
  // ONNX aligns the causal diagonal top-left, fuseopt bottom-right: equal only when S_q = S_kv.
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {1, 3, 32});
  Value* k = b.input("k", DType::Float, {1, 5, 32});
  Value* v = b.input("v", DType::Float, {1, 5, 32});
  Node* att = b.node("Attention", {q, k, v}, 1,
                     {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                      Attribute::make_int("is_causal", 1)});
  b.output(att->outputs[0]);
  rejected(b, "is_causal");
}

TEST_CASE("OnnxAttention rule 7: the qk_matmul_output output is read", "[passes][OnnxAttention][legality]") {
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {1, 3, 32});
  Node* att = b.node("Attention", {q, q, q}, 4,
                     {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2)});
  b.output(att->outputs[0]);
  b.output(att->outputs[3]);
  rejected(b, "qk_matmul_output", /*unchecked=*/true);
}

TEST_CASE("OnnxAttention rule 7: a mask shorter than the keys (ONNX pads it with -inf)",
          "[passes][OnnxAttention][legality]") {
  GraphBuilder b(23);
  Value* q = b.input("q", DType::Float, {1, 3, 32});
  Value* k = b.input("k", DType::Float, {1, 5, 32});
  Value* m = b.input("m", DType::Float, {1, 1, 3, 4});
  Node* att = b.node("Attention", {q, k, k, m}, 1,
                     {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2)});
  b.output(att->outputs[0]);
  rejected(b, "attn_mask");
}

TEST_CASE("OnnxAttention: opset 25's sliding window becomes window = left + 1 (right 0: causal)",
          "[passes][OnnxAttention]") {
  // left/right_window_size bound the keys around each query's absolute position (the ONNX
  // reference's _apply_sliding_window); with S_q = S_kv that position is fuseopt's q_pos. The
  // CPU ONNX Attention kernel (the reference the check compares against) applies the window.
  struct Case {
    int64_t left, right, causal, want_window, want_causal;
  };
  for (Case c : {Case{-1, -1, 1, 0, 1}, Case{2, -1, 1, 3, 1}, Case{0, -1, 1, 1, 1}, Case{3, 0, 0, 4, 1},
                 Case{2, 5, 1, 3, 1}, Case{-1, 0, 0, 0, 1}}) {
    INFO("left " << c.left << " right " << c.right << " is_causal " << c.causal);
    GraphBuilder b(25);
    Value* q = b.input("q", DType::Float, {1, 7, 32});
    Value* k = b.input("k", DType::Float, {1, 7, 32});
    Node* att = b.node("Attention", {q, k, k}, 1,
                       {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                        Attribute::make_int("is_causal", c.causal), Attribute::make_int("left_window_size", c.left),
                        Attribute::make_int("right_window_size", c.right)});
    b.output(att->outputs[0]);
    Node* f = fuses_to_one_attention(b, {{1, 7, 32}, {1, 7, 32}}, 7);
    REQUIRE(f);
    CHECK(f->attr_int("window", 0) == c.want_window);
    CHECK(f->attr_int("causal", 0) == c.want_causal);
  }
}

TEST_CASE("OnnxAttention rule 7: opset 25's window reaching past the query, or of unproven alignment",
          "[passes][OnnxAttention][legality]") {
  SECTION("right_window_size 2 without is_causal: later keys visible, but not all") {
    GraphBuilder b(25);
    Value* q = b.input("q", DType::Float, {1, 5, 32});
    Node* att = b.node("Attention", {q, q, q}, 1,
                       {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                        Attribute::make_int("left_window_size", 2), Attribute::make_int("right_window_size", 2)});
    b.output(att->outputs[0]);
    rejected(b, "looks back only");
  }
  SECTION("a query length that is not provably the keys'") {
    GraphBuilder b(25);
    Value* q = b.input("q", DType::Float, {1, 3, 32});
    Value* k = b.input("k", DType::Float, {1, 5, 32});
    Node* att = b.node("Attention", {q, k, k}, 1,
                       {Attribute::make_int("q_num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                        Attribute::make_int("left_window_size", 2)});
    b.output(att->outputs[0]);
    rejected(b, "sliding window");
  }
}
