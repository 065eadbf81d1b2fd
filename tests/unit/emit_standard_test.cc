// --emit standard (src/onnx_io/emit_standard.h): each mapping builds the standard op with
// the right attributes, and the CPU backend gives the same numbers for the fuseopt op and
// its standard form (fuserun has kernels for both). Refusals are reported with a reason.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "onnx_io/emit_standard.h"
#include "pass/fusion_report.h"
#include "support/fusion_check.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

const float kLowest = -std::numeric_limits<float>::max();

FusionReport emit(Graph& g) {
  FusionReport r;
  apply_emit(g, EmitOptions{EmitMode::Standard}, &r);
  return r;
}

Node* only(const Graph& g, const std::string& op) {
  Node* found = nullptr;
  for (const auto& n : g.nodes())
    if (n->op_type == op && n->domain.empty()) {
      REQUIRE(found == nullptr);
      found = n.get();
    }
  REQUIRE(found != nullptr);
  return found;
}

Tensor mask_tensor(const std::vector<int64_t>& v, std::vector<int64_t> dims) { return Tensor::from_ints(v, std::move(dims)); }

}  // namespace

TEST_CASE("emit: mode names parse - a bad one is one clear error") {
  CHECK(parse_emit_mode("fuseopt") == EmitMode::Fuseopt);
  CHECK(parse_emit_mode("standard") == EmitMode::Standard);
  CHECK_THROWS_WITH(parse_emit_mode("onnx"), Catch::Contains("'onnx'") && Catch::Contains("'standard'"));
}

TEST_CASE("emit: fuseopt mode changes nothing") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 8});
  b.output(b.op("RMSNorm", {x, b.constant("g", rand_tensor({8}, 1))}, {}, "", "fuseopt"));
  FusionReport r;
  apply_emit(b.graph(), EmitOptions{}, &r);
  CHECK(count_domain_op(b.graph(), "fuseopt", "RMSNorm") == 1);
  CHECK(b.graph().opset("") == 17);
  CHECK(r.emit_mode().empty());
}

TEST_CASE("emit: RMSNorm -> RMSNormalization-23 with fuseopt's default epsilon written out") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* m = b.op("ReduceMean", {x}, {Attribute::make_ints("axes", {-1})});  // upgraded on the way
  Value* y = b.op("RMSNorm", {x, b.constant("g", rand_tensor({8}, 2))}, {}, "", "fuseopt");
  b.output(b.op("Add", {y, m}));
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(g.opset("") == 23);
  CHECK_FALSE(g.opset_imports.count("fuseopt"));
  Node* n = only(g, "RMSNormalization");
  CHECK(n->attr_int("axis", 0) == -1);
  CHECK(n->attr_float("epsilon", 0) == Approx(1e-6f));
  CHECK_FALSE(only(g, "ReduceMean")->has_attr("axes"));
  REQUIRE(r.emit_op("RMSNorm"));
  CHECK(r.emit_op("RMSNorm")->standard == 1);
  CHECK(r.emit_opset_before() == 17);
  CHECK(r.emit_opset_after() == 23);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3, 8}, 3)}});
}

TEST_CASE("emit: LayerNorm (opset 14) -> LayerNormalization - raising the opset only to 17") {
  GraphBuilder b(14);
  Value* x = b.input("x", DType::Float, {2, 8});
  b.output(b.op("LayerNorm", {x, b.constant("g", rand_tensor({8}, 4)), b.constant("b", rand_tensor({8}, 5))},
                {Attribute::make_float("epsilon", 1e-5f)}, "", "fuseopt"));
  auto before = clone_graph(b.graph());
  emit(b.graph());
  CHECK(b.graph().opset("") == 17);
  CHECK(only(b.graph(), "LayerNormalization")->inputs.size() == 3);
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 8}, 6)}});
}

