// FusedMatMulLayerNorm, form 1: a GELU GEMM read only by a last-axis LayerNorm
// (the masked-LM prediction-head transform). Positive: erf and tanh GELU,
// LayerNormalization and fuseopt.LayerNorm, with and without beta, the opset-20
// Gelu op, a 2-D Gemm view behind a Reshape (transB, alpha), --approximate-gelu,
// and a whole BERT MLM head from primitives through every pass (the norm goes to
// this fusion, not to LayerNormLinear with the tied decoder). Negative: rules
// 1-6 with their reasons, and a GELU-free GEMM that is not a candidate at all.
// Form 2: a GELU-free GEMM into a SkipLayerNorm (post-LN residual). Positive: the
// GEMM into either summand, with and without beta and GEMM bias, symbolic shapes,
// a post-LN block from primitives through every pass. Negative: rules 1-3 and 2
// with their reasons, and a GELU GEMM or a Reshape before the SkipLayerNorm, which
// are not candidates.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t K = 6, N = 8;
const char* kPass = "FusedMatMulLayerNorm";

Node* fmm(GraphBuilder& b, Value* a, Value* w, Value* bias, const std::string& act, bool trans_b = false,
          float alpha = 1.0f) {
  std::vector<Value*> in = {a, w};
  if (bias) in.push_back(bias);
  return b.node("FusedMatMul", in, 1,
                {Attribute::make_int("transB", trans_b ? 1 : 0), Attribute::make_float("alpha", alpha),
                 Attribute::make_string("activation", act)},
                "fuseopt", "dense");
}

Value* weight(GraphBuilder& b) { return b.constant("W", rand_tensor({K, N}, 1)); }
Value* bias(GraphBuilder& b) { return b.constant("bias", rand_tensor({N}, 2)); }
Value* gamma(GraphBuilder& b) { return b.constant("gamma", rand_tensor({N}, 3, 0.5f, 1.5f)); }
Value* beta(GraphBuilder& b) { return b.constant("beta", rand_tensor({N}, 4)); }

Node* layer_norm(GraphBuilder& b, Value* x, Value* g, Value* bt, int64_t axis = -1, int outputs = 1) {
  std::vector<Value*> in = {x, g};
  if (bt) in.push_back(bt);
  return b.node("LayerNormalization", in, outputs,
                {Attribute::make_int("axis", axis), Attribute::make_float("epsilon", 1e-5f)}, "", "ln");
}

std::map<std::string, Tensor> feeds(std::vector<int64_t> dims = {2, 3, K}) {
  return {{"a", rand_tensor(std::move(dims), 7, -2.0f, 2.0f)}};
}

const Node* fused(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->domain == "fuseopt" && n->op_type == "FusedMatMulLayerNorm") return n.get();
  return nullptr;
}

// dense -> GELU (FusedMatMul) -> LayerNormalization, the one-pass positive case.
void check_fuses(GraphBuilder& b, const std::string& act, const std::map<std::string, Tensor>& in,
                 PassOptions po = {}) {
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), kPass, po);
  INFO(reasons(r, kPass));
  REQUIRE(matched(r, kPass) == 1);
  const Node* f = fused(b.graph());
  REQUIRE(f);
  CHECK(f->attr_string("activation", "") == act);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 0);
  CHECK(count_op(b.graph(), "LayerNormalization") + count_domain_op(b.graph(), "fuseopt", "LayerNorm") == 0);
  // The CPU kernel repeats the unfused kernels' arithmetic step for step.
  require_same_outputs(*before, b.graph(), in, po.approximate_gelu ? 1e-2f : 1e-6f);
  CHECK(matched(run_one_pass(b.graph(), kPass), kPass) == 0);  // idempotent
}

