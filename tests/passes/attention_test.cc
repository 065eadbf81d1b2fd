// Attention fusion on synthetic graphs spelled the way current exporters
// spell attention: scale on the scores (Mul or Div) or sqrt-scale on Q and Kᵀ
// (torch SDPA decomposition), HF additive (1 - mask) * min masks, boolean
// Where masks, T5 position bias, GQA repeat_kv, rotary applied in [B,H,S,D]
// layout, packed QKV through a Split. Each positive test checks op counts and
// that the fused graph gives the original's numbers on the CPU Session; each
// legality rule (1, 5, 7) has a negative test with the reported reason.
#include <cmath>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 4, Dh = 3, D = H * Dh;

struct Spec {
  int scale = 0;           // 0 Mul on scores, 1 Div on scores, 2 sqrt-scale on Q and Kᵀ, 3 none, 4 scale is a graph input
  int mask = 1;            // 0 none, 1 HF additive (1-m)*min, 2 bool Where(m, s, -inf), 3 T5 bias + additive mask,
                           // 4 HF additive over a bool mask (provably key padding), 7 transformers 4's
                           // 6-8 causal forms (below), 10 transformers 4's _prepare_4d_attention_mask
                           // Where(bool(inv), min, inv) with inv = 1 - float(Expand(m)), 11 the same sliced
                           // [..., :S_kv], 12 the same over a float mask
  int64_t kv_heads = H;    // < H: GQA with repeat_kv
  bool rotary = false;     // Q and K multiplied by a [S, Dh] table after the head transpose
  bool prefix_concat = false;  // EVA: Q, K = cat(x[:, :, :1], f(x[:, :, 1:])) on the sequence axis (not a cache)
  bool packed = false;     // one GEMM + Split for Q, K, V
  bool probs_output = false;   // the attention probabilities are also a graph output (rule 1)
  bool mask_before_scale = false;  // Add(mask) then Mul(scale): the op's bias is mask·scale
  bool cast_scores = false;    // Cast(scores, fp16) -> Cast back (rule 5)
  bool bad_heads = false;      // K is reshaped into a different head count than Q (rule 7)
  bool k_two_transposes = false;  // Kᵀ as Transpose(0,1,3,2)(Transpose(0,2,1,3)) (GPT-2)
  bool sdpa = false;       // torch SDPA decomposition: Kᵀ through a [B·H, S, Dh] view, Where(IsNaN(P), 0, P)
  int guard = 0;           // with sdpa: 0 that guard, 1 Where(IsNaN(scores), 0, P), 2 Where(IsNaN(P), 1, P)
};

Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  int64_t len = static_cast<int64_t>(v.size());
  return b.constant(n, Tensor::from_ints(v, {len}));
}

Value* heads(GraphBuilder& b, Value* x, int64_t h, int64_t d, std::vector<int64_t> perm, const std::string& n) {
  Value* r = b.op("Reshape", {x, ints(b, n + "_shape", {0, 0, h, d})}, {}, n + "_split_heads");
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", perm)}, n + "_t");
}

// repeat_kv: [B, Hkv, S, Dh] -> [B, H, S, Dh]
Value* repeat_kv(GraphBuilder& b, Value* x, int64_t hkv, const std::string& n) {
  Value* u = b.op("Unsqueeze", {x, ints(b, n + "_ax", {2})});
  Value* e = b.op("Expand", {u, ints(b, n + "_to", {B, hkv, H / hkv, S, Dh})});
  return b.op("Reshape", {e, ints(b, n + "_merge", {B, H, S, Dh})});
}