TEST_CASE("emit: SkipLayerNorm rms=1 -> Add + RMSNormalization (Sum kept) - rms=0 stays fuseopt with a reason") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 8});
  Value* skip = b.input("skip", DType::Float, {2, 8});
  Node* s = b.node("SkipLayerNorm", {x, skip, b.constant("g", rand_tensor({8}, 7)), nullptr, b.constant("bias", rand_tensor({8}, 8))},
                   2, {Attribute::make_float("epsilon", 1e-6f), Attribute::make_int("rms", 1)}, "fuseopt", "rms");
  Node* l = b.node("SkipLayerNorm", {s->output(1), skip, b.constant("g2", rand_tensor({8}, 9))}, 1,
                   {Attribute::make_float("epsilon", 1e-5f)}, "fuseopt", "ln");
  b.output(s->output(0));
  b.output(l->output(0));
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "RMSNormalization") == 1);
  CHECK(count_domain_op(g, "fuseopt", "SkipLayerNorm") == 1);
  const EmitStats* e = r.emit_op("SkipLayerNorm");
  REQUIRE(e);
  CHECK(e->standard == 1);
  CHECK(e->fuseopt == 1);
  REQUIRE(e->reasons.size() == 1);
  CHECK(e->reasons[0].find("LayerNormalization variant") != std::string::npos);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 8}, 10)}, {"skip", rand_tensor({2, 8}, 11)}});
}

TEST_CASE("emit: RotaryEmbedding -> RotaryEmbedding-23 - a batch-1 cache is Expanded once for all layers") {
  GraphBuilder b(17);
  Value* x1 = b.input("x1", DType::Float, {2, 5, 16}, {"", "seq"});
  Value* x2 = b.input("x2", DType::Float, {2, 5, 16}, {"", "seq"});
  Value* cs = b.input("cos", DType::Float, {1, 5, 4});
  Value* sn = b.input("sin", DType::Float, {1, 5, 4});
  std::vector<Attribute> attrs{Attribute::make_int("num_heads", 2)};
  b.output(b.op("RotaryEmbedding", {x1, cs, sn}, attrs, "r1", "fuseopt"));
  b.output(b.op("RotaryEmbedding", {x2, cs, sn}, attrs, "r2", "fuseopt"));
  auto before = clone_graph(b.graph());
  emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "RotaryEmbedding") == 2);
  CHECK(count_op(g, "Expand") == 2);  // one per cache, shared by both layers
  for (const auto& n : g.nodes())
    if (n->op_type == "RotaryEmbedding") {
      CHECK(n->attr_int("num_heads", 0) == 2);
      CHECK(n->input(1)->producer->op_type == "Expand");
    }
  require_same_outputs(*before, g,
                       {{"x1", rand_tensor({2, 5, 16}, 12)}, {"x2", rand_tensor({2, 5, 16}, 13)},
                        {"cos", rand_tensor({1, 5, 4}, 14)}, {"sin", rand_tensor({1, 5, 4}, 15)}});
}

TEST_CASE("emit: packed causal Attention with a key-padding mask -> Split + Attention-23 - is_causal - a shared mask") {
  // Batch 1 of the mask pads everything: a fully masked row averages V (finfo.min fill) in both.
  GraphBuilder b(17);
  Value* qkv1 = b.input("qkv1", DType::Float, {2, 4, 24});
  Value* qkv2 = b.input("qkv2", DType::Float, {2, 4, 24});
  Value* mask = b.input("mask", DType::Int64, {2, 4});
  std::vector<Attribute> attrs{Attribute::make_int("num_heads", 2), Attribute::make_int("kv_num_heads", 2),
                               Attribute::make_float("scale", 0.35f), Attribute::make_int("causal", 1),
                               Attribute::make_float("mask_filter_value", kLowest)};
  Value* y1 = b.op("Attention", {qkv1, nullptr, nullptr, mask}, attrs, "a1", "fuseopt");
  b.output(b.op("Attention", {qkv2, nullptr, nullptr, mask}, attrs, "a2", "fuseopt"));
  b.output(y1);
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "Attention") == 2);
  CHECK(count_op(g, "Split") == 2);
  CHECK(count_op(g, "Cast") == 1);  // the mask is built once
  for (const auto& n : g.nodes())
    if (n->op_type == "Attention") {
      CHECK(n->attr_int("q_num_heads", 0) == 2);
      CHECK(n->attr_int("kv_num_heads", 0) == 2);
      CHECK(n->attr_int("is_causal", 0) == 1);
      CHECK(n->attr_float("scale", 0) == Approx(0.35f));
      REQUIRE(n->input(3));
    }
  CHECK(r.emit_op("Attention")->standard == 2);
  require_same_outputs(*before, g,
                       {{"qkv1", rand_tensor({2, 4, 24}, 16)}, {"qkv2", rand_tensor({2, 4, 24}, 17)},
                        {"mask", mask_tensor({1, 1, 1, 0, 0, 0, 0, 0}, {2, 4})}});
}