// unchecked: the graph is invalid ONNX on purpose (run_one_pass_unchecked).
void check_rejected(GraphBuilder& b, const std::string& rule, const std::string& names, bool unchecked = false) {
  FusionReport r = unchecked ? run_one_pass_unchecked(b.graph(), kPass) : run_one_pass(b.graph(), kPass);
  CHECK(matched(r, kPass) == 0);
  CHECK(fused(b.graph()) == nullptr);
  CHECK_THAT(reasons(r, kPass), Contains(rule) && Contains(names));
}

}  // namespace

TEST_CASE("FusedMatMulLayerNorm: erf-GELU FusedMatMul read by LayerNormalization", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), bias(b), "gelu")->outputs[0];
  b.output(layer_norm(b, h, gamma(b), beta(b))->outputs[0]);
  check_fuses(b, "gelu", feeds());
  const Node* f = fused(b.graph());
  CHECK(f->inputs.size() == 5);
  CHECK(f->attr_float("epsilon", 0) == 1e-5f);
  CHECK(b.graph().num_nodes() == 1);
}

TEST_CASE("FusedMatMulLayerNorm: tanh GELU, fuseopt.LayerNorm without beta (opset 14)",
          "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(14);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), bias(b), "gelu_tanh")->outputs[0];
  b.output(b.op("LayerNorm", {h, gamma(b)}, {Attribute::make_float("epsilon", 1e-12f)}, "ln", "fuseopt"));
  check_fuses(b, "gelu_tanh", feeds());
  const Node* f = fused(b.graph());
  CHECK(f->inputs.size() == 4);  // no beta
  CHECK(f->attr_float("epsilon", 0) == 1e-12f);
}

// (LayerNormalization itself wants a [N] scale for axis -1; fuseopt.LayerNorm takes [1, ..., 1, N].)
TEST_CASE("FusedMatMulLayerNorm: no GEMM bias, [1, 1, N] gamma and beta of fuseopt.LayerNorm",
          "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(14);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), nullptr, "gelu")->outputs[0];
  b.output(b.op("LayerNorm",
                {h, b.constant("g3", rand_tensor({1, 1, N}, 3, 0.5f, 1.5f)), b.constant("b3", rand_tensor({1, 1, N}, 4))},
                {Attribute::make_float("epsilon", 1e-5f)}, "ln", "fuseopt"));
  check_fuses(b, "gelu", feeds());
  const Node* f = fused(b.graph());
  CHECK(f->input(2) == nullptr);
  CHECK(f->input(3)->const_data->dims == std::vector<int64_t>{N});
}

TEST_CASE("FusedMatMulLayerNorm: the opset-20 Gelu op after a GELU-free FusedMatMul", "[passes][FusedMatMulLayerNorm]") {
  for (const char* approx : {"none", "tanh"}) {
    GraphBuilder b(20);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* h = fmm(b, a, weight(b), bias(b), "none")->outputs[0];
    Value* g = b.op("Gelu", {h}, {Attribute::make_string("approximate", approx)}, "gelu");
    b.output(layer_norm(b, g, gamma(b), beta(b))->outputs[0]);
    INFO("approximate=" << approx);
    check_fuses(b, std::string(approx) == "tanh" ? "gelu_tanh" : "gelu", feeds());
    CHECK(count_op(b.graph(), "Gelu") == 0);
  }
}

TEST_CASE("FusedMatMulLayerNorm: a 2-D Gemm view behind a Reshape keeping N, transB and alpha",
          "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a2 = b.input("a", DType::Float, {6, K});
  Value* h = fmm(b, a2, b.constant("Wt", rand_tensor({N, K}, 1)), bias(b), "gelu", true, 0.5f)->outputs[0];
  Value* h3 = b.op("Reshape", {h, b.constant("s3", Tensor::from_ints({2, 3, N}, {3}))}, {}, "view");
  b.output(layer_norm(b, h3, gamma(b), beta(b))->outputs[0]);
  check_fuses(b, "gelu", feeds({6, K}));
  const Node* f = fused(b.graph());
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(f->attr_float("alpha", 1) == 0.5f);
  CHECK(count_op(b.graph(), "Reshape") == 1);  // after the fused op
  CHECK(b.graph().outputs[0]->shape->size() == 3);
}

