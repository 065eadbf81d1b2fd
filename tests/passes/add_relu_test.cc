// AddRelu fusion: positive case with numbers compared on the CPU Session, and
// one negative test per applicable legality rule (1: interior value read
// elsewhere / graph output, 5: dtypes differ).
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

TEST_CASE("AddRelu: Relu(Add(a, b)) becomes fuseopt.AddRelu", "[passes][AddRelu]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3, 4});
  Value* y = b.input("y", DType::Float, {2, 3, 4});
  b.output(b.op("Relu", {b.op("Add", {x, y})}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "AddRelu");
  CHECK(matched(r, "AddRelu") == 1);
  CHECK(count_op(b.graph(), "Add") == 0);
  CHECK(count_op(b.graph(), "Relu") == 0);
  CHECK(count_domain_op(b.graph(), "fuseopt", "AddRelu") == 1);
  CHECK(b.graph().opset("fuseopt") == 1);
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 3, 4}, 1)}, {"y", rand_tensor({2, 3, 4}, 2)}});
}

TEST_CASE("AddRelu: broadcast operand (bias row) still fuses", "[passes][AddRelu]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3, 4});
  Value* c = b.constant("c", rand_tensor({4}, 3));
  b.output(b.op("Relu", {b.op("Add", {c, x})}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "AddRelu");
  CHECK(matched(r, "AddRelu") == 1);
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({3, 4}, 4)}});
}

TEST_CASE("AddRelu rule 1: the sum is read by another node", "[passes][AddRelu][legality]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {4});
  Value* y = b.input("y", DType::Float, {4});
  Value* s = b.op("Add", {x, y}, {}, "sum");
  b.output(b.op("Relu", {s}));
  b.output(b.op("Neg", {s}));  // the in-place hazard: someone still reads the sum
  FusionReport r = run_one_pass(b.graph(), "AddRelu");
  CHECK(matched(r, "AddRelu") == 0);
  CHECK(count_op(b.graph(), "Add") == 1);
  CHECK_THAT(reasons(r, "AddRelu"), Contains("rule 1") && Contains("sum"));
}

TEST_CASE("AddRelu rule 1: the sum is a graph output", "[passes][AddRelu][legality]") {
  GraphBuilder b;
  Value* s = b.op("Add", {b.input("x", DType::Float, {4}), b.input("y", DType::Float, {4})});
  b.output(b.op("Relu", {s}));
  b.output(s);
  FusionReport r = run_one_pass(b.graph(), "AddRelu");
  CHECK(matched(r, "AddRelu") == 0);
  CHECK_THAT(reasons(r, "AddRelu"), Contains("rule 1") && Contains("graph output"));
}

TEST_CASE("AddRelu rule 5: operands of different dtypes", "[passes][AddRelu][legality]") {
  GraphBuilder b;
  Value* s = b.op("Add", {b.input("x", DType::Float, {4}), b.input("y", DType::Double, {4})});
  b.output(b.op("Relu", {s}));
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "AddRelu");
  CHECK(matched(r, "AddRelu") == 0);
  CHECK_THAT(reasons(r, "AddRelu"), Contains("rule 5"));
}