TEST_CASE("emit: GQA Attention with S_q != S_kv folds bottom-right causal into attn_mask - float bias kept additive") {
  GraphBuilder b(17);
  Value* q = b.input("q", DType::Float, {2, 3, 16});
  Value* k = b.input("k", DType::Float, {2, 5, 8});
  Value* v = b.input("v", DType::Float, {2, 5, 8});
  Value* bias = b.input("bias", DType::Float, {1, 4, 3, 5});
  b.output(b.op("Attention", {q, k, v, nullptr, bias},
                {Attribute::make_int("num_heads", 4), Attribute::make_int("kv_num_heads", 2),
                 Attribute::make_int("causal", 1), Attribute::make_float("mask_filter_value", kLowest)},
                "a", "fuseopt"));
  auto before = clone_graph(b.graph());
  emit(b.graph());
  Node* a = only(b.graph(), "Attention");
  CHECK_FALSE(a->has_attr("is_causal"));
  CHECK_FALSE(a->has_attr("scale"));  // the same default, 1/sqrt(head size)
  CHECK(a->attr_int("kv_num_heads", 0) == 2);
  REQUIRE(a->input(3));
  require_same_outputs(*before, b.graph(),
                       {{"q", rand_tensor({2, 3, 16}, 18)}, {"k", rand_tensor({2, 5, 8}, 19)},
                        {"v", rand_tensor({2, 5, 8}, 20)}, {"bias", rand_tensor({1, 4, 3, 5}, 21)}});
}

TEST_CASE("emit: Attention stays fuseopt where the standard op is not exact - and the report says why") {
  auto one = [](float fill, bool guard) {
    auto b = std::make_unique<GraphBuilder>(17);
    Value* qkv = b->input("qkv", DType::Float, {2, 4, 24});
    Value* mask = b->input("mask", DType::Int64, {2, 4});
    Value* y = b->op("Attention", {qkv, nullptr, nullptr, mask},
                     {Attribute::make_int("num_heads", 2), Attribute::make_float("mask_filter_value", fill)}, "a",
                     "fuseopt");
    if (guard) {
      Value* nan = b->op("IsNaN", {y});
      y = b->op("Where", {nan, b->scalar("zero", 0.0f), y});
    }
    // A second fused op with a standard form, so the model is not refused as a whole.
    b->output(b->op("RMSNorm", {y, b->constant("g", rand_tensor({8}, 1))}, {}, "n", "fuseopt"));
    return b;
  };
  SECTION("a fill above -1e30 replaces scores, which no additive mask reproduces") {
    auto b = one(-10000.0f, false);
    FusionReport r = emit(b->graph());
    CHECK(count_domain_op(b->graph(), "fuseopt", "Attention") == 1);
    REQUIRE(r.emit_op("Attention"));
    CHECK(r.emit_op("Attention")->reasons.at(0).find("-1e30") != std::string::npos);
  }
  SECTION("a -inf fill without the NaN guard (fully masked rows: NaN vs 0)") {
    auto b = one(-std::numeric_limits<float>::infinity(), false);
    FusionReport r = emit(b->graph());
    CHECK(count_domain_op(b->graph(), "fuseopt", "Attention") == 1);
    CHECK(r.emit_op("Attention")->reasons.at(0).find("NaN guard") != std::string::npos);
  }
  SECTION("a -inf fill followed by the guard maps") {
    auto b = one(-std::numeric_limits<float>::infinity(), true);
    auto before = clone_graph(b->graph());
    emit(b->graph());
    CHECK(count_op(b->graph(), "Attention") == 1);
    require_same_outputs(*before, b->graph(),
                         {{"qkv", rand_tensor({2, 4, 24}, 22)}, {"mask", mask_tensor({1, 1, 1, 0, 0, 0, 0, 0}, {2, 4})}});
  }
}

