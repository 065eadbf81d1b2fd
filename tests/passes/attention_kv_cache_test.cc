// Attention fusion with a KV cache: K and V are Concat(past [B, Hkv, S_past, Dh], new,
// axis 2) on their way to the scores / P·V (the HF DynamicCache update), the Concat
// outputs are the model's present outputs. The fusion takes them as the op's past inputs
// (5, 6) and present outputs (1, 2): MHA, GQA (repeat_kv after the cache), MQA
// (one kv head broadcast by the MatMuls), decode (S_q = 1) and S_q > 1 with a padding
// mask over the total length. Negative tests: a cache on only one of K/V, a cache
// concatenated in [B, S, H, D] layout, an op input computed from the present values.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, H = 4, Dh = 3, D = H * Dh, SP = 4;

struct Spec {
  int64_t kv_heads = H;   // < H: GQA (repeat_kv after the cache Concat); 1 with mqa: MatMul broadcast
  bool mqa = false;
  int64_t seq = 1;        // new tokens (S_q)
  bool mask = true;       // HF (1 - bool mask) * min over the total length -> `mask`
  bool only_k = false;    // V has no cache (rule 7)
  bool bshd_cache = false;  // the cache Concat in [B, S, H, D] layout before the head transpose (rule 4)
  bool bias_from_present = false;  // a bias term computed from the present keys' values (rule 7)
  bool flat_out = false;  // the output Reshape writes [B·S, H·Dh] with literal dims ([2, 12] at S = 1)
  // transformers-4 SDPA (Optimum's exports): Where(keep[..., :len], 0, -inf) added, keep = And(mask
  // [B, 1, 1, S_kv], True), len read from Shape of the keys after repeat_kv. 1: len = S_kv (proven
  // `mask`); 2: len = S_kv - 1 (not the whole key axis: stays attn_bias).
  int sdpa_slice = 0;
  int tril = 0;  // transformers-4 GPT-2 causal buffer, Where(bias[:, :, rows, :S_kv], s, min):
                 // 1 rows [S_kv - S_q, S_kv) (bottom-right: causal=1), 2 rows [0, S_q) (top-left: stays a tensor)
};

Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  int64_t len = static_cast<int64_t>(v.size());
  return b.constant(n, Tensor::from_ints(v, {len}));
}

