// FusedMatMul fusion: bias / Relu / erf-GELU / tanh-GELU / Tanh in their exporter
// spellings (and ONNX's Gelu op), Gemm (transB, alpha, beta, scalar C), a Transpose on the weight,
// an activation behind GPT-2's Reshape; legality rules 1-5 as negative tests.
#include "fused_matmul_graphs.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace fuseopt::test::fused_matmul;
using Catch::Matchers::Contains;

namespace {

Value* scalar(GraphBuilder& b, const std::string& name, float v) { return b.scalar(name, v); }

// Each GELU spelling the exporters produce.
enum class Gelu { DivMulLast, MulHalfFirst, HalfOnSum, TanhPow, TanhMul, TanhFast };

Value* gelu(GraphBuilder& b, Value* x, Gelu g) {
  auto one_plus = [&](Value* v) { return b.op("Add", {v, scalar(b, "one", 1.0f)}); };
  switch (g) {
    case Gelu::DivMulLast:  // BERT (TorchScript): (x * (1 + erf(x / 1.4142135))) * 0.5
      return b.op("Mul", {b.op("Mul", {x, one_plus(b.op("Erf", {b.op("Div", {x, scalar(b, "sqrt2", 1.4142135f)})}))}),
                          scalar(b, "half", 0.5f)});
    case Gelu::MulHalfFirst:  // (x * 0.5) * (1 + erf(x * 0.70710678))
      return b.op("Mul", {b.op("Mul", {x, scalar(b, "half", 0.5f)}),
                          one_plus(b.op("Erf", {b.op("Mul", {x, scalar(b, "rsqrt2", 0.70710678f)})}))});
    case Gelu::HalfOnSum:  // dynamo: x * (0.5 * (1 + erf(x / 1.4142135)))
      return b.op("Mul", {x, b.op("Mul", {scalar(b, "half", 0.5f),
                                          one_plus(b.op("Erf", {b.op("Div", {x, scalar(b, "sqrt2", 1.4142135f)})}))})});
    case Gelu::TanhFast: {  // HF FastGELU: 0.5 * x * (1 + tanh(x * 0.7978845608 * (1 + 0.044715 * x * x)))
      Value* cxx = b.op("Mul", {b.op("Mul", {scalar(b, "c", 0.044715f), x}), x});
      Value* arg = b.op("Mul", {b.op("Mul", {x, scalar(b, "k", 0.7978845608f)}), b.op("Add", {scalar(b, "one_", 1.0f), cxx})});
      return b.op("Mul", {b.op("Mul", {scalar(b, "half", 0.5f), x}), one_plus(b.op("Tanh", {arg}))});
    }
    case Gelu::TanhPow:
    case Gelu::TanhMul: {  // GPT-2: (x * 0.5) * (1 + tanh(0.7978846 * (x + 0.044715 * x^3)))
      Value* cube = g == Gelu::TanhPow ? b.op("Pow", {x, scalar(b, "three", 3.0f)}) : b.op("Mul", {b.op("Mul", {x, x}), x});
      Value* inner = b.op("Add", {x, b.op("Mul", {cube, scalar(b, "c", 0.044715f)})});
      Value* t = b.op("Tanh", {b.op("Mul", {inner, scalar(b, "k", 0.7978846f)})});
      return b.op("Mul", {b.op("Mul", {x, scalar(b, "half", 0.5f)}), one_plus(t)});
    }
  }
  return x;
}


}  // namespace