TEST_CASE("emit: masked_rows_zero with a -inf fill -> Attention-23 followed by the NaN guard it has no attribute for") {
  GraphBuilder b(17);
  Value* qkv = b.input("qkv", DType::Float, {2, 4, 24});
  Value* mask = b.input("mask", DType::Int64, {2, 4});
  Value* y = b.op("Attention", {qkv, nullptr, nullptr, mask},
                  {Attribute::make_int("num_heads", 2), Attribute::make_int("masked_rows_zero", 1),
                   Attribute::make_float("mask_filter_value", -std::numeric_limits<float>::infinity())},
                  "a", "fuseopt");
  b.output(b.op("RMSNorm", {y, b.constant("g", rand_tensor({8}, 61))}, {}, "n", "fuseopt"));
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_domain_op(g, "fuseopt", "Attention") == 0);
  CHECK(r.emit_op("Attention")->standard == 1);
  Node* a = only(g, "Attention");
  CHECK_FALSE(a->has_attr("masked_rows_zero"));
  Node* nan = only(g, "IsNaN");
  CHECK(nan->input(0) == a->output(0));
  const Node* guard = nullptr;  // Where(IsNaN(Y), 0, Y) (the attn_mask is a Where too)
  for (const auto& n : g.nodes())
    if (n->op_type == "Where" && n->input(0) == nan->output(0)) guard = n.get();
  REQUIRE(guard);
  CHECK(guard->input(2) == a->output(0));
  // Batch 0 fully masked: 0 in both (the fused op by its attribute, the standard op + guard).
  require_same_outputs(*before, g,
                       {{"qkv", rand_tensor({2, 4, 24}, 62)}, {"mask", mask_tensor({0, 0, 0, 0, 1, 1, 1, 0}, {2, 4})}});
}

TEST_CASE("emit: a model whose fused ops have no standard form is refused - untouched") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 8});
  b.output(b.op("FusedMatMul", {x, b.constant("w", rand_tensor({8, 4}, 1))}, {}, "mm", "fuseopt"));
  FusionReport r;
  CHECK_THROWS_WITH(apply_emit(b.graph(), EmitOptions{EmitMode::Standard}, &r),
                    Catch::Contains("none of the 1 fused ops") && Catch::Contains("FusedMatMul x1"));
  CHECK(b.graph().opset("") == 17);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 1);
}

TEST_CASE("emit: when the other nodes cannot be upgraded - forms needing opset 23 stay fuseopt with the upgrader's line") {
  GraphBuilder b(12);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* sm = b.op("Softmax", {x}, {}, "flat");  // axis 1 of rank 3: not upgradable past 13
  b.output(b.op("RMSNorm", {sm, b.constant("g", rand_tensor({8}, 2))}, {}, "n", "fuseopt"));
  b.output(b.op("LayerNorm", {x, b.constant("g2", rand_tensor({8}, 3))}, {}, "ln", "fuseopt"));
  FusionReport r;
  CHECK_THROWS_WITH(apply_emit(b.graph(), EmitOptions{EmitMode::Standard}, &r), Catch::Contains("Softmax 'flat'"));
}

