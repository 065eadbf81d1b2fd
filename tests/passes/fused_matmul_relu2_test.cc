// FusedMatMul with squared ReLU (activation "relu2", Nemotron's and Persimmon's MLP):
// Pow(Relu(y), 2) and Mul(r, r) after MatMul (+ bias) / Gemm / GPT-2's Reshape, the
// exponent as an initializer, a Constant node, an int64 or a [1] tensor; LayerNormLinear
// taking the relu2 GEMM after a norm. Negative: another exponent, a non-constant or
// broadcasting exponent, rule 1 on the Relu output and on the pre-activation value, an
// integer GEMM (rule 5).
#include "fused_matmul_graphs.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace fuseopt::test::fused_matmul;
using Catch::Matchers::Contains;

namespace {

enum class Form { Pow, Mul };

// r = Relu(y); Pow(r, exponent) or Mul(r, r). `relu` returns the Relu output (for rule 1 tests).
Value* relu2(GraphBuilder& b, Value* y, Form form, Value* exponent = nullptr, Value** relu = nullptr) {
  Value* r = b.op("Relu", {y}, {}, "act_relu");
  if (relu) *relu = r;
  if (form == Form::Mul) return b.op("Mul", {r, r}, {}, "act_square");
  return b.op("Pow", {r, exponent ? exponent : b.scalar("two", 2.0f)}, {}, "act_pow");
}


std::string act_of(const Graph& g) {
  const Node* f = only_fused(g);
  return f ? f->attr_string("activation", "") : "(no FusedMatMul)";
}

}  // namespace

TEST_CASE("FusedMatMul: squared ReLU as Pow(Relu, 2) or Mul(r, r), with and without bias",
          "[passes][FusedMatMul][relu2]") {
  for (Form form : {Form::Pow, Form::Mul})
    for (bool bias : {true, false}) {
      INFO("Mul form " << (form == Form::Mul) << " bias " << bias);
      GraphBuilder b(17);
      b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K}), bias), form));
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
      CHECK(matched(r, "FusedMatMul") == 1);
      CHECK(b.graph().num_nodes() == 1);
      CHECK(act_of(b.graph()) == "relu2");
      CHECK((only_fused(b.graph())->input(2) != nullptr) == bias);
      require_same_outputs(*before, b.graph(), feeds());
    }
}

TEST_CASE("FusedMatMul: squared ReLU after Gemm(transB) and behind GPT-2's Reshape", "[passes][FusedMatMul][relu2]") {
  for (bool reshape : {false, true}) {
    INFO("reshape " << reshape);
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, reshape ? std::vector<int64_t>{2, M, K} : std::vector<int64_t>{M, K});
    Value* x = reshape ? b.op("Reshape", {a, b.constant("flat", Tensor::from_ints({-1, K}, {2}))}) : a;
    Value* y = b.op("Gemm", {x, b.constant("Wt", rand_tensor({N, K}, 4)), b.constant("C", rand_tensor({N}, 5))},
                    {Attribute::make_int("transB", 1)}, "gemm");
    if (reshape) y = b.op("Reshape", {y, b.constant("back", Tensor::from_ints({2, M, N}, {3}))}, {}, "unflat");
    b.output(relu2(b, y, Form::Pow));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(count_op(b.graph(), "Relu") == 0);
    CHECK(count_op(b.graph(), "Pow") == 0);
    CHECK(act_of(b.graph()) == "relu2");
    CHECK(only_fused(b.graph())->attr_int("transB", 0) == 1);
    require_same_outputs(*before, b.graph(), feeds(reshape ? std::vector<int64_t>{2, M, K} : std::vector<int64_t>{M, K}));
  }
}

TEST_CASE("FusedMatMul: the squared ReLU's exponent as a Constant node, int64, [1]", "[passes][FusedMatMul][relu2]") {
  for (int variant : {0, 1, 2}) {  // Constant node (const_fold first), int64 initializer, float [1]
    INFO("variant " << variant);
    GraphBuilder b(17);
    Value* e = variant == 0 ? b.op("Constant", {}, {Attribute::make_tensor("value", Tensor::scalar_float(2.0f))})
               : variant == 1 ? b.constant("two_i64", Tensor::from_ints({2}, {}))
                              : b.constant("two_1", Tensor::from_floats({2.0f}, {1}));
    b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K})), Form::Pow, e));
    auto before = clone_graph(b.graph());
    FusionReport r = run_passes(b.graph(), {"const_fold", "FusedMatMul"});
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(act_of(b.graph()) == "relu2");
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("FusedMatMul: squared ReLU in float16 (float dtypes other than float32)", "[passes][FusedMatMul][relu2]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float16, {2, M, K});
  Value* y = b.op("MatMul", {a, b.constant("W16", Tensor(DType::Float16, {K, N}))}, {}, "mm");
  y = b.op("Add", {y, b.constant("b16", Tensor(DType::Float16, {N}))}, {}, "bias_add");
  Tensor two(DType::Float16, {});
  two.data<uint16_t>()[0] = float_to_half(2.0f);
  b.output(relu2(b, y, Form::Pow, b.constant("two16", two)));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(act_of(b.graph()) == "relu2");
}