TEST_CASE("FusedMatMul: MatMul + bias", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  b.output(linear(b, b.input("a", DType::Float, {2, M, K})));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(b.graph().num_nodes() == 1);
  const Node* f = only_fused(b.graph());
  REQUIRE(f);
  CHECK(f->attr_string("activation", "") == "none");
  CHECK(f->input(2) != nullptr);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("FusedMatMul: bias + Relu, and Relu without bias", "[passes][FusedMatMul]") {
  for (bool bias : {true, false}) {
    GraphBuilder b(17);
    b.output(b.op("Relu", {linear(b, b.input("a", DType::Float, {2, M, K}), bias)}));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(only_fused(b.graph())->attr_string("activation", "") == "relu");
    CHECK((only_fused(b.graph())->input(2) != nullptr) == bias);
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("FusedMatMul: every GELU spelling folds into the activation", "[passes][FusedMatMul]") {
  for (Gelu g : {Gelu::DivMulLast, Gelu::MulHalfFirst, Gelu::HalfOnSum, Gelu::TanhPow, Gelu::TanhMul, Gelu::TanhFast}) {
    INFO("spelling " << static_cast<int>(g));
    GraphBuilder b(17);
    b.output(gelu(b, linear(b, b.input("a", DType::Float, {2, M, K})), g));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    const bool tanh = g == Gelu::TanhPow || g == Gelu::TanhMul || g == Gelu::TanhFast;
    CHECK(only_fused(b.graph())->attr_string("activation", "") == (tanh ? "gelu_tanh" : "gelu"));
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("FusedMatMul: ONNX's Gelu op (opset 20: the dynamo exporter's F.gelu) folds in, either form",
          "[passes][FusedMatMul]") {
  for (const char* approximate : {"none", "tanh"}) {
    INFO("approximate " << approximate);
    GraphBuilder b(20);
    Value* y = linear(b, b.input("a", DType::Float, {2, M, K}));
    b.output(b.op("Gelu", {y}, {Attribute::make_string("approximate", approximate)}, "gelu_op"));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(only_fused(b.graph())->attr_string("activation", "") ==
          (std::string(approximate) == "tanh" ? "gelu_tanh" : "gelu"));
    require_same_outputs(*before, b.graph(), feeds(), 1e-5f);
  }
}

TEST_CASE("FusedMatMul: erf GELU stays erf unless --approximate-gelu", "[passes][FusedMatMul]") {
  for (bool approx : {false, true}) {
    GraphBuilder b(17);
    b.output(gelu(b, linear(b, b.input("a", DType::Float, {2, M, K})), Gelu::DivMulLast));
    auto before = clone_graph(b.graph());
    PassOptions o;
    o.approximate_gelu = approx;
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul", o);
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(only_fused(b.graph())->attr_string("activation", "") == (approx ? "gelu_tanh" : "gelu"));
    require_same_outputs(*before, b.graph(), feeds(), approx ? 1e-3f : 1e-5f);
  }
}

TEST_CASE("FusedMatMul: bias + Tanh (BERT pooler), also Gemm and without bias", "[passes][FusedMatMul]") {
  for (int form : {0, 1, 2}) {  // MatMul + Add, Gemm (TorchScript's pooler dense), MatMul alone
    INFO("form " << form);
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {M, K});
    Value* y = form == 1 ? b.op("Gemm", {a, b.constant("Wt", rand_tensor({N, K}, 4)), b.constant("C", rand_tensor({N}, 5))},
                                {Attribute::make_int("transB", 1)})
                         : linear(b, a, form == 0);
    b.output(b.op("Tanh", {y}));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(count_op(b.graph(), "Tanh") == 0);
    const Node* f = only_fused(b.graph());
    REQUIRE(f);
    CHECK(f->attr_string("activation", "") == "tanh");
    CHECK((f->input(2) != nullptr) == (form != 2));
    require_same_outputs(*before, b.graph(), feeds({M, K}));
  }
}

TEST_CASE("FusedMatMul rule 1: the pre-tanh value is read elsewhere", "[passes][FusedMatMul][legality]") {
  GraphBuilder b(17);
  Value* y = linear(b, b.input("a", DType::Float, {2, M, K}));
  b.output(b.op("Tanh", {y}));
  b.output(y);  // the logits before the activation are an output too
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(count_op(b.graph(), "Tanh") == 1);  // the bias still folds; the Tanh stays
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 1);
  CHECK(only_fused(b.graph())->attr_string("activation", "") == "none");
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 1"));
}

TEST_CASE("FusedMatMul: a bare MatMul is left alone", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  b.output(linear(b, b.input("a", DType::Float, {2, M, K}), false));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 1);
  CHECK(reasons(r, "FusedMatMul").empty());
}

TEST_CASE("FusedMatMul: Gemm with transB, alpha, beta and a [1, N] C", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {M, K});
  Value* y = b.op("Gemm", {a, b.constant("Wt", rand_tensor({N, K}, 4)), b.constant("C", rand_tensor({1, N}, 5))},
                  {Attribute::make_int("transB", 1), Attribute::make_float("alpha", 0.5f),
                   Attribute::make_float("beta", 2.0f)});
  b.output(b.op("Relu", {y}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(b.graph().num_nodes() == 1);
  const Node* f = only_fused(b.graph());
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(f->attr_float("alpha", 1.0f) == 0.5f);
  require_same_outputs(*before, b.graph(), feeds({M, K}));
}

TEST_CASE("FusedMatMul: Gemm with a scalar C", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {M, K});
  b.output(b.op("Gemm", {a, b.constant("W", rand_tensor({K, N}, 4)), b.scalar("C", 0.75f)}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  require_same_outputs(*before, b.graph(), feeds({M, K}));
}

TEST_CASE("FusedMatMul: GPT-2 Conv1D (Gemm on a 2-D view, Reshape, tanh GELU)", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Value* flat = b.op("Reshape", {a, b.constant("s2", Tensor::from_ints({-1, K}, {2}))});
  Value* y = b.op("Gemm", {flat, b.constant("W", rand_tensor({K, N}, 4)), b.constant("C", rand_tensor({N}, 5))});
  Value* back = b.op("Reshape", {y, b.constant("s3", Tensor::from_ints({2, M, N}, {3}))});
  b.output(gelu(b, back, Gelu::TanhPow));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(count_op(b.graph(), "Tanh") == 0);
  CHECK(count_op(b.graph(), "Gemm") == 0);
  CHECK(count_op(b.graph(), "Reshape") == 2);  // the 2-D view and the Reshape moved after the fused op
  CHECK(only_fused(b.graph())->attr_string("activation", "") == "gelu_tanh");
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("FusedMatMul: a Transpose feeding the weight becomes transB", "[passes][FusedMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Value* wt = b.op("Transpose", {b.constant("Wt", rand_tensor({N, K}, 6))}, {Attribute::make_ints("perm", {1, 0})});
  b.output(b.op("Add", {b.op("MatMul", {a, wt}), b.constant("bias", rand_tensor({N}, 7))}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(only_fused(b.graph())->attr_int("transB", 0) == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

// ---- legality --------------------------------------------------------------------------

TEST_CASE("FusedMatMul rule 1: the product before the bias is read elsewhere", "[passes][FusedMatMul][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Value* p = b.op("MatMul", {a, b.constant("W", rand_tensor({K, N}, 1))}, {}, "mm");
  b.output(b.op("Add", {p, b.constant("bias", rand_tensor({N}, 2))}));
  b.output(b.op("Sigmoid", {p}));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 1);
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 1") && Contains("mm"));
}

TEST_CASE("FusedMatMul rule 2: the weight is not a constant", "[passes][FusedMatMul][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Value* w = b.input("w", DType::Float, {K, N});
  b.output(b.op("Add", {b.op("MatMul", {a, w}), b.constant("bias", rand_tensor({N}, 2))}));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 2") && Contains("'w'"));
}

TEST_CASE("FusedMatMul rule 3: a bias that broadcasts along rows", "[passes][FusedMatMul][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  b.output(b.op("Add", {b.op("MatMul", {a, b.constant("W", rand_tensor({K, N}, 1))}),
                        b.constant("rowbias", rand_tensor({M, N}, 2))}));
  FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 3") && Contains("rowbias"));
}

TEST_CASE("FusedMatMul rule 4: Gemm with transA and a 3-D weight transpose", "[passes][FusedMatMul][legality]") {
  {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {K, M});
    b.output(b.op("Gemm", {a, b.constant("W", rand_tensor({K, N}, 1))}, {Attribute::make_int("transA", 1)}));
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 0);
    CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 4") && Contains("transA"));
  }
  {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {2, M, K});
    Value* wt = b.op("Transpose", {b.constant("W3", rand_tensor({2, N, K}, 6))}, {Attribute::make_ints("perm", {0, 2, 1})});
    b.output(b.op("Relu", {b.op("MatMul", {a, wt})}));
    FusionReport r = run_one_pass(b.graph(), "FusedMatMul");
    CHECK(matched(r, "FusedMatMul") == 0);
    CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 4"));
  }
}

TEST_CASE("FusedMatMul rule 5: a bias of another dtype", "[passes][FusedMatMul][legality]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, M, K});
  Tensor bd(DType::Double, {N});
  b.output(b.op("Add", {b.op("MatMul", {a, b.constant("W", rand_tensor({K, N}, 1))}), b.constant("bias", bd)}));
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 0);
  CHECK_THAT(reasons(r, "FusedMatMul"), Contains("rule 5"));
}
