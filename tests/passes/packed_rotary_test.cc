// PackedRotary: Split(packed QKV) -> two fuseopt.RotaryEmbedding -> fuseopt.Attention
// becomes one RotaryEmbedding with rotated_heads on the packed tensor and a packed
// attention (MHA and GQA, half-split and interleaved, partial rotary, with a KV
// cache); the CPU outputs (Y and the presents) are unchanged. Negative tests: one
// per legality rule, with the report's reason.
#include "ir/shape_inference.h"
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kB = 2, kS = 5, kPast = 3;

struct Spec {
  int64_t h = 4, hkv = 2, d = 8, r = 0;  // r = rotary_embedding_dim (0: all of d)
  bool interleaved = false;
  bool past = false;  // KV cache inputs and present outputs
  // Legality variations.
  bool other_sin_for_k = false;  // K rotated with a different table
  bool k_interleaved = false;    // K's rotary differs in interleaved
  bool v_rotated = false;        // Split output 2 is read by something else too
  bool wrong_heads = false;      // the attention sees heads of 2·d (half the rotaries' head counts)
  bool swapped = false;          // Q from Split output 1, K from output 0
};

struct Built {
  std::unique_ptr<Graph> g;
  std::map<std::string, Tensor> feeds;
};

Built build(const Spec& s) {
  GraphBuilder b(18);
  const int64_t w = (s.h + 2 * s.hkv) * s.d, half = (s.r ? s.r : s.d) / 2;
  Built out;
  Value* p = b.input("qkv", DType::Float, {kB, kS, w});
  Value* cos = b.input("cos", DType::Float, {1, kS, half});
  Value* sin = b.input("sin", DType::Float, {1, kS, half});
  Value* sin2 = s.other_sin_for_k ? b.input("sin2", DType::Float, {1, kS, half}) : sin;
  out.feeds["qkv"] = rand_tensor({kB, kS, w}, 1);
  out.feeds["cos"] = rand_tensor({1, kS, half}, 2);
  out.feeds["sin"] = rand_tensor({1, kS, half}, 3);
  if (s.other_sin_for_k) out.feeds["sin2"] = rand_tensor({1, kS, half}, 4);
  Value* sizes = b.constant("sizes", Tensor::from_ints({s.h * s.d, s.hkv * s.d, s.hkv * s.d}, {3}));
  Node* sp = b.node("Split", {p, sizes}, 3, {Attribute::make_int("axis", -1)});
  auto rotary = [&](Value* x, int64_t heads, Value* sn, bool inter) {
    std::vector<Attribute> a = {Attribute::make_int("num_heads", heads)};
    if (inter) a.push_back(Attribute::make_int("interleaved", 1));
    if (s.r) a.push_back(Attribute::make_int("rotary_embedding_dim", s.r));
    return b.op("RotaryEmbedding", {x, cos, sn}, std::move(a), "", "fuseopt");
  };
  Value* q = rotary(sp->outputs[s.swapped ? 1 : 0], s.swapped ? s.hkv : s.h, sin, s.interleaved);
  Value* k = rotary(sp->outputs[s.swapped ? 0 : 1], s.swapped ? s.h : s.hkv, sin2, s.k_interleaved || s.interleaved);
  std::vector<Value*> in = {q, k, sp->outputs[2], nullptr, nullptr};
  if (s.past) {
    in.push_back(b.input("past_key", DType::Float, {kB, s.hkv, kPast, s.d}));
    in.push_back(b.input("past_value", DType::Float, {kB, s.hkv, kPast, s.d}));
    out.feeds["past_key"] = rand_tensor({kB, s.hkv, kPast, s.d}, 5);
    out.feeds["past_value"] = rand_tensor({kB, s.hkv, kPast, s.d}, 6);
  }
  Node* att = b.node("Attention", in, s.past ? 3 : 1,
                     {Attribute::make_int("num_heads", s.wrong_heads ? s.h / 2 : s.h),
                      Attribute::make_int("kv_num_heads", s.wrong_heads ? s.hkv / 2 : s.hkv),
                      Attribute::make_int("causal", 1)},
                     "fuseopt");
  for (Value* o : att->outputs) b.output(o);
  if (s.v_rotated) b.output(b.op("Relu", {sp->outputs[2]}));
  out.g = b.release();
  infer_shapes(*out.g);
  return out;
}

const Node* only(const Graph& g, const std::string& op) {
  const Node* r = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type == op) {
      REQUIRE(r == nullptr);
      r = n.get();
    }
  return r;
}

void require_fused(const Spec& s) {
  Built m = build(s);
  auto before = clone_graph(*m.g);
  FusionReport r = run_one_pass(*m.g, "PackedRotary");
  REQUIRE(matched(r, "PackedRotary") == 1);
  CHECK(count_op(*m.g, "Split") == 0);
  const Node* rot = only(*m.g, "RotaryEmbedding");
  REQUIRE(rot);
  CHECK(rot->attr_int("num_heads", 0) == s.h + 2 * s.hkv);
  CHECK(rot->attr_int("rotated_heads", 0) == s.h + s.hkv);
  const Node* att = only(*m.g, "Attention");
  REQUIRE(att);
  CHECK(att->input(0) == rot->output(0));
  CHECK(att->input(1) == nullptr);
  CHECK(att->input(2) == nullptr);
  require_same_outputs(*before, *m.g, m.feeds, 1e-6f);
}

void require_rejected(const Spec& s, const std::string& why) {
  Built m = build(s);
  FusionReport r = run_one_pass(*m.g, "PackedRotary");
  CHECK(matched(r, "PackedRotary") == 0);
  CHECK(count_op(*m.g, "Split") == 1);
  CHECK(count_op(*m.g, "RotaryEmbedding") == 2);
  if (!why.empty()) CHECK_THAT(reasons(r, "PackedRotary"), Contains(why));
}

}  // namespace

TEST_CASE("PackedRotary: GQA, MHA, interleaved, partial rotary and KV cache fuse exactly", "[PackedRotary]") {
  SECTION("GQA 4/2") { require_fused(Spec{}); }
  SECTION("MHA 3/3") {
    Spec s;
    s.h = s.hkv = 3;
    require_fused(s);
  }
  SECTION("interleaved, partial rotary") {
    Spec s;
    s.interleaved = true;
    s.r = 4;
    require_fused(s);
  }
  SECTION("with a KV cache (presents checked too)") {
    Spec s;
    s.past = true;
    require_fused(s);
  }
}

TEST_CASE("PackedRotary: near misses stay as they are, with the reason", "[PackedRotary]") {
  SECTION("K rotated with another sin table") {
    Spec s;
    s.other_sin_for_k = true;
    require_rejected(s, "read different cos/sin caches");
  }
  SECTION("K's rotary interleaved, Q's not") {
    Spec s;
    s.k_interleaved = true;
    require_rejected(s, "differ in interleaved");
  }
  SECTION("V read elsewhere too") {
    Spec s;
    s.v_rotated = true;
    require_rejected(s, "");
  }
  SECTION("attention heads differ from the rotaries'") {
    Spec s;
    s.wrong_heads = true;
    require_rejected(s, "kv_num_heads differ");
  }
  SECTION("Q and K from swapped Split outputs: not the packed order") {
    Spec s;
    s.h = s.hkv = 3;  // one width, so the swapped graph is still a valid attention
    s.swapped = true;
    Built m = build(s);
    FusionReport r = run_one_pass(*m.g, "PackedRotary");
    CHECK(matched(r, "PackedRotary") == 0);
    CHECK(count_op(*m.g, "Split") == 1);
  }
}