TEST_CASE("FusedMatMulLayerNorm: a Reshape between the 2-D Gemm view and a Gelu op", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(20);
  Value* a2 = b.input("a", DType::Float, {6, K});
  Value* h = fmm(b, a2, weight(b), bias(b), "none")->outputs[0];
  Value* h3 = b.op("Reshape", {h, b.constant("s3", Tensor::from_ints({2, 3, N}, {3}))}, {}, "view");
  Value* g = b.op("Gelu", {h3}, {Attribute::make_string("approximate", "tanh")}, "gelu");
  b.output(layer_norm(b, g, gamma(b), nullptr)->outputs[0]);
  check_fuses(b, "gelu_tanh", feeds({6, K}));
  CHECK(count_op(b.graph(), "Reshape") == 1);
  CHECK(b.graph().outputs[0]->shape->size() == 3);
}

TEST_CASE("FusedMatMulLayerNorm: --approximate-gelu turns an erf GELU into the tanh form",
          "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(20);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* g = b.op("Gelu", {fmm(b, a, weight(b), bias(b), "none")->outputs[0]}, {}, "gelu");
  b.output(layer_norm(b, g, gamma(b), beta(b))->outputs[0]);
  PassOptions po;
  po.approximate_gelu = true;
  check_fuses(b, "gelu_tanh", feeds(), po);
}

// BERT's masked-LM head from primitives at opset 14: dense + bias, the exporter's
// erf GELU, LayerNorm in primitives, then the decoder reading the word-embedding
// table through a Transpose (tied weights) + its bias; the embedding Gather reads
// the same table.
TEST_CASE("FusedMatMulLayerNorm: a BERT MLM head from primitives through every pass (LayerNormLinear does not take the norm)",
          "[passes][FusedMatMulLayerNorm]") {
  constexpr int64_t V = 11;
  GraphBuilder b(14);
  Value* ids = b.input("ids", DType::Int64, {2, 3});
  Value* table = b.constant("word_embeddings", rand_tensor({V, N}, 5));
  Value* hidden = b.op("Gather", {table, ids}, {Attribute::make_int("axis", 0)}, "embed");
  Value* d = b.op("Add", {b.op("MatMul", {hidden, b.constant("Wd", rand_tensor({N, N}, 6))}, {}, "dense"),
                          b.constant("bd", rand_tensor({N}, 7))});
  Value* e = b.op("Erf", {b.op("Div", {d, b.scalar("sqrt2", 1.4142135f)})});
  Value* g = b.op("Mul", {b.op("Mul", {d, b.op("Add", {e, b.scalar("one", 1.0f)})}), b.scalar("half", 0.5f)});
  auto mean = [&](Value* x) { return b.op("ReduceMean", {x}, {Attribute::make_ints("axes", {-1})}); };
  Value* c = b.op("Sub", {g, mean(g)});
  Value* var = mean(b.op("Pow", {c, b.scalar("two", 2.0f)}));
  Value* sd = b.op("Sqrt", {b.op("Add", {var, b.scalar("eps", 1e-12f)})});
  Value* ln = b.op("Add", {b.op("Mul", {b.op("Div", {c, sd}), gamma(b)}), beta(b)});
  Value* wt = b.op("Transpose", {table}, {Attribute::make_ints("perm", {1, 0})}, "tied");
  b.output(b.op("Add", {b.op("MatMul", {ln, wt}, {}, "decoder"), b.constant("decoder_bias", rand_tensor({V}, 8))}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"cleanup", "fusion"});
  INFO(reasons(r, kPass));
  CHECK(matched(r, kPass) == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMulLayerNorm") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "LayerNormLinear") == 0);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 1);  // the decoder, transB on the shared table
  CHECK(count_op(b.graph(), "Erf") + count_op(b.graph(), "ReduceMean") + count_op(b.graph(), "MatMul") == 0);
  Tensor t(DType::Int64, {2, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = (i * 7) % V;
  require_same_outputs(*before, b.graph(), {{"ids", t}}, 1e-5f);
}

// ---- not candidates / rejected -------------------------------------------------------------------

TEST_CASE("FusedMatMulLayerNorm: a GELU-free GEMM before a norm is not a candidate", "[passes][FusedMatMulLayerNorm]") {
  for (const char* act : {"none", "relu"}) {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), act)->outputs[0], gamma(b), beta(b))->outputs[0]);
    FusionReport r = run_one_pass(b.graph(), kPass);
    CHECK(matched(r, kPass) == 0);
    CHECK(reasons(r, kPass).empty());  // no rejection: the pattern never matched
    CHECK(fused(b.graph()) == nullptr);
  }
}