TEST_CASE("emit: LayerNormLinear rms=1 -> Add + RMSNormalization + MatMul with Transpose and bias and Gelu-20 - Sum kept") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* skip = b.input("skip", DType::Float, {2, 3, 8});
  Node* n = b.node("LayerNormLinear",
                   {x, b.constant("g", rand_tensor({8}, 30)), nullptr, b.constant("w", rand_tensor({6, 8}, 31)),
                    b.constant("bias", rand_tensor({6}, 32)), skip},
                   2,
                   {Attribute::make_float("epsilon", 1e-6f), Attribute::make_int("rms", 1), Attribute::make_int("transB", 1),
                    Attribute::make_string("activation", "gelu")},
                   "fuseopt", "lnl");
  b.output(n->output(0));
  b.output(n->output(1));
  auto before = clone_graph(b.graph());
  emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "RMSNormalization") == 1);
  CHECK(count_op(g, "Transpose") == 1);
  CHECK(only(g, "Gelu")->attr_string("approximate", "") == "none");
  CHECK(count_domain_op(g, "fuseopt", "LayerNormLinear") == 0);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3, 8}, 33)}, {"skip", rand_tensor({2, 3, 8}, 34)}}, 1e-5f);
}

TEST_CASE("emit: GELU GEMMs -> MatMul + Gelu-20 - the other activations stay fuseopt with a reason") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* f = b.op("FusedMatMul", {x, b.constant("w", rand_tensor({6, 8}, 40)), b.constant("bias", rand_tensor({6}, 41))},
                  {Attribute::make_int("transB", 1), Attribute::make_float("alpha", 0.5f),
                   Attribute::make_string("activation", "gelu")},
                  "fmm", "fuseopt");
  Value* gm = b.op("GatedMatMul", {f, b.constant("wg", rand_tensor({6, 10}, 42))},
                   {Attribute::make_string("activation", "gelu_tanh")}, "gmm", "fuseopt");
  Value* relu = b.op("FusedMatMul", {gm, b.constant("w2", rand_tensor({5, 4}, 43))},
                     {Attribute::make_string("activation", "relu")}, "fmm_relu", "fuseopt");
  Value* silu = b.op("GatedMatMul", {x, b.constant("wg2", rand_tensor({8, 4}, 44))},
                     {Attribute::make_string("activation", "silu")}, "gmm_silu", "fuseopt");
  Value* ln = b.op("LayerNormLinear",
                   {x, b.constant("g", rand_tensor({8}, 45)), b.constant("beta", rand_tensor({8}, 46)),
                    b.constant("w3", rand_tensor({8, 3}, 47))},
                   {Attribute::make_string("activation", "gelu_tanh")}, "lnl", "fuseopt");
  b.output(relu);
  b.output(silu);
  b.output(ln);
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "Gelu") == 3);
  CHECK(count_op(g, "LayerNormalization") == 1);
  CHECK(count_domain_op(g, "fuseopt", "FusedMatMul") == 1);
  CHECK(count_domain_op(g, "fuseopt", "GatedMatMul") == 1);
  CHECK(r.emit_op("FusedMatMul")->reasons.at(0).find("'relu'") != std::string::npos);
  CHECK(r.emit_op("GatedMatMul")->reasons.at(0).find("'silu'") != std::string::npos);
  CHECK(g.opset("") == 20);  // Gelu's opset is enough here
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3, 8}, 48)}}, 1e-5f);
}

TEST_CASE("emit: GELU GEMM with a residual -> MatMul + Gelu-20 + Add (a Reshape where the residual is another shape)") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {6, 8});
  Value* r3 = b.input("r3", DType::Float, {2, 3, 6});  // Y's element count, not its shape
  Value* r2 = b.input("r2", DType::Float, {6, 6});
  Node* f = b.node("FusedMatMul", {x, b.constant("w", rand_tensor({8, 6}, 60)), b.constant("bias", rand_tensor({6}, 61)), r3},
                   1, {Attribute::make_string("activation", "gelu")}, "fuseopt", "fmm_res3");
  Node* g2 = b.node("FusedMatMul", {x, b.constant("w2", rand_tensor({8, 6}, 62)), nullptr, r2}, 1,
                    {Attribute::make_string("activation", "gelu_tanh")}, "fuseopt", "fmm_res2");
  b.output(f->outputs[0]);
  b.output(g2->outputs[0]);
  auto before = clone_graph(b.graph());
  emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_domain_op(g, "fuseopt", "FusedMatMul") == 0);
  CHECK(count_op(g, "Gelu") == 2);
  CHECK(count_op(g, "Add") == 3);      // one bias, two residuals
  CHECK(count_op(g, "Reshape") == 1);  // only the [2, 3, 6] residual
  require_same_outputs(*before, g,
                       {{"x", rand_tensor({6, 8}, 63)}, {"r3", rand_tensor({2, 3, 6}, 64)}, {"r2", rand_tensor({6, 6}, 65)}},
                       1e-5f);
}

