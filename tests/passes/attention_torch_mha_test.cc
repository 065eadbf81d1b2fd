// Attention fusion on PyTorch's own nn.MultiheadAttention decomposition
// (F.multi_head_attention_forward as the dynamo exporter writes it): one packed in-projection
// of the seq-first [S, B, E] input, unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2)
// .squeeze(-2) and three Gathers for q, k, v; each q.view(S, B·H, D).transpose(0, 1); then
//   - need_weights=False: SDPA on .view(B, H, S, D) (sqrt-scale on q and on the flattened Kᵀ),
//     output permute(2, 0, 1, 3) -> [S·B, E] for out_proj;
//   - need_weights=True (the bmm path): q·scale, bmm(q, k.transpose(-2, -1)) on [B·H, S, *]
//     views, baddbmm with the [B·H, 1, S] key-padding bias, softmax, bmm, transpose(0, 1) ->
//     [S·B, E].
// The fused op reads Transpose(q, 1, 0, 2) etc. ([B, S, E]) and its output goes back through
// Transpose(1, 0, 2) to the seq-first rows out_proj reads; the packed projection goes in as one
// Transpose, the key-padding bias as mask = Not(kpm). Negatives: a key-padding bias with a
// small fill (-1e4: s + fill is not the fill) stays attn_bias; k.view(5, -1, D) against a
// symbolic length must stay unfused with the reshape named (the -1 makes it a different split
// at any other length, and the Reshape accepts many). TorchScript's own form,
// k.view(5, B·H, D) with B·H computed from the input's shape, accepts only seq = 5 (element
// count): it fuses, the pass manager binding seq = 5 for the passes (src/pass/forced_dims.h)
// and restoring the declared [seq, batch, E] afterwards.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t H = 4, Dh = 3, E = H * Dh;

struct Form {
  bool batch_first = false;  // x is [B, S, E] (transposed to [S, B, E] first), else [S, B, E]
  bool sdpa = false;         // the need_weights=False SDPA path on 4-D views (static B, S)
  bool baked_len = false;    // k.view(5, -1, D): a constant length, dim 1 left to the element count
  bool baked_len_bh = false;  // k.view(5, B·H, D), B·H from Shape(x) (TorchScript's trace)
  float fill = -std::numeric_limits<float>::infinity();  // the key-padding bias value
  int64_t B = 2, S = 5;
};

// The key-padding bias [B, 1, 1, S] (-inf where key_padding_mask is true).
Value* kpm_bias(GraphBuilder& b, Value* kpm, float fill) {
  Value* zeros = b.op("Expand", {b.scalar("zero", 0.0f), b.op("Shape", {kpm})});
  Value* f = b.op("Where", {kpm, b.scalar("ninf", fill), zeros}, {}, "masked_fill");
  return b.op("Reshape", {f, ints(b, "b11s", {0, 1, 1, -1})}, {}, "kpm_view");
}