TEST_CASE("FusedMatMulLayerNorm rule 1: the GELU output has a second reader", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), bias(b), "gelu")->outputs[0];
  b.output(layer_norm(b, h, gamma(b), beta(b))->outputs[0]);
  b.output(b.op("Relu", {h}, {}, "second_reader"));
  check_rejected(b, "rule 1", "second_reader");
}

TEST_CASE("FusedMatMulLayerNorm rule 1: the GELU output is a graph output", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), bias(b), "gelu")->outputs[0];
  b.output(layer_norm(b, h, gamma(b), beta(b))->outputs[0]);
  b.output(h);
  check_rejected(b, "rule 1", "dense");
}

TEST_CASE("FusedMatMulLayerNorm rule 1: LayerNormalization's Mean output is read", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Node* ln = layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], gamma(b), beta(b), -1, 2);
  b.output(ln->outputs[0]);
  b.output(ln->outputs[1]);
  check_rejected(b, "rule 1", "Mean/InvStdDev");
}

TEST_CASE("FusedMatMulLayerNorm rule 6: LayerNormalization over a non-last axis", "[passes][FusedMatMulLayerNorm]") {
  for (int64_t axis : {1, 0}) {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* h = fmm(b, a, weight(b), bias(b), "gelu")->outputs[0];
    b.output(layer_norm(b, h, b.constant("g2", rand_tensor({3, N}, 3)), nullptr, axis)->outputs[0]);
    INFO("axis " << axis);
    check_rejected(b, "rule 6", "from axis " + std::to_string(axis));
  }
}

TEST_CASE("FusedMatMulLayerNorm rule 2: gamma not a constant, beta of the wrong shape", "[passes][FusedMatMulLayerNorm]") {
  SECTION("gamma a graph input") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* g = b.input("gamma_in", DType::Float, {N});
    b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], g, beta(b))->outputs[0]);
    check_rejected(b, "rule 2", "gamma_in");
  }
  SECTION("beta not a constant") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* bt = b.input("beta_in", DType::Float, {N});
    b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], gamma(b), bt)->outputs[0]);
    check_rejected(b, "rule 2", "beta_in");
  }
  SECTION("beta [2, 1, N] (broadcast along another axis)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* bt = b.constant("beta_2n", rand_tensor({2, 1, N}, 4));
    b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], gamma(b), bt)->outputs[0]);
    check_rejected(b, "rule 3", "beta_2n");
  }
  SECTION("gamma [1, 1, 1, N] of a higher rank than the normalised input") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* g = b.constant("gamma_4d", rand_tensor({1, 1, 1, N}, 3));
    b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], g, beta(b))->outputs[0]);
    check_rejected(b, "rule 2", "gamma_4d");
  }
}