TEST_CASE("emit: squared ReLU - LayerNormLinear rms=1 -> RMSNormalization + MatMul + Relu + Mul - FusedMatMul stays") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* ln = b.op("LayerNormLinear",
                   {x, b.constant("g", rand_tensor({8}, 50)), nullptr, b.constant("w", rand_tensor({8, 6}, 51)),
                    b.constant("bias", rand_tensor({6}, 52))},
                   {Attribute::make_float("epsilon", 1e-6f), Attribute::make_int("rms", 1),
                    Attribute::make_string("activation", "relu2")},
                   "lnl", "fuseopt");
  Value* f = b.op("FusedMatMul", {ln, b.constant("w2", rand_tensor({6, 4}, 53))},
                  {Attribute::make_string("activation", "relu2")}, "fmm", "fuseopt");
  b.output(f);
  auto before = clone_graph(b.graph());
  FusionReport r = emit(b.graph());
  Graph& g = b.graph();
  CHECK(count_op(g, "RMSNormalization") == 1);
  // ONNX has no squared-ReLU op: the function body's Relu + Mul(r, r), the same Relu read twice.
  Node* mul = only(g, "Mul");
  CHECK(mul->input(0) == mul->input(1));
  CHECK(mul->input(0) == only(g, "Relu")->output(0));
  CHECK(count_domain_op(g, "fuseopt", "LayerNormLinear") == 0);
  CHECK(count_domain_op(g, "fuseopt", "FusedMatMul") == 1);  // its body is the standard sequence already
  CHECK(r.emit_op("FusedMatMul")->reasons.at(0).find("'relu2'") != std::string::npos);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3, 8}, 54)}}, 1e-5f);
}

TEST_CASE("emit: a model already in standard form is not refused for the fused ops it keeps") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* y = b.op("RMSNorm", {x, b.constant("g", rand_tensor({8}, 50))}, {}, "n", "fuseopt");
  b.output(b.op("FusedMatMul", {y, b.constant("w", rand_tensor({8, 4}, 51))}, {}, "mm", "fuseopt"));
  emit(b.graph());
  CHECK(count_op(b.graph(), "RMSNormalization") == 1);
  FusionReport again = emit(b.graph());  // only the FusedMatMul is left: nothing to do, no error
  CHECK(again.emit_op("FusedMatMul")->fuseopt == 1);
  CHECK(b.graph().opset("") == 23);
}

TEST_CASE("emit: an attn_bias built from a -inf constant needs the NaN guard on Y") {
  GraphBuilder b(17);
  Value* qkv = b.input("qkv", DType::Float, {2, 4, 24});
  Value* keep = b.input("keep", DType::Bool, {2, 1, 4, 4});
  Value* bias = b.op("Where", {keep, b.scalar("zero", 0.0f), b.scalar("ninf", -std::numeric_limits<float>::infinity())});
  Value* y = b.op("Attention", {qkv, nullptr, nullptr, nullptr, bias}, {Attribute::make_int("num_heads", 2)}, "a",
                  "fuseopt");
  b.output(b.op("RMSNorm", {y, b.constant("g", rand_tensor({8}, 60))}, {}, "n", "fuseopt"));
  FusionReport r = emit(b.graph());
  CHECK(count_domain_op(b.graph(), "fuseopt", "Attention") == 1);
  CHECK(r.emit_op("Attention")->reasons.at(0).find("-inf constant") != std::string::npos);
}