void build(GraphBuilder& b, const Form& f) {
  const bool sym = !f.sdpa;  // symbolic batch / seq except for the 4-D SDPA views
  const int64_t B = sym ? -1 : f.B, S = sym ? -1 : f.S;
  Value* x = f.batch_first ? b.input("x", DType::Float, {B, S, E}, {"batch", "seq"})
                           : b.input("x", DType::Float, {S, B, E}, {"seq", "batch"});
  Value* kpm = b.input("kpm", DType::Bool, {B, S}, {"batch", "seq"});
  Value* xs = f.batch_first ? b.op("Transpose", {x}, {Attribute::make_ints("perm", {1, 0, 2})}, "to_seq_first") : x;
  Value* lin = b.op("Add", {b.op("MatMul", {xs, b.constant("Win", rand_tensor({E, 3 * E}, 1))}),
                            b.constant("bin", rand_tensor({3 * E}, 2))}, {}, "in_proj");
  Value* un = b.op("Reshape", {lin, ints(b, "sb3e", {0, 0, 3, E})}, {}, "unflatten");
  Value* tr = b.op("Transpose", {b.op("Unsqueeze", {un, ints(b, "ax0", {0})})}, {Attribute::make_ints("perm", {3, 1, 2, 0, 4})});
  Value* sq = b.op("Squeeze", {tr, ints(b, "axm2", {-2})});
  auto pick = [&](int64_t i, const std::string& n) {
    Value* g = b.op("Gather", {sq, b.constant(n + "_i", Tensor::from_ints({i}, {}))}, {Attribute::make_int("axis", 0)}, n);
    Value* target = ints(b, n + "_view", {(f.baked_len && n == "k") ? 5 : 0, -1, Dh});
    if (f.baked_len_bh && n == "k") {
      Value* batch = b.op("Shape", {xs}, {Attribute::make_int("start", 1), Attribute::make_int("end", 2)});
      Value* bh = b.op("Mul", {batch, ints(b, "h", {H})});
      target = b.op("Concat", {ints(b, "traced_len", {5}), bh, ints(b, "dh", {Dh})}, {Attribute::make_int("axis", 0)});
    }
    return b.op("Reshape", {g, target}, {}, n + "_view");  // [S, B·H, D]
  };
  Value *q = pick(0, "q"), *k = pick(1, "k"), *v = pick(2, "v");
  auto t = [&](Value* z, std::vector<int64_t> p, const std::string& n) {
    return b.op("Transpose", {z}, {Attribute::make_ints("perm", p)}, n);
  };
  Value* o;
  if (f.sdpa) {  // 4-D views, sqrt-scale on q and on Kᵀ flattened to [B·H, D, S]
    auto view4 = [&](Value* z, const std::string& n) { return b.op("Reshape", {z, ints(b, n + "_4d", {f.B, H, f.S, Dh})}, {}, n + "_4d"); };
    Value* q4 = view4(t(q, {1, 0, 2}, "q_t"), "q");
    Value* k4 = view4(t(k, {1, 0, 2}, "k_t"), "k");
    Value* v4 = view4(t(v, {1, 0, 2}, "v_t"), "v");
    Value* kf = b.op("Reshape", {k4, ints(b, "k_flat", {-1, f.S, Dh})});
    Value* kt = b.op("Reshape", {t(kf, {0, 2, 1}, "k_flat_t"), ints(b, "k_unflat", {f.B, H, Dh, f.S})});
    Value* sc = b.scalar("sqrt_scale", std::pow(float(Dh), -0.25f));
    Value* s = b.op("MatMul", {b.op("Mul", {q4, sc}), b.op("Mul", {kt, sc})}, {}, "qk");
    s = b.op("Add", {s, kpm_bias(b, kpm, f.fill)}, {}, "mask_add");
    Value* pv = b.op("MatMul", {b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}), v4}, {}, "pv");
    o = t(pv, {2, 0, 1, 3}, "out_permute");
  } else {  // bmm path on [B·H, S, *] views
    Value* qs = b.op("Mul", {t(q, {1, 0, 2}, "q_t"), b.scalar("scale", 1.0f / std::sqrt(float(Dh)))}, {}, "q_scaled");
    Value* s = b.op("MatMul", {qs, t(k, {1, 2, 0}, "k_t")}, {}, "qk");
    Value* bias = b.op("Expand", {kpm_bias(b, kpm, f.fill), ints(b, "heads", {1, H, 1, 1})});
    Value* flat_shape = b.op("Concat", {ints(b, "bh1", {-1, 1}), b.op("Shape", {kpm}, {Attribute::make_int("start", 1)})},
                             {Attribute::make_int("axis", 0)});
    s = b.op("Add", {s, b.op("Reshape", {bias, flat_shape}, {}, "bias_flat")}, {}, "baddbmm");
    Value* pv = b.op("MatMul", {b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}), t(v, {1, 0, 2}, "v_t")}, {}, "bmm");
    o = t(pv, {1, 0, 2}, "out_t");
  }
  Value* rows = b.op("Reshape", {o, ints(b, "rows", {-1, E})}, {}, "out_rows");  // [S·B, E]
  Value* proj = b.op("MatMul", {rows, b.constant("Wo", rand_tensor({E, E}, 3))}, {}, "out_proj");
  Value* sbe = b.op("Concat", {b.op("Shape", {xs}, {Attribute::make_int("start", 0), Attribute::make_int("end", 2)}), ints(b, "e", {E})},
                    {Attribute::make_int("axis", 0)});
  Value* y = b.op("Reshape", {proj, sbe}, {}, "out_sbe");
  b.output(f.batch_first ? b.op("Transpose", {y}, {Attribute::make_ints("perm", {1, 0, 2})}, "to_batch_first") : y);
}