void build(GraphBuilder& b, const Spec& s) {
  const int64_t hkv = s.kv_heads, S = s.seq;
  Value* x = b.input("x", DType::Float, {B, S, D});
  Value* pk = s.bshd_cache ? b.input("past_key", DType::Float, {B, SP, hkv, Dh}) : b.input("past_key", DType::Float, {B, hkv, SP, Dh});
  Value* pv = b.input("past_value", DType::Float, {B, hkv, SP, Dh});
  Value* mask = s.mask || s.sdpa_slice ? b.input("mask", DType::Int64, {B, SP + S}) : nullptr;
  auto proj = [&](const std::string& n, int64_t w, uint32_t seed) {
    return b.op("MatMul", {x, b.constant("W" + n, rand_tensor({D, w}, seed))});
  };
  auto split = [&](Value* v, int64_t h, const std::string& n) {
    return b.op("Reshape", {v, ints(b, n + "_shape", {0, 0, h, Dh})}, {}, n + "_split");
  };
  auto to_bhsd = [&](Value* v) { return b.op("Transpose", {v}, {Attribute::make_ints("perm", {0, 2, 1, 3})}); };
  Value* q4 = to_bhsd(split(proj("q", D, 3), H, "q"));
  Value* k4;
  if (s.bshd_cache) {
    k4 = to_bhsd(b.op("Concat", {pk, split(proj("k", hkv * Dh, 5), hkv, "k")}, {Attribute::make_int("axis", 1)}));
    b.output(k4);
  } else {
    k4 = b.op("Concat", {pk, to_bhsd(split(proj("k", hkv * Dh, 5), hkv, "k"))}, {Attribute::make_int("axis", 2)},
              "present_key_concat");
    b.output(k4);
  }
  Value* v4 = to_bhsd(split(proj("v", hkv * Dh, 7), hkv, "v"));
  if (!s.only_k) {
    v4 = b.op("Concat", {pv, v4}, {Attribute::make_int("axis", 2)}, "present_value_concat");
    b.output(v4);
  }
  if (hkv != H && !s.mqa) {  // repeat_kv on the cached [B, Hkv, S_kv, Dh]
    auto rep = [&](Value* t, const std::string& n) {
      Value* u = b.op("Unsqueeze", {t, ints(b, n + "_ax", {2})});
      Value* e = b.op("Expand", {u, ints(b, n + "_to", {1, 1, H / hkv, 1, 1})});
      return b.op("Reshape", {e, ints(b, n + "_merge", {0, H, -1, Dh})});
    };
    k4 = rep(k4, "rk");
    v4 = rep(v4, "rv");
  }
  Value* kt = b.op("Transpose", {k4}, {Attribute::make_ints("perm", {0, 1, 3, 2})}, "k_t");
  Value* sc = b.op("Mul", {b.op("MatMul", {q4, kt}, {}, "qk"), b.scalar("c", 1.0f / std::sqrt(float(Dh)))}, {}, "scale");
  if (s.mask) {
    Value* m4 = b.op("Cast", {b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})})}, {Attribute::make_int("to", 9)});
    Value* inv = b.op("Sub", {b.scalar("one", 1.0f), b.op("Cast", {m4}, {Attribute::make_int("to", 1)})});
    sc = b.op("Add", {sc, b.op("Mul", {inv, b.scalar("min", -std::numeric_limits<float>::max())})}, {}, "mask_add");
  }
  if (s.sdpa_slice) {
    Value* m4 = b.op("Cast", {b.op("Unsqueeze", {mask, ints(b, "sm_axes", {1, 2})})}, {Attribute::make_int("to", 9)});
    Tensor yes(DType::Bool, {1});
    yes.data<uint8_t>()[0] = 1;
    Value* keep = b.op("And", {m4, b.constant("all_true", yes)});
    Value* len = b.op("Gather", {b.op("Shape", {k4}, {}, "repeated_k_shape"), ints(b, "len_i", {2})},
                      {Attribute::make_int("axis", 0)});
    if (s.sdpa_slice == 2) len = b.op("Sub", {len, ints(b, "one_i", {1})});
    Value* cut = b.op("Slice", {keep, ints(b, "zero_s", {0}), len, ints(b, "ax_s", {3})}, {}, "mask_slice");
    Value* bias = b.op("Where", {cut, b.scalar("zero_f", 0.0f), b.scalar("ninf", -std::numeric_limits<float>::infinity())});
    if (s.sdpa_slice == 2) bias = b.op("Pad", {bias, ints(b, "pads", {0, 0, 0, 0, 0, 0, 0, 1})}, {}, "pad_back");
    sc = b.op("Add", {sc, bias}, {}, "sdpa_mask_add");
  }
  if (s.tril) {
    Tensor buf(DType::Float, {1, 1, 16, 16});
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) buf.data<float>()[i * 16 + j] = j <= i;
    auto dim = [&](Value* v, int64_t i) {
      return b.op("Gather", {b.op("Shape", {v}), ints(b, "i", {i})}, {Attribute::make_int("axis", 0)});
    };
    Value* skv = dim(k4, 2);
    Value* sq = dim(x, 1);
    Value* r0 = s.tril == 1 ? b.op("Sub", {skv, sq}) : ints(b, "zero", {0});
    Value* r1 = s.tril == 1 ? skv : sq;
    Value* rows = b.op("Slice", {b.constant("tril", buf), r0, r1, ints(b, "ax2", {2})});
    Value* cols = b.op("Slice", {rows, ints(b, "zero_c", {0}), skv, ints(b, "ax3", {3})});
    Value* keep = b.op("Cast", {cols}, {Attribute::make_int("to", 9)});
    sc = b.op("Where", {keep, sc, b.scalar("cmin", -std::numeric_limits<float>::max())}, {}, "causal_where");
  }
  if (s.bias_from_present) {  // [B, 1, 1, S_kv] from the present keys' values
    Value* r = b.op("ReduceMean", {k4}, {Attribute::make_ints("axes", {1, 3}), Attribute::make_int("keepdims", 1)});
    sc = b.op("Add", {sc, b.op("Transpose", {r}, {Attribute::make_ints("perm", {0, 1, 3, 2})})}, {}, "bias_add");
  }
  Value* p = b.op("Softmax", {sc}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  b.output(b.op("Reshape", {o, s.flat_out ? ints(b, "merge", {B * S, D}) : ints(b, "merge", {0, 0, -1})}, {}, "out_merge"));
}

std::map<std::string, Tensor> feeds(const Spec& s) {
  const int64_t hkv = s.kv_heads;
  std::map<std::string, Tensor> f{{"x", rand_tensor({B, s.seq, D}, 41, -2, 2)},
                                  {"past_key", rand_tensor(s.bshd_cache ? std::vector<int64_t>{B, SP, hkv, Dh}
                                                                        : std::vector<int64_t>{B, hkv, SP, Dh}, 43)},
                                  {"past_value", rand_tensor({B, hkv, SP, Dh}, 44)}};
  if (s.mask || s.sdpa_slice) {
    std::vector<int64_t> m(static_cast<size_t>(B * (SP + s.seq)), 1);
    m[SP + s.seq] = m[SP + s.seq + 1] = 0;  // batch 1: its first two cached positions are padding
    f["mask"] = Tensor::from_ints(m, {B, SP + s.seq});
  }
  return f;
}