void build(GraphBuilder& b, const Spec& s) {
  const int64_t hkv = s.kv_heads;
  Value* x = b.input("x", DType::Float, {B, S, D});
  Value* mask = (s.mask && s.mask < 6) || s.mask >= 10 ? b.input("mask", s.mask == 12 ? DType::Float : DType::Int64, {B, S})
                                                        : nullptr;
  Value *q, *k, *v;
  if (s.packed) {
    Value* w = b.constant("Wqkv", rand_tensor({D, (H + 2 * hkv) * Dh}, 1));
    Value* p = b.op("Add", {b.op("MatMul", {x, w}), b.constant("bqkv", rand_tensor({(H + 2 * hkv) * Dh}, 2))});
    Node* sp = b.node("Split", {p, ints(b, "sizes", {H * Dh, hkv * Dh, hkv * Dh})}, 3, {Attribute::make_int("axis", 2)});
    q = sp->outputs[0];
    k = sp->outputs[1];
    v = sp->outputs[2];
  } else {
    auto proj = [&](const std::string& n, int64_t width, uint32_t seed) {
      return b.op("Add", {b.op("MatMul", {x, b.constant("W" + n, rand_tensor({D, width}, seed))}),
                          b.constant("b" + n, rand_tensor({width}, seed + 1))});
    };
    q = proj("q", H * Dh, 3);
    k = proj("k", hkv * Dh, 5);
    v = proj("v", hkv * Dh, 7);
  }
  Value* q4 = heads(b, q, H, Dh, {0, 2, 1, 3}, "q");
  Value *kt, *v4 = heads(b, v, hkv, Dh, {0, 2, 1, 3}, "v");
  if (s.bad_heads) {
    kt = heads(b, k, hkv * Dh, 1, {0, 2, 3, 1}, "k");
  } else if (s.sdpa) {
    Value* k4 = heads(b, k, hkv, Dh, {0, 2, 1, 3}, "k");
    Value* flat = b.op("Reshape", {k4, ints(b, "k_flat", {B * H, S, Dh})});
    Value* ft = b.op("Transpose", {flat}, {Attribute::make_ints("perm", {0, 2, 1})});
    kt = b.op("Reshape", {ft, ints(b, "k_unflat", {B, H, Dh, S})}, {}, "k_view");
  } else if (s.k_two_transposes || s.rotary || s.prefix_concat || hkv != H) {
    kt = heads(b, k, hkv, Dh, {0, 2, 1, 3}, "k");  // [B, Hkv, S, Dh]
  } else {
    kt = heads(b, k, hkv, Dh, {0, 2, 3, 1}, "k");
  }
  if (s.rotary) {
    Value* cosv = b.constant("cos", rand_tensor({S, Dh}, 9, 0.5f, 1.0f));
    q4 = b.op("Mul", {q4, cosv}, {}, "rot_q");
    kt = b.op("Mul", {kt, cosv}, {}, "rot_k");
  }
  if (s.prefix_concat) {  // the class token kept out of a rotary: a Concat the graph computes
    auto split_apply = [&](Value* t, const std::string& n) {
      Value* head = b.op("Slice", {t, ints(b, n + "_s0", {0}), ints(b, n + "_e0", {1}), ints(b, n + "_a0", {2})});
      Value* rest = b.op("Slice", {t, ints(b, n + "_s1", {1}), ints(b, n + "_e1", {S}), ints(b, n + "_a1", {2})});
      rest = b.op("Mul", {rest, b.constant(n + "_rot", rand_tensor({S - 1, Dh}, 19, 0.5f, 1.0f))});
      return b.op("Concat", {head, rest}, {Attribute::make_int("axis", 2)}, n + "_cat");
    };
    q4 = split_apply(q4, "pq");
    kt = split_apply(kt, "pk");
  }
  if (hkv != H && !s.bad_heads) {
    kt = repeat_kv(b, kt, hkv, "rk");
    v4 = repeat_kv(b, v4, hkv, "rv");
  }
  if (s.k_two_transposes || s.rotary || s.prefix_concat || (hkv != H && !s.bad_heads))
    kt = b.op("Transpose", {kt}, {Attribute::make_ints("perm", {0, 1, 3, 2})}, "k_tt");
  const float c = 1.0f / std::sqrt(static_cast<float>(Dh));
  if (s.scale == 2) {
    Value* sq = b.scalar("sqrt_scale", std::sqrt(c));
    q4 = b.op("Mul", {q4, sq});
    kt = b.op("Mul", {kt, sq});
  }
  Value* sc = b.op("MatMul", {q4, kt}, {}, "qk");
  if (s.cast_scores) sc = b.op("Cast", {b.op("Cast", {sc}, {Attribute::make_int("to", 10)})}, {Attribute::make_int("to", 1)});
  auto scale = [&](Value* z) {
    if (s.scale == 0) return b.op("Mul", {z, b.scalar("c", c)}, {}, "scale");
    if (s.scale == 1) return b.op("Div", {z, b.scalar("sqrt_d", std::sqrt(static_cast<float>(Dh)))}, {}, "scale");
    if (s.scale == 4) return b.op("Mul", {z, b.input("c_in", DType::Float, {})}, {}, "scale");
    return z;
  };
  if (!s.mask_before_scale) sc = scale(sc);
  if (s.mask == 3) sc = b.op("Add", {sc, b.constant("pos_bias", rand_tensor({1, H, S, S}, 11, -2, 2))}, {}, "pos_bias_add");
  if (s.mask == 1 || s.mask == 3 || s.mask == 4) {
    Value* m4 = b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})});
    if (s.mask == 4) m4 = b.op("Cast", {m4}, {Attribute::make_int("to", 9)});  // bool: values exactly 0/1
    Value* mf = b.op("Cast", {m4}, {Attribute::make_int("to", 1)});
    Value* inv = b.op("Sub", {b.scalar("one", 1.0f), mf});
    Value* add = b.op("Mul", {inv, b.scalar("min", -std::numeric_limits<float>::max())});
    sc = b.op("Add", {sc, add}, {}, "mask_add");
  } else if (s.mask == 2) {
    Value* m4 = b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})});
    Value* mb = b.op("Cast", {m4}, {Attribute::make_int("to", 9)});
    sc = b.op("Where", {mb, sc, b.scalar("neg_inf", -std::numeric_limits<float>::infinity())}, {}, "mask_where");
  }
  if (s.mask >= 10 && s.mask <= 12) {  // the term keeps keys where m == 1 (not where m != 0)
    Value* e = b.op("Expand", {b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})}), ints(b, "m_to", {B, 1, S, S})});
    Value* inv = b.op("Sub", {b.scalar("one", 1.0f), b.op("Cast", {e}, {Attribute::make_int("to", 1)})});
    Value* cond = b.op("Cast", {b.op("Cast", {inv}, {Attribute::make_int("to", 9)})}, {Attribute::make_int("to", 9)});
    Value* term = b.op("Where", {cond, b.scalar("min", -std::numeric_limits<float>::max()), inv}, {}, "inverted_mask");
    if (s.mask == 11) term = b.op("Slice", {term, ints(b, "sl_s", {0}), ints(b, "sl_e", {S}), ints(b, "sl_ax", {3})});
    sc = b.op("Add", {sc, term}, {}, "mask_add");
  }
  if (s.mask == 5) {  // Where(m, s, -10000) then + (1 - m) * -10000: fills too small to combine exactly
    Value* m4 = b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})});
    sc = b.op("Where", {b.op("Cast", {m4}, {Attribute::make_int("to", 9)}), sc, b.scalar("small_fill", -1e4f)});
    Value* inv = b.op("Sub", {b.scalar("one", 1.0f), b.op("Cast", {m4}, {Attribute::make_int("to", 1)})});
    sc = b.op("Add", {sc, b.op("Mul", {inv, b.scalar("small", -1e4f)})}, {}, "mask_add");
  }
  if (s.mask == 6) {  // Trilu(ConstantOfShape([S, S], min), k=1): causal, S from Shape(x)
    Value* seq = b.op("Gather", {b.op("Shape", {x}), ints(b, "seq_idx", {1})}, {Attribute::make_int("axis", 0)});
    Value* sq = b.op("Concat", {seq, seq}, {Attribute::make_int("axis", 0)});
    Value* full = b.op("ConstantOfShape", {sq},
                       {Attribute::make_tensor("value", Tensor::from_floats({-std::numeric_limits<float>::max()}, {1}))});
    sc = b.op("Add", {sc, b.op("Trilu", {full, b.constant("one_k", Tensor::from_ints({1}, {}))},
                                  {Attribute::make_int("upper", 1)})}, {}, "causal_add");
  }
  if (s.mask == 7 || s.mask == 8) {  // nanoGPT: masked_fill(bias[:, :, :S, :S] == 0, -inf) on a tril buffer
    Tensor buf(DType::Float, {1, 1, 8, 8});
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 8; ++j) buf.data<float>()[i * 8 + j] = s.mask == 8 ? (j <= i + 1) : (j <= i);  // 8: not causal
    Value* seq = b.op("Gather", {b.op("Shape", {x}), ints(b, "seq_idx", {1})}, {Attribute::make_int("axis", 0)});
    Value* sl = b.op("Slice", {b.constant("tril", buf), ints(b, "zero2", {0, 0}), b.op("Concat", {seq, seq}, {Attribute::make_int("axis", 0)}),
                               ints(b, "axes23", {2, 3})});
    Value* masked = b.op("Equal", {sl, b.scalar("zero_f", 0.0f)});
    sc = b.op("Where", {masked, b.scalar("ninf", -std::numeric_limits<float>::infinity()), sc}, {}, "causal_where");
  }
  if (s.mask_before_scale) sc = scale(sc);
  Value* p = b.op("Softmax", {sc}, {Attribute::make_int("axis", -1)}, "softmax");
  if (s.probs_output) b.output(p);
  if (s.sdpa)
    p = b.op("Where", {b.op("IsNaN", {s.guard == 1 ? sc : p}), b.scalar("p_zero", s.guard == 2 ? 1.0f : 0.0f), p}, {},
             "nan_guard");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({H * Dh, D}, 13))}, {}, "out_proj"));
}