TEST_CASE("FusedMatMulLayerNorm rule 2/4: weight not a constant, or batched", "[passes][FusedMatMulLayerNorm]") {
  SECTION("not a constant") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* w = b.input("w_dyn", DType::Float, {K, N});
    b.output(layer_norm(b, fmm(b, a, w, bias(b), "gelu")->outputs[0], gamma(b), beta(b))->outputs[0]);
    check_rejected(b, "rule 2", "w_dyn");
  }
  SECTION("[2, K, N]") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* w = b.constant("w_batched", rand_tensor({2, K, N}, 1));
    b.output(layer_norm(b, fmm(b, a, w, bias(b), "gelu")->outputs[0], gamma(b), beta(b))->outputs[0]);
    check_rejected(b, "rule 4", "w_batched");
  }
}

TEST_CASE("FusedMatMulLayerNorm rule 3: a GEMM bias broadcast over a second axis", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* bias3 = b.constant("bias_3n", rand_tensor({3, N}, 2));
  b.output(layer_norm(b, fmm(b, a, weight(b), bias3, "gelu")->outputs[0], gamma(b), beta(b))->outputs[0]);
  check_rejected(b, "rule 3", "bias_3n");
}

TEST_CASE("FusedMatMulLayerNorm rule 4: a Reshape that changes the last dim", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* h = fmm(b, a, weight(b), bias(b), "gelu")->outputs[0];
  Value* v = b.op("Reshape", {h, b.constant("s", Tensor::from_ints({2, 3 * N / 4, 4}, {3}))}, {}, "regroup");
  b.output(layer_norm(b, v, b.constant("g4", rand_tensor({4}, 3)), nullptr)->outputs[0]);
  check_rejected(b, "rule 4", "regroup");
}

TEST_CASE("FusedMatMulLayerNorm rule 5: dtypes differ", "[passes][FusedMatMulLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* g16 = b.constant("gamma16", Tensor(DType::Float16, {N}));
  b.output(layer_norm(b, fmm(b, a, weight(b), bias(b), "gelu")->outputs[0], g16, nullptr)->outputs[0]);
  // Invalid ONNX (LayerNormalization's X and Scale are both T): only --no-validate input reaches the pass.
  check_rejected(b, "rule 5", "gamma16", /*unchecked=*/true);
}

// ---- form 2: a GELU-free GEMM into a SkipLayerNorm ------------------------------------------------

namespace {

// fuseopt.SkipLayerNorm(x, skip, gamma, beta?, bias?){epsilon 1e-12, rms}; omitted inputs keep their slots.
Node* skip_norm(GraphBuilder& b, Value* x, Value* skip, Value* bt, Value* sln_bias = nullptr, int64_t rms = 0,
                int outputs = 1) {
  std::vector<Value*> in = {x, skip, gamma(b), bt, sln_bias};
  while (!in.back()) in.pop_back();
  return b.node("SkipLayerNorm", in, outputs,
                {Attribute::make_float("epsilon", 1e-12f), Attribute::make_int("rms", rms)}, "fuseopt", "sln");
}

std::map<std::string, Tensor> skip_feeds() {
  return {{"a", rand_tensor({2, 3, K}, 7, -2.0f, 2.0f)}, {"res", rand_tensor({2, 3, N}, 8, -2.0f, 2.0f)}};
}

}  // namespace