TEST_CASE("LayerNormLinear takes a squared-ReLU GEMM after a norm", "[passes][LayerNormLinear][relu2]") {
  for (Form form : {Form::Pow, Form::Mul}) {
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* n = b.op("LayerNormalization",
                    {x, b.constant("gamma", rand_tensor({K}, 6, 0.5f, 1.5f)), b.constant("beta", rand_tensor({K}, 7))},
                    {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, "ln");
    b.output(relu2(b, linear(b, n), form));
    auto before = clone_graph(b.graph());
    FusionReport r = run_passes(b.graph(), {"FusedMatMul", "LayerNormLinear"});
    CHECK(matched(r, "LayerNormLinear") == 1);
    REQUIRE(b.graph().num_nodes() == 1);
    const Node* f = b.graph().nodes().front().get();
    CHECK(f->op_type == "LayerNormLinear");
    CHECK(f->attr_string("activation", "") == "relu2");
    require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
  }
}

TEST_CASE("FusedMatMul: Pow(Relu, 3) is not a squared ReLU (the Relu alone folds)",
          "[passes][FusedMatMul][relu2][legality]") {
  GraphBuilder b(17);
  b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K})), Form::Pow, b.scalar("three", 3.0f)));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Pow") == 1);
  CHECK(act_of(b.graph()) == "relu");
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("raises to 3, not 2"));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("FusedMatMul rule 2: the squared ReLU's exponent is not a constant", "[passes][FusedMatMul][relu2][legality]") {
  GraphBuilder b(17);
  Value* e = b.input("e", DType::Float, {});
  b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K})), Form::Pow, e));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Pow") == 1);
  CHECK(act_of(b.graph()) == "relu");
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 2") && Contains("not a constant"));
}

TEST_CASE("FusedMatMul rules 2/3: an exponent of 2s that is not one number, or adds dims",
          "[passes][FusedMatMul][relu2][legality]") {
  for (int variant : {0, 1}) {  // [N] of 2s (one per column), [1, 1, 1, 1] on a rank-3 value
    INFO("variant " << variant);
    GraphBuilder b(17);
    Tensor e = variant == 0 ? Tensor::from_floats(std::vector<float>(N, 2.0f), {N})
                            : Tensor::from_floats({2.0f}, {1, 1, 1, 1});
    b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K})), Form::Pow, b.constant("twos", e)));
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(count_op(b.graph(), "Pow") == 1);
    CHECK(act_of(b.graph()) == "relu");
    CHECK_THAT(reasons(r, "FusedMatMul"), Contains(variant == 0 ? "rule 2" : "rule 3"));
  }
}

TEST_CASE("FusedMatMul rule 1: the Relu output of a squared ReLU is read elsewhere",
          "[passes][FusedMatMul][relu2][legality]") {
  for (Form form : {Form::Pow, Form::Mul})
    for (bool graph_output : {false, true}) {
      INFO("Mul form " << (form == Form::Mul) << " graph output " << graph_output);
      GraphBuilder b(17);
      Value* relu = nullptr;
      b.output(relu2(b, linear(b, b.input("a", DType::Float, {2, M, K})), form, nullptr, &relu));
      if (graph_output) b.output(relu);
      else b.output(b.op("Add", {relu, b.scalar("one", 1.0f)}, {}, "other_reader"));
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
      // The Relu still folds into the GEMM (legal: its output stays produced); the square stays outside.
      CHECK(count_op(b.graph(), form == Form::Pow ? "Pow" : "Mul") == 1);
      CHECK(act_of(b.graph()) == "relu");
      CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 1") && Contains("act_relu"));
      require_same_outputs(*before, b.graph(), feeds());
    }
}

TEST_CASE("FusedMatMul rule 1: the value before the squared ReLU is read elsewhere",
          "[passes][FusedMatMul][relu2][legality]") {
  GraphBuilder b(17);
  Value* y = linear(b, b.input("a", DType::Float, {2, M, K}));
  b.output(relu2(b, y, Form::Pow));
  b.output(y);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Relu") == 1);
  CHECK(count_op(b.graph(), "Pow") == 1);
  CHECK(act_of(b.graph()) == "none");  // the bias still folds
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 1"));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("FusedMatMul rule 5: an integer GEMM with a squared ReLU is not fused", "[passes][FusedMatMul][relu2][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Int32, {2, M, K});
  Value* y = b.op("Add", {b.op("MatMul", {a, b.constant("Wi", Tensor(DType::Int32, {K, N}))}, {}, "mm"),
                          b.constant("bi", Tensor(DType::Int32, {N}))},
                  {}, "bias_add");
  b.output(relu2(b, y, Form::Mul));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK(count_op(b.graph(), "Mul") == 1);
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 5"));
}