std::map<std::string, Tensor> feeds(const Spec& s) {
  std::map<std::string, Tensor> f{{"x", rand_tensor({B, S, D}, 41, -2, 2)}};
  if (s.mask && s.mask < 6) f["mask"] = Tensor::from_ints({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {B, S});
  // A 2 is masked by the inverted form (1 - 2 != 0): the op's mask must be m == 1, not m != 0.
  if (s.mask == 10 || s.mask == 11) f["mask"] = Tensor::from_ints({1, 1, 2, 1, 1, 1, 1, 1, 0, 0}, {B, S});
  if (s.mask == 12) f["mask"] = Tensor::from_floats({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {B, S});
  if (s.scale == 4) f["c_in"] = Tensor::scalar_float(0.5f);
  return f;
}

// Runs the fusions attention builds on (FusedMatMul makes MatMul+bias one GEMM,
// QKV packing), then Attention; returns the report.
FusionReport fuse(Graph& g) { return run_passes(g, {"FusedMatMul", "QkvPack", "Attention"}); }
// Rejection cases include graphs that are inconsistent on purpose (head counts
// that disagree): the pass's refusal is under test, not the load-time check.
FusionReport fuse_unchecked(Graph& g) { return run_passes_unchecked(g, {"FusedMatMul", "QkvPack", "Attention"}); }

const Node* find(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->op_type == op) return n.get();
  return nullptr;
}

void expect_fused(const Spec& s, bool packed_input) {
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  const Graph& g = b.graph();
  CHECK(count_op(g, "Softmax") == 0);
  // Rotary: Q and K keep their head transposes and are re-packed outside the op.
  CHECK(count_op(g, "Transpose") == (s.rotary || s.prefix_concat ? 4 : 0));
  const Node* a = find(g, "Attention");
  REQUIRE(a);
  CHECK(a->domain == "fuseopt");
  CHECK(a->attr_int("num_heads", 0) == H);
  CHECK(a->attr_int("kv_num_heads", 0) == s.kv_heads);
  CHECK(std::fabs(a->attr_float("scale", 0) - 1.0f / std::sqrt(float(Dh))) < 1e-6f);
  CHECK((a->input(1) == nullptr) == packed_input);
  require_same_outputs(*before, g, feeds(s), 1e-4f);
  // Idempotence: a second run changes nothing.
  const int nodes = static_cast<int>(g.num_nodes());
  FusionReport again = fuse(b.graph());
  CHECK(matched(again, "Attention") == 0);
  CHECK(static_cast<int>(b.graph().num_nodes()) == nodes);
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

TEST_CASE("Attention: BERT-style separate projections become packed QKV + Attention", "[passes][Attention]") {
  Spec s;
  expect_fused(s, true);
}

TEST_CASE("Attention: scale spellings (Div on scores, sqrt on Q and K, none)", "[passes][Attention]") {
  Spec div;
  div.scale = 1;
  expect_fused(div, true);
  Spec sdpa;
  sdpa.scale = 2;
  sdpa.mask = 2;
  expect_fused(sdpa, true);
}

TEST_CASE("Attention: no scale and no mask", "[passes][Attention]") {
  GraphBuilder b(17);
  Spec s;
  s.scale = 3;
  s.mask = 0;
  build(b, s);
  auto before = clone_graph(b.graph());
  REQUIRE(matched(fuse(b.graph()), "Attention") == 1);
  const Node* a = find(b.graph(), "Attention");
  CHECK(a->attr_float("scale", 0) == 1.0f);
  CHECK(a->inputs.size() == 1);  // packed QKV only
  require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
}

TEST_CASE("Attention: a boolean Where key-padding mask is proven and passed as `mask`", "[passes][Attention]") {
  Spec s;
  s.mask = 2;
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  REQUIRE(matched(fuse(b.graph()), "Attention") == 1);
  const Node* a = find(b.graph(), "Attention");
  REQUIRE(a->input(3));
  CHECK(a->input(3)->name == "mask");  // the [B, S] input itself
  CHECK(a->input(4) == nullptr);
  CHECK(std::isinf(a->attr_float("mask_filter_value", 0)));
  require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
}

TEST_CASE("Attention: HF (1 - mask) * min is `mask` only when the mask is provably 0/1", "[passes][Attention]") {
  for (int mode : {1, 4}) {
    Spec s;
    s.mask = mode;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    REQUIRE(matched(fuse(b.graph()), "Attention") == 1);
    const Node* a = find(b.graph(), "Attention");
    if (mode == 4) {  // bool-cast mask: key padding, fill = finfo.min
      REQUIRE(a->input(3));
      CHECK(a->input(3)->name == "mask");
      CHECK(a->attr_float("mask_filter_value", 0) == -std::numeric_limits<float>::max());
    } else {  // an int64 mask could hold 2: the additive tensor goes in unchanged
      CHECK(a->input(3) == nullptr);
      REQUIRE(a->input(4));
      CHECK(a->input(4)->dtype == DType::Float);
    }
    require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
  }
}

TEST_CASE("Attention: transformers 4's inverted mask Where(bool(1 - m), min, 1 - m) is mask == 1", "[passes][Attention]") {
  for (int mode : {10, 11, 12}) {
    INFO("mode " << mode);
    Spec s;
    s.mask = mode;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    REQUIRE(matched(fuse(b.graph()), "Attention") == 1);
    const Node* a = find(b.graph(), "Attention");
    if (mode == 12) {  // a float mask: 1.0001 would round to 1 in fp16, so no proof; the tensor stays
      CHECK(a->input(3) == nullptr);
      CHECK(a->input(4) != nullptr);
    } else {  // Equal(mask, 1) as the op's mask, the [B, 1, S, S] term and its Slice gone
      REQUIRE(a->input(3));
      REQUIRE(a->input(3)->producer);
      CHECK(a->input(3)->producer->op_type == "Equal");
      CHECK(a->input(3)->producer->input(0)->name == "mask");
      CHECK(a->input(4) == nullptr);
      CHECK(a->attr_float("mask_filter_value", 0) == -std::numeric_limits<float>::max());
    }
    require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
  }
}

TEST_CASE("Attention: T5 position bias plus mask are summed into attn_bias", "[passes][Attention]") {
  Spec s;
  s.mask = 3;
  expect_fused(s, true);
}

TEST_CASE("Attention: GPT-2 packed QKV Split and Kᵀ through two transposes", "[passes][Attention]") {
  Spec s;
  s.packed = true;
  s.k_two_transposes = true;
  expect_fused(s, true);
}

TEST_CASE("Attention: a sequence Concat the graph computes is an operand, not a KV cache (EVA)", "[passes][Attention]") {
  Spec s;
  s.prefix_concat = true;
  expect_fused(s, false);
  GraphBuilder b(17);
  build(b, s);
  fuse(b.graph());
  const Node* a = find(b.graph(), "Attention");
  REQUIRE(a);
  CHECK(a->inputs.size() <= 5);  // no past key / value
  CHECK(a->outputs.size() == 1);  // no presents
  CHECK(count_op(b.graph(), "Concat") == 2);
}

TEST_CASE("Attention: Llama GQA repeat_kv and rotary stay outside the op", "[passes][Attention]") {
  Spec s;
  s.kv_heads = 2;
  s.rotary = true;
  expect_fused(s, false);
  Spec gqa;
  gqa.kv_heads = 2;
  expect_fused(gqa, true);
}

TEST_CASE("Attention rule 1: probabilities read outside are not fused", "[passes][Attention]") {
  Spec s;
  s.probs_output = true;
  expect_rejected(s, "rule 1");
}

TEST_CASE("Attention rule 7: a scale that is not a constant", "[passes][Attention]") {
  Spec s;
  s.scale = 4;
  expect_rejected(s, "rule 7: the scale in");
}

TEST_CASE("Attention: the mask added before scaling is carried scaled (attn_bias = mask * c)", "[passes][Attention]") {
  // (s + m)·c = s·c + m·c; the refusals (negative factors) are in attention_score_forms_test.cc.
  Spec s;
  s.mask_before_scale = true;
  expect_fused(s, true);
}

TEST_CASE("Attention rule 7: head reshapes that disagree", "[passes][Attention]") {
  Spec s;
  s.bad_heads = true;
  expect_rejected(s, "rule 7");
}

TEST_CASE("Attention rule 5: a precision-changing Cast inside the chain", "[passes][Attention]") {
  Spec s;
  s.cast_scores = true;
  expect_rejected(s, "rule 5");
}

TEST_CASE("Attention: fp16 model with an fp32 softmax (Cast up, Softmax, Cast down) fuses", "[passes][Attention]") {
  // transformers' eager attention: softmax(scores, dtype=float32).to(query.dtype). The fused op's
  // softmax is fp32 too, so the pair of Casts is what it does inside (rule 5 allows exactly this).
  auto build16 = [](GraphBuilder& b, bool down) {
    Value* x = b.input("x", DType::Float16, {B, S, D});
    auto w16 = [&](const std::string& n, std::vector<int64_t> dims) { return b.constant(n, Tensor(DType::Float16, dims)); };
    Value* q = b.op("MatMul", {x, w16("Wq", {D, D})});
    Value* k = b.op("MatMul", {x, w16("Wk", {D, D})});
    Value* v = b.op("MatMul", {x, w16("Wv", {D, D})});
    Value* sc = b.op("MatMul", {heads(b, q, H, Dh, {0, 2, 1, 3}, "q"), heads(b, k, H, Dh, {0, 2, 3, 1}, "k")});
    sc = b.op("Mul", {sc, b.constant("c16", Tensor(DType::Float16, {}))});
    Value* p = b.op("Softmax", {b.op("Cast", {sc}, {Attribute::make_int("to", 1)}, "up")}, {Attribute::make_int("axis", -1)});
    p = b.op("Cast", {p}, {Attribute::make_int("to", down ? 10 : 16)}, "down");
    Value* o = b.op("MatMul", {p, heads(b, v, H, Dh, {0, 2, 1, 3}, "v")});
    o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
    b.output(b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}));
  };
  GraphBuilder b(17);
  build16(b, true);
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  CHECK(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  CHECK(count_op(b.graph(), "Cast") == 0);
  // Casting the fp32 probabilities to another type (bf16) than the scores had is rule 5.
  GraphBuilder c(17);
  build16(c, false);
  // Invalid ONNX (MatMul of bf16 probabilities and fp16 V): only --no-validate input reaches the pass.
  FusionReport rc = fuse_unchecked(c.graph());
  CHECK(matched(rc, "Attention") == 0);
  CHECK_THAT(reasons(rc, "Attention"), Contains("rule 5"));
}

TEST_CASE("Attention: fully masked rows give the original's uniform rows (finfo.min)", "[passes][Attention]") {
  for (int mode : {1, 3, 4}) {
    Spec s;
    s.mask = mode;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    REQUIRE(matched(fuse(b.graph()), "Attention") == 1);
    auto f = feeds(s);
    f["mask"] = Tensor::from_ints({0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, {B, S});  // batch 0: every key masked
    require_same_outputs(*before, b.graph(), f, 1e-4f);
  }
}

TEST_CASE("Attention rule 7: a Where mask with a small fill cannot be combined with another term", "[passes][Attention]") {
  Spec s;
  s.mask = 5;
  expect_rejected(s, "not large enough");
}

TEST_CASE("Attention: causal masks are proven and become causal=1", "[passes][Attention]") {
  for (int mode : {6, 7, 8}) {
    INFO("mask mode " << mode);
    Spec s;
    s.mask = mode;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = fuse(b.graph());
    INFO(reasons(r, "Attention"));
    REQUIRE(matched(r, "Attention") == 1);
    const Node* a = find(b.graph(), "Attention");
    if (mode == 8) {  // the buffer is not lower-triangular: it stays a mask tensor
      CHECK(a->attr_int("causal", -1) == 0);
      CHECK(a->input(4) != nullptr);
    } else {
      CHECK(a->attr_int("causal", -1) == 1);
      CHECK(a->inputs.size() == 1);  // no mask tensor left
    }
    require_same_outputs(*before, b.graph(), feeds(s), 1e-4f);
  }
}

TEST_CASE("Attention: torch SDPA decomposition (flattened Kᵀ, NaN rows to zero)", "[passes][Attention]") {
  Spec s;
  s.sdpa = true;
  s.scale = 2;
  s.mask = 2;  // Where(mask, s, -inf): a fully masked row is NaN after Softmax, zero after the guard
  GraphBuilder b(18);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  // The guard is folded into the op (masked_rows_zero), not re-emitted after it.
  CHECK(count_op(b.graph(), "IsNaN") == 0);
  CHECK(count_op(b.graph(), "Where") == 0);
  const Node* a = find(b.graph(), "Attention");
  REQUIRE(a);
  CHECK(a->attr_int("masked_rows_zero", 0) == 1);
  CHECK(std::isinf(a->attr_float("mask_filter_value", 0.0f)));
  auto f = feeds(s);
  f["mask"] = Tensor::from_ints({0, 0, 0, 0, 0, 1, 1, 1, 0, 0}, {B, S});  // batch 0 fully masked
  require_same_outputs(*before, b.graph(), f, 1e-4f);
  // The fused graph really gives 0 there (not NaN compared equal to NaN).
  const std::vector<Tensor> out = run_cpu(b.graph(), f);
  for (int64_t i = 0; i < S * D; ++i) REQUIRE(out.at(0).data<float>()[i] == 0.0f);  // batch 0
}

TEST_CASE("Attention: an SDPA-like Where(IsNaN) that is not the guard on P is not folded", "[passes][Attention]") {
  for (int guard : {1, 2}) {
    INFO((guard == 1 ? "IsNaN of the scores, not of P" : "NaN -> 1, not 0"));
    Spec s;
    s.sdpa = true;
    s.scale = 2;
    s.mask = 2;
    s.guard = guard;
    GraphBuilder b(18);
    build(b, s);
    FusionReport r = fuse(b.graph());
    CHECK(matched(r, "Attention") == 0);
    CHECK(count_op(b.graph(), "IsNaN") == 1);
    CHECK(count_op(b.graph(), "Softmax") == 1);
    CHECK(find(b.graph(), "Attention") == nullptr);
  }
}

TEST_CASE("Attention: without the SDPA guard a -inf mask leaves masked_rows_zero unset", "[passes][Attention]") {
  Spec s;
  s.mask = 2;  // Where(mask, s, -inf), no guard: a fully masked row stays NaN, as in the original
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = fuse(b.graph());
  REQUIRE(matched(r, "Attention") == 1);
  const Node* a = find(b.graph(), "Attention");
  REQUIRE(a);
  CHECK_FALSE(a->has_attr("masked_rows_zero"));
}

TEST_CASE("Attention: bmm-style [B*H, S, D] attention with an ALiBi term (BLOOM)", "[passes][Attention]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {B, S, D});
  Value* qkv = b.op("MatMul", {x, b.constant("Wqkv", rand_tensor({D, 3 * D}, 1))});
  Value* r5 = b.op("Reshape", {qkv, ints(b, "per_head", {B, S, H, 3, Dh})});
  auto part = [&](int64_t i, const std::string& n) {  // [B, S, H, Dh] -> [B, H, S, Dh] -> [B*H, S, Dh]
    Value* g = b.op("Gather", {r5, b.constant(n + "_idx", Tensor::from_ints({i}, {}))}, {Attribute::make_int("axis", 3)});
    Value* t = b.op("Transpose", {g}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
    return b.op("Reshape", {t, ints(b, n + "_flat", {B * H, S, Dh})});
  };
  Value* q3 = part(0, "q");
  Value* kt3 = b.op("Transpose", {part(1, "k")}, {Attribute::make_ints("perm", {0, 2, 1})});
  Value* v3 = part(2, "v");
  Value* s3 = b.op("Mul", {b.op("MatMul", {q3, kt3}), b.scalar("inv_norm", 1.0f / std::sqrt(float(Dh)))});
  s3 = b.op("Add", {s3, b.constant("alibi", rand_tensor({B * H, 1, S}, 5, -1, 0))}, {}, "baddbmm");
  Value* s4 = b.op("Reshape", {s3, ints(b, "scores4", {B, H, S, S})});
  s4 = b.op("Add", {s4, b.constant("mask4", rand_tensor({B, 1, S, S}, 6, -2, 0))});
  Value* p4 = b.op("Softmax", {s4}, {Attribute::make_int("axis", -1)});
  Value* o3 = b.op("MatMul", {b.op("Reshape", {p4, ints(b, "p3", {B * H, S, S})}), v3});
  Value* o4 = b.op("Transpose", {b.op("Reshape", {o3, ints(b, "o4", {B, H, S, Dh})})}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  b.output(b.op("Reshape", {o4, ints(b, "merge", {0, 0, -1})}));
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  CHECK(count_op(b.graph(), "Gather") == 3);  // the per-head interleaved split stays outside
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, S, D}, 41, -2, 2)}}, 1e-4f);
}