TEST_CASE("FusedMatMulLayerNorm: a GELU-free GEMM into either summand of a SkipLayerNorm",
          "[passes][FusedMatMulLayerNorm][skip]") {
  for (bool gemm_first : {true, false})
    for (bool with_beta : {true, false})
      for (bool with_bias : {true, false}) {
        GraphBuilder b(17);
        Value* a = b.input("a", DType::Float, {2, 3, K});
        Value* res = b.input("res", DType::Float, {2, 3, N});
        Value* h = fmm(b, a, weight(b), with_bias ? bias(b) : nullptr, "none")->outputs[0];
        Value* bt = with_beta ? beta(b) : nullptr;
        b.output(skip_norm(b, gemm_first ? h : res, gemm_first ? res : h, bt)->outputs[0]);
        INFO("GEMM into " << (gemm_first ? "X" : "skip") << ", beta " << with_beta << ", bias " << with_bias);
        auto before = clone_graph(b.graph());
        FusionReport r = run_one_pass(b.graph(), kPass);
        INFO(reasons(r, kPass));
        REQUIRE(matched(r, kPass) == 1);
        REQUIRE(b.graph().num_nodes() == 1);
        const Node* f = fused(b.graph());
        REQUIRE(f);
        CHECK(f->attr_string("activation", "") == "none");
        CHECK(f->attr_float("epsilon", 0) == 1e-12f);
        REQUIRE(f->inputs.size() == 6);
        CHECK((f->input(2) != nullptr) == with_bias);
        CHECK((f->input(4) != nullptr) == with_beta);
        CHECK(f->input(5) == res);
        // h + skip is the SkipLayerNorm's fp32 sum in either order: the CPU results are the same bits.
        require_same_outputs(*before, b.graph(), skip_feeds(), 0.0f);
        CHECK(matched(run_one_pass(b.graph(), kPass), kPass) == 0);  // idempotent
      }
}

TEST_CASE("FusedMatMulLayerNorm: skip form with symbolic batch and sequence dims", "[passes][FusedMatMulLayerNorm][skip]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
  Value* res = b.input("res", DType::Float, {-1, -1, N}, {"batch", "seq"});
  b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, beta(b))->outputs[0]);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), kPass);
  INFO(reasons(r, kPass));
  REQUIRE(matched(r, kPass) == 1);
  require_same_outputs(*before, b.graph(), skip_feeds(), 0.0f);
}

// A post-LN encoder block's tail from primitives at opset 17: dense + bias, the residual
// Add, LayerNormalization. SkipLayerNorm (200) takes the Add and the norm, FusedMatMul
// (300) the bias, this pass (350) both.
TEST_CASE("FusedMatMulLayerNorm: a post-LN residual block from primitives through every pass",
          "[passes][FusedMatMulLayerNorm][skip]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, K});
  Value* res = b.input("res", DType::Float, {2, 3, N});
  Value* d = b.op("Add", {b.op("MatMul", {a, weight(b)}, {}, "dense"), bias(b)});
  b.output(layer_norm(b, b.op("Add", {d, res}, {}, "residual"), gamma(b), beta(b))->outputs[0]);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"cleanup", "fusion"});
  INFO(reasons(r, kPass));
  CHECK(matched(r, kPass) == 1);
  CHECK(b.graph().num_nodes() == 1);
  const Node* f = fused(b.graph());
  REQUIRE(f);
  CHECK(f->input(5) == res);
  require_same_outputs(*before, b.graph(), skip_feeds(), 1e-6f);
}

TEST_CASE("FusedMatMulLayerNorm: GEMMs before a SkipLayerNorm that are not candidates",
          "[passes][FusedMatMulLayerNorm][skip]") {
  SECTION("a GELU GEMM") {
    for (const char* act : {"gelu", "relu"}) {
      GraphBuilder b(17);
      Value* a = b.input("a", DType::Float, {2, 3, K});
      Value* res = b.input("res", DType::Float, {2, 3, N});
      b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), act)->outputs[0], res, beta(b))->outputs[0]);
      INFO(act);
      FusionReport r = run_one_pass(b.graph(), kPass);
      CHECK(matched(r, kPass) == 0);
      CHECK(reasons(r, kPass).empty());
      CHECK(fused(b.graph()) == nullptr);
    }
  }
  SECTION("a 2-D Gemm view behind a Reshape (left unfused)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {6, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Value* h = b.op("Reshape", {fmm(b, a, weight(b), bias(b), "none")->outputs[0],
                                b.constant("s3", Tensor::from_ints({2, 3, N}, {3}))},
                    {}, "view");
    b.output(skip_norm(b, h, res, beta(b))->outputs[0]);
    FusionReport r = run_one_pass(b.graph(), kPass);
    CHECK(matched(r, kPass) == 0);
    CHECK(fused(b.graph()) == nullptr);
  }
}