std::map<std::string, Tensor> feeds(const Form& f) {
  Tensor kpm(DType::Bool, {f.B, f.S});
  for (int64_t i = 0; i < kpm.numel(); ++i) kpm.data<uint8_t>()[i] = i >= 2 * f.S - 2;  // row 1: last 2 keys padded
  Tensor x = f.batch_first ? rand_tensor({f.B, f.S, E}, 41, -2, 2) : rand_tensor({f.S, f.B, E}, 41, -2, 2);
  return {{"x", x}, {"kpm", kpm}};
}

void expect_fused(const Form& f) {
  GraphBuilder b(17);
  build(b, f);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  const Node* a = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  CHECK(a->attr_int("num_heads", 0) == H);
  CHECK(a->attr_float("scale", 0) == Approx(1.0f / std::sqrt(float(Dh))));
  // The packed [S, B, 3E] in-projection re-laid out batch-first outside the op (one Transpose;
  // the q/k/v Gathers become dead), the output back to seq-first rows.
  REQUIRE(a->input(0));
  REQUIRE(a->input(0)->producer);
  CHECK(a->input(0)->producer->op_type == "Transpose");
  CHECK(a->input(0)->producer->input(0)->name == "in_proj_y");
  CHECK(a->input(1) == nullptr);
  CHECK(count_op(b.graph(), "Gather") == 0);
  // The key-padding bias Where(kpm, -inf, 0) -> [B, 1, 1, S] -> expanded over the heads (-> the
  // [B·H, 1, S] bmm view) is proven: mask = Not(kpm), mask_filter_value -inf, no attn_bias.
  REQUIRE(a->input(3));
  REQUIRE(a->input(3)->producer);
  CHECK(a->input(3)->producer->op_type == "Not");
  CHECK(a->input(3)->producer->input(0)->name == "kpm");
  CHECK(a->input(4) == nullptr);
  CHECK(std::isinf(a->attr_float("mask_filter_value", 0)));
  require_same_outputs(*before, b.graph(), feeds(f), 1e-4f);
  const int nodes = static_cast<int>(b.graph().num_nodes());
  CHECK(matched(run_passes(b.graph(), {"Attention"}), "Attention") == 0);
  CHECK(static_cast<int>(b.graph().num_nodes()) == nodes);
}

}  // namespace

TEST_CASE("Attention: nn.MultiheadAttention bmm path (seq-first, symbolic dims) fuses", "[passes][Attention]") {
  expect_fused(Form{});
  Form bf;
  bf.batch_first = true;
  expect_fused(bf);
}

TEST_CASE("Attention: nn.MultiheadAttention SDPA path (batch_first, 4-D views) fuses", "[passes][Attention]") {
  Form f;
  f.batch_first = f.sdpa = true;
  expect_fused(f);
}

TEST_CASE("Attention rule 7: a k.view with a baked key length is refused", "[passes][Attention]") {
  GraphBuilder b(17);
  Form f;
  f.baked_len = true;
  build(b, f);
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  CHECK_THAT(reasons(r, "Attention"), Contains("rule 7: cannot prove that Reshape 'k_view'"));
  CHECK_THAT(reasons(r, "Attention"), Contains("splits a seq-first [S, B, H*D] tensor into [S, B*H, D]"));
}

TEST_CASE("Attention: TorchScript's k.view(5, B*H, D) fuses at the only length it accepts", "[passes][Attention]") {
  for (bool batch_first : {false, true}) {
    Form f;
    f.baked_len_bh = true;
    f.batch_first = batch_first;
    INFO("batch_first " << batch_first);
    expect_fused(f);
  }
  // The declared input shapes are the model's own again after the passes.
  GraphBuilder b(17);
  Form f;
  f.baked_len_bh = true;
  build(b, f);
  REQUIRE(matched(run_passes(b.graph(), {"Attention"}), "Attention") == 1);
  const Value* x = b.graph().find("x");
  REQUIRE(x);
  REQUIRE(x->shape);
  CHECK((*x->shape)[0].symbol == "seq");
  CHECK((*x->shape)[1].symbol == "batch");
}

TEST_CASE("Attention: a torch key-padding bias with a small fill stays attn_bias", "[passes][Attention]") {
  GraphBuilder b(17);
  Form f;
  f.fill = -1e4f;
  build(b, f);
  auto before = clone_graph(b.graph());
  REQUIRE(matched(run_passes(b.graph(), {"Attention"}), "Attention") == 1);
  const Node* a = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  CHECK((a->inputs.size() < 4 || a->input(3) == nullptr));
  CHECK(a->input(4));
  require_same_outputs(*before, b.graph(), feeds(f), 1e-4f);
}