namespace {
// transformers' bmm attention (DETR; the BART family before 4.48): scores on [B*H, S, S] views,
// viewed as [B, H, S, S] to add the mask, viewed back flat for the Softmax and P·V.
// merge_dims: the view back before the Softmax ({B*H, S, S}; anything else is not that view).
void build_flat_softmax(GraphBuilder& b, std::vector<int64_t> merge_dims) {
  Value* x = b.input("x", DType::Float, {B, S, D});
  auto proj = [&](const std::string& n, uint32_t seed) {
    Value* p = b.op("MatMul", {x, b.constant("W" + n, rand_tensor({D, D}, seed))});
    Value* t = b.op("Transpose", {b.op("Reshape", {p, ints(b, n + "_heads", {B, S, H, Dh})})},
                    {Attribute::make_ints("perm", {0, 2, 1, 3})});
    return b.op("Reshape", {t, ints(b, n + "_flat", {B * H, S, Dh})});
  };
  Value* q3 = b.op("Mul", {proj("q", 1), b.scalar("scaling", 1.0f / std::sqrt(float(Dh)))});
  Value* kt3 = b.op("Transpose", {proj("k", 2)}, {Attribute::make_ints("perm", {0, 2, 1})});
  Value* v3 = proj("v", 3);
  Value* s3 = b.op("MatMul", {q3, kt3}, {}, "qk");
  Value* s4 = b.op("Reshape", {s3, ints(b, "scores4", {B, H, S, S})});
  s4 = b.op("Add", {s4, b.constant("mask4", rand_tensor({B, 1, S, S}, 6, -2, 0))}, {}, "mask_add");
  Value* s3b = b.op("Reshape", {s4, ints(b, "scores3", merge_dims)}, {}, "scores_flat_again");
  Value* p = b.op("Softmax", {s3b}, {Attribute::make_int("axis", -1)});
  if (merge_dims != std::vector<int64_t>{B * H, S, S}) p = b.op("Reshape", {p, ints(b, "p3", {B * H, S, S})});
  Value* o3 = b.op("MatMul", {p, v3});
  Value* o4 = b.op("Transpose", {b.op("Reshape", {o3, ints(b, "o4", {B, H, S, Dh})})}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  b.output(b.op("Reshape", {o4, ints(b, "merge", {0, 0, -1})}));
}
}  // namespace

TEST_CASE("Attention: bmm-style scores masked in the 4-D view, softmax on the flat view (DETR, BART < 4.48)",
          "[passes][Attention]") {
  GraphBuilder b(17);
  build_flat_softmax(b, {B * H, S, S});
  auto before = clone_graph(b.graph());
  FusionReport r = fuse(b.graph());
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, S, D}, 41, -2, 2)}}, 1e-4f);
}

TEST_CASE("Attention: a softmax over a [B*H, 1, S*S_kv] view (not per query row) is not fused", "[passes][Attention]") {
  GraphBuilder b(17);
  build_flat_softmax(b, {B * H, 1, S * S});  // normalises each head's whole score matrix: not attention
  FusionReport r = fuse(b.graph());
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
}