TEST_CASE("FusedMatMulLayerNorm skip rule 1: the GEMM output has a second reader, or the Sum is read",
          "[passes][FusedMatMulLayerNorm][skip]") {
  SECTION("GEMM output read elsewhere") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Value* h = fmm(b, a, weight(b), bias(b), "none")->outputs[0];
    b.output(skip_norm(b, h, res, beta(b))->outputs[0]);
    b.output(b.op("Relu", {h}, {}, "second_reader"));
    check_rejected(b, "rule 1", "second_reader");
  }
  SECTION("Sum read by another node") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Node* s = skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, beta(b), nullptr, 0, 2);
    b.output(s->outputs[0]);
    b.output(b.op("Relu", {s->outputs[1]}, {}, "sum_reader"));
    check_rejected(b, "rule 1", "(Sum) is read");
  }
  SECTION("Sum a graph output") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Node* s = skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, beta(b), nullptr, 0, 2);
    b.output(s->outputs[0]);
    b.output(s->outputs[1]);
    check_rejected(b, "rule 1", "(Sum) is read");
  }
}

TEST_CASE("FusedMatMulLayerNorm skip rule 3: SkipLayerNorm bias, rms, a broadcast residual",
          "[passes][FusedMatMulLayerNorm][skip]") {
  SECTION("the SkipLayerNorm's own bias") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Value* sb = b.constant("sln_bias", rand_tensor({N}, 9));
    b.output(skip_norm(b, fmm(b, a, weight(b), nullptr, "none")->outputs[0], res, beta(b), sb)->outputs[0]);
    check_rejected(b, "rule 3", "sln_bias");
  }
  SECTION("rms = 1") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, nullptr, nullptr, 1)->outputs[0]);
    check_rejected(b, "rule 3", "rms = 1");
  }
  SECTION("a [1, S, N] residual against a [B, S, N] GEMM output") {
    for (bool gemm_first : {true, false}) {
      GraphBuilder b(17);
      Value* a = b.input("a", DType::Float, {2, 3, K});
      Value* pos = b.input("pos", DType::Float, {1, 3, N});
      Value* h = fmm(b, a, weight(b), bias(b), "none")->outputs[0];
      b.output(skip_norm(b, gemm_first ? h : pos, gemm_first ? pos : h, beta(b))->outputs[0]);
      INFO("GEMM into " << (gemm_first ? "X" : "skip"));
      check_rejected(b, "rule 3", "residual 'pos' [1,3,8]");
    }
  }
  SECTION("a [B, S, N] residual against a [S, N] GEMM output (Y broadcast to more dims)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {3, K});
    Value* res = b.input("res3", DType::Float, {2, 3, N});
    b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, beta(b))->outputs[0]);
    check_rejected(b, "rule 3", "res3");
  }
  SECTION("symbolic dims that are not provably equal") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
    Value* res = b.input("res_other", DType::Float, {-1, -1, N}, {"batch", "past_seq"});
    b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, beta(b))->outputs[0]);
    check_rejected(b, "rule 3", "res_other");
  }
}

TEST_CASE("FusedMatMulLayerNorm skip rule 2: weight not a constant, gamma of the wrong length",
          "[passes][FusedMatMulLayerNorm][skip]") {
  SECTION("weight a graph input") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Value* w = b.input("w_dyn", DType::Float, {K, N});
    b.output(skip_norm(b, fmm(b, a, w, bias(b), "none")->outputs[0], res, beta(b))->outputs[0]);
    check_rejected(b, "rule 2", "w_dyn");
  }
  SECTION("beta a graph input") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, 3, K});
    Value* res = b.input("res", DType::Float, {2, 3, N});
    Value* bt = b.input("beta_in", DType::Float, {N});
    b.output(skip_norm(b, fmm(b, a, weight(b), bias(b), "none")->outputs[0], res, bt)->outputs[0]);
    check_rejected(b, "rule 2", "beta_in");
  }
}