FusionReport fuse(Graph& g) { return run_passes(g, {"Attention", "dce"}); }
// Rejection cases include graphs that are inconsistent on purpose (head counts
// that disagree): the pass's refusal is under test, not the load-time check.
FusionReport fuse_unchecked(Graph& g) { return run_passes_unchecked(g, {"Attention", "dce"}); }

void expect_fused(const Spec& s) {
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  const Graph& g = b.graph();
  CHECK(count_op(g, "Softmax") == 0);
  CHECK(count_op(g, "Concat") == 0);  // the cache Concats are the op's present outputs now
  const Node* a = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  REQUIRE(a->inputs.size() == 7);
  CHECK(a->input(5)->name == "past_key");
  CHECK(a->input(6)->name == "past_value");
  CHECK(a->attr_int("kv_num_heads", 0) == s.kv_heads);
  if (s.mask || s.sdpa_slice == 1) CHECK(a->input(3) != nullptr);  // proven key padding over the total length
  if (s.sdpa_slice == 1) CHECK(a->input(4) == nullptr);             // no attn_bias left
  REQUIRE(a->outputs.size() == 3);
  CHECK(a->output(1)->is_graph_output);
  CHECK(a->output(2)->is_graph_output);
  require_same_outputs(*before, g, feeds(s), 1e-4f);
}

void expect_rejected(const Spec& s, const std::string& reason) {
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = fuse_unchecked(b.graph());
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains(reason));
}

}  // namespace

TEST_CASE("Attention KV cache: MHA past/present, decode and several new tokens", "[passes][Attention]") {
  for (int64_t seq : {1, 3}) {
    INFO("S_q " << seq);
    Spec s;
    s.seq = seq;
    expect_fused(s);
  }
}

TEST_CASE("Attention KV cache: GQA repeat_kv after the cache, MQA broadcast", "[passes][Attention]") {
  Spec g;
  g.kv_heads = 2;
  g.seq = 3;
  expect_fused(g);
  Spec m;
  m.kv_heads = 1;
  m.mqa = true;
  expect_fused(m);
}

TEST_CASE("Attention KV cache: transformers-4 SDPA mask sliced to the repeated keys' length -> mask", "[passes][Attention]") {
  for (int64_t seq : {1, 3}) {
    INFO("S_q " << seq);
    Spec s;
    s.kv_heads = 2;
    s.seq = seq;
    s.mask = false;
    s.sdpa_slice = 1;
    expect_fused(s);
  }
}

TEST_CASE("Attention KV cache: an SDPA mask cut short of the keys stays attn_bias", "[passes][Attention]") {
  Spec s;
  s.kv_heads = 2;
  s.seq = 3;
  s.mask = false;
  s.sdpa_slice = 2;
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") {
      CHECK(n->input(3) == nullptr);  // no proven key-padding mask
      CHECK(n->input(4) != nullptr);  // the sliced, padded term is the bias
    }
}

TEST_CASE("Attention KV cache rule 7: only the keys are cached", "[passes][Attention]") {
  Spec s;
  s.only_k = true;
  expect_rejected(s, "only one of key and value is concatenated with a cache");
}

TEST_CASE("Attention KV cache rule 4: a cache concatenated in [B, S, H, D] layout", "[passes][Attention]") {
  Spec s;
  s.bshd_cache = true;
  expect_rejected(s, "not laid out [B, heads, S, D]");
}

TEST_CASE("Attention KV cache rule 7: an op input computed from the present values", "[passes][Attention]") {
  Spec s;
  s.bias_from_present = true;
  expect_rejected(s, "computed from the present keys/values");
}

TEST_CASE("Attention KV cache: transformers-4 GPT-2 causal buffer sliced at the cache offset -> causal=1", "[passes][Attention]") {
  for (int64_t seq : {1, 3}) {
    INFO("S_q " << seq);
    Spec s;
    s.seq = seq;
    s.tril = 1;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = fuse(b.graph());
    INFO(reasons(r, "Attention"));
    REQUIRE(matched(r, "Attention") == 1);
    const Node* a = nullptr;
    for (const auto& n : b.graph().nodes())
      if (n->op_type == "Attention") a = n.get();
    REQUIRE(a);
    CHECK(a->attr_int("causal", 0) == 1);
    CHECK(count_op(b.graph(), "Slice") == 0);  // the buffer term is gone (the padding mask is `mask`)
    require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
  }
}

TEST_CASE("Attention KV cache: the buffer's first S_q rows (top-left alignment) stay a mask tensor", "[passes][Attention]") {
  Spec s;
  s.seq = 3;
  s.tril = 2;
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  REQUIRE(matched(r, "Attention") == 1);
  const Node* a = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  CHECK(a->attr_int("causal", 0) == 0);
  CHECK(a->input(4) != nullptr);
  require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
}

TEST_CASE("Attention KV cache: a static decode step whose output Reshape writes [B*S, H*Dh]", "[passes][Attention]") {
  Spec s;
  s.flat_out = true;
  expect_fused(s);
}
