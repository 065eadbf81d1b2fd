// QKV packing: GEMMs sharing one input with constant weights become one GEMM
// on the concatenated weight + Split (Q/K/V with biases, Llama gate/up without,
// GQA widths, transB weights); legality rules 2, 3, 5 with reasons; other
// readers of the shared input are left alone.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

Node* fmm(GraphBuilder& b, Value* x, Value* w, Value* bias, bool transB = false, const std::string& act = "none") {
  std::vector<Value*> in = {x, w};
  if (bias) in.push_back(bias);
  return b.node("FusedMatMul", in, 1,
                {Attribute::make_int("transB", transB), Attribute::make_float("alpha", 1.0f),
                 Attribute::make_string("activation", act)},
                "fuseopt");
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({2, 3, 8}, 7, -2, 2)}}; }

}  // namespace

TEST_CASE("QkvPack: three biased projections become one GEMM + Split", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* q = fmm(b, x, b.constant("Wq", rand_tensor({8, 8}, 1)), b.constant("bq", rand_tensor({8}, 2)))->outputs[0];
  Value* k = fmm(b, x, b.constant("Wk", rand_tensor({8, 4}, 3)), b.constant("bk", rand_tensor({4}, 4)))->outputs[0];
  Value* v = fmm(b, x, b.constant("Wv", rand_tensor({8, 4}, 5)), nullptr)->outputs[0];  // no bias: zeros
  b.output(q);
  b.output(k);
  b.output(b.op("Relu", {v}));
  b.output(b.op("Neg", {x}));  // another reader of x stays
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(r, "QkvPack") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 1);
  CHECK(count_op(b.graph(), "Split") == 1);
  require_same_outputs(*before, b.graph(), feeds());
  // Idempotent.
  FusionReport again = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(again, "QkvPack") == 0);
}

TEST_CASE("QkvPack: plain MatMuls (gate/up) and transB weights", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* g = b.op("MatMul", {x, b.constant("Wg", rand_tensor({8, 6}, 1))});
  Value* u = b.op("MatMul", {x, b.constant("Wu", rand_tensor({8, 6}, 2))});
  b.output(b.op("Mul", {b.op("Sigmoid", {g}), u}));
  Value* t1 = fmm(b, x, b.constant("Wt1", rand_tensor({5, 8}, 3)), nullptr, true)->outputs[0];
  Value* t2 = fmm(b, x, b.constant("Wt2", rand_tensor({3, 8}, 4)), b.constant("bt2", rand_tensor({3}, 5)), true)->outputs[0];
  b.output(t1);
  b.output(t2);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  // The two MatMuls form one group, the two transB FusedMatMuls another.
  CHECK(matched(r, "QkvPack") == 2);
  CHECK(count_op(b.graph(), "MatMul") == 1);
  CHECK(count_op(b.graph(), "Split") == 2);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("QkvPack: GEMMs of a different kind are not grouped", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  b.output(fmm(b, x, b.constant("W1", rand_tensor({8, 4}, 1)), nullptr, false, "relu")->outputs[0]);
  b.output(fmm(b, x, b.constant("W2", rand_tensor({8, 4}, 2)), nullptr, false, "gelu")->outputs[0]);
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(r, "QkvPack") == 0);
  CHECK(count_op(b.graph(), "Split") == 0);
  CHECK_THAT(reasons(r, "QkvPack"), Contains("activation"));
}

TEST_CASE("QkvPack rule 2: a weight that is not a constant", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* w = b.input("w_dyn", DType::Float, {8, 4});
  b.output(b.op("MatMul", {x, w}, {}, "dyn"));
  b.output(b.op("MatMul", {x, b.constant("W2", rand_tensor({8, 4}, 2))}, {}, "static"));
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(r, "QkvPack") == 0);
  CHECK_THAT(reasons(r, "QkvPack"), Contains("rule 2") && Contains("w_dyn"));
}

TEST_CASE("QkvPack rule 3: a bias that is not [N]", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  b.output(fmm(b, x, b.constant("W1", rand_tensor({8, 4}, 1)), b.constant("b1", rand_tensor({3, 4}, 2)))->outputs[0]);
  b.output(fmm(b, x, b.constant("W2", rand_tensor({8, 4}, 3)), b.constant("b2", rand_tensor({4}, 4)))->outputs[0]);
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(r, "QkvPack") == 0);
  CHECK_THAT(reasons(r, "QkvPack"), Contains("rule 3"));
}

TEST_CASE("QkvPack rule 5: weights of different dtypes are not packed", "[passes][QkvPack]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Tensor w16(DType::Float16, {8, 4});
  b.output(fmm(b, x, b.constant("W1", rand_tensor({8, 4}, 1)), nullptr)->outputs[0]);
  b.output(fmm(b, x, b.constant("W2", w16), nullptr)->outputs[0]);
  FusionReport r = run_one_pass(b.graph(), "QkvPack");
  CHECK(matched(r, "QkvPack") == 0);
  CHECK(count_op(b.graph(), "Split") == 0);
  CHECK_THAT(reasons(r, "QkvPack"), Contains("rule 5"));
}
