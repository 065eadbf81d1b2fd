// FusedMatMul with CLIP's QuickGELU (activation "quick_gelu": y * sigmoid(1.702 y), Stable
// Diffusion's text encoder too) and a plain SiLU (activation "silu": y * sigmoid(y)) after
// MatMul (+ bias) / Gemm, both Mul operand orders; LayerNormLinear taking the QuickGELU GEMM
// after a norm (CLIP's pre-norm MLP). Negative: another constant than float32 1.702 (the
// Sigmoid alone is not an activation the op has), a Sigmoid of another value, rule 1 on the
// Sigmoid output.
#include "fused_matmul_graphs.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace fuseopt::test::fused_matmul;
using Catch::Matchers::Contains;

namespace {

// y * sigmoid(c * y) (c = 0: y * sigmoid(y)); `swap` writes each Mul's operands the other way
// round. `sig` returns the Sigmoid output (for rule 1 tests).
Value* sigmoid_gate(GraphBuilder& b, Value* y, float c, bool swap, Value** sig = nullptr) {
  Value* arg = y;
  if (c != 0.0f) {
    Value* k = b.scalar("quick_gelu_k", c);
    arg = swap ? b.op("Mul", {k, y}, {}, "act_scale") : b.op("Mul", {y, k}, {}, "act_scale");
  }
  Value* s = b.op("Sigmoid", {arg}, {}, "act_sigmoid");
  if (sig) *sig = s;
  return swap ? b.op("Mul", {s, y}, {}, "act_mul") : b.op("Mul", {y, s}, {}, "act_mul");
}

std::string act_of(const Graph& g) {
  const Node* f = only_fused(g);
  return f ? f->attr_string("activation", "") : "(no FusedMatMul)";
}

}  // namespace

TEST_CASE("FusedMatMul: QuickGELU y * sigmoid(1.702 y) and SiLU y * sigmoid(y), with and without bias",
          "[passes][FusedMatMul][quick_gelu]") {
  for (float c : {1.702f, 0.0f})
    for (bool swap : {false, true})
      for (bool bias : {true, false}) {
        INFO("c " << c << " swapped " << swap << " bias " << bias);
        GraphBuilder b(17);
        b.output(sigmoid_gate(b, linear(b, b.input("a", DType::Float, {2, M, K}), bias), c, swap));
        auto before = clone_graph(b.graph());
        FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
        CHECK(matched(r, "FusedMatMul") == 1);
        CHECK(b.graph().num_nodes() == 1);
        CHECK(act_of(b.graph()) == (c != 0.0f ? "quick_gelu" : "silu"));
        require_same_outputs(*before, b.graph(), feeds());
      }
}

TEST_CASE("FusedMatMul: QuickGELU after Gemm(transB)", "[passes][FusedMatMul][quick_gelu]") {
  GraphBuilder b(17);
  Value* y = b.op("Gemm", {b.input("a", DType::Float, {M, K}), b.constant("Wt", rand_tensor({N, K}, 4)),
                           b.constant("C", rand_tensor({N}, 5))},
                  {Attribute::make_int("transB", 1)}, "gemm");
  b.output(sigmoid_gate(b, y, 1.702f, false));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(count_op(b.graph(), "Sigmoid") == 0);
  CHECK(act_of(b.graph()) == "quick_gelu");
  require_same_outputs(*before, b.graph(), feeds({M, K}));
}

TEST_CASE("LayerNormLinear takes a QuickGELU GEMM after a norm (CLIP's MLP)", "[passes][LayerNormLinear][quick_gelu]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* n = b.op("LayerNormalization",
                  {x, b.constant("gamma", rand_tensor({K}, 6, 0.5f, 1.5f)), b.constant("beta", rand_tensor({K}, 7))},
                  {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, "ln");
  b.output(sigmoid_gate(b, linear(b, n), 1.702f, true));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"FusedMatMul", "LayerNormLinear"});
  CHECK(matched(r, "LayerNormLinear") == 1);
  REQUIRE(b.graph().num_nodes() == 1);
  const Node* f = b.graph().nodes().front().get();
  CHECK(f->op_type == "LayerNormLinear");
  CHECK(f->attr_string("activation", "") == "quick_gelu");
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
}

TEST_CASE("FusedMatMul: y * sigmoid(1.5 y) is not QuickGELU (only the bias folds)",
          "[passes][FusedMatMul][quick_gelu][legality]") {
  for (float c : {1.5f, 1.7021f}) {  // another constant; one float32 step from 1.702 is not 1.702 either
    INFO("c " << c);
    GraphBuilder b(17);
    b.output(sigmoid_gate(b, linear(b, b.input("a", DType::Float, {2, M, K})), c, false));
    auto before = clone_graph(b.graph());
    run_one_pass(b.graph(), "FusedMatMul");
    CHECK(count_op(b.graph(), "Sigmoid") == 1);
    CHECK(act_of(b.graph()) == "none");
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("FusedMatMul: y * sigmoid(z) of another value z is not SiLU", "[passes][FusedMatMul][quick_gelu][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Value* y = linear(b, a);
  Value* other = b.input("z", DType::Float, {2, M, N});
  b.output(b.op("Mul", {y, b.op("Sigmoid", {other}, {}, "act_sigmoid")}, {}, "act_mul"));
  run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Sigmoid") == 1);
  CHECK(act_of(b.graph()) == "none");
}

TEST_CASE("FusedMatMul rule 1: the Sigmoid of a QuickGELU is read elsewhere", "[passes][FusedMatMul][quick_gelu][legality]") {
  GraphBuilder b(17);
  Value* sig = nullptr;
  b.output(sigmoid_gate(b, linear(b, b.input("a", DType::Float, {2, M, K})), 1.702f, false, &sig));
  b.output(sig);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Sigmoid") == 1);
  CHECK(act_of(b.graph()) == "none");
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 1"));
  require_same_outputs(*before, b.graph(), feeds());
}
