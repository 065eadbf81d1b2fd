// dce and cse.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("dce: unread nodes and initializers go, graph inputs and outputs stay") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  b.input("unused_input", DType::Float, {3});
  Value* w = b.constant("w", Tensor::from_floats({1, 2, 3}, {3}));
  b.constant("unused_weight", Tensor::from_floats({4, 5, 6}, {3}));
  Value* dead1 = b.op("Mul", {x, w}, {}, "dead_mul");
  b.op("Relu", {dead1}, {}, "dead_relu");
  b.output(b.op("Add", {x, w}, {}, "live"));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"dce"});
  Graph& g = b.graph();
  CHECK(g.num_nodes() == 1);
  CHECK(g.find("unused_weight") == nullptr);
  CHECK(g.find("w") != nullptr);
  CHECK(g.inputs.size() == 2);
  CHECK(r.pass("dce")->changes.nodes_erased == 2);
  CHECK(r.pass("dce")->changes.constants_removed == 1);
  require_same_outputs(*before, g, {{"x", rand_tensor({3}, 5)}, {"unused_input", rand_tensor({3}, 6)}});
}

TEST_CASE("cse: identical shape computations and constants merge; different ones do not") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {-1, 4}, {"batch"});
  Value* idx_a = b.constant("idx_a", Tensor::from_ints({0}, {1}));
  Value* idx_b = b.constant("idx_b", Tensor::from_ints({0}, {1}));  // equal data, other name
  Value* s1 = b.op("Shape", {x}, {}, "shape1");
  Value* s2 = b.op("Shape", {x}, {}, "shape2");
  Value* g1 = b.op("Gather", {s1, idx_a}, {Attribute::make_int("axis", 0)}, "gather1");
  Value* g2 = b.op("Gather", {s2, idx_b}, {Attribute::make_int("axis", 0)}, "gather2");
  Value* g3 = b.op("Gather", {s2, idx_b}, {Attribute::make_int("axis", -1)}, "gather_other_axis");
  Value* sm1 = b.op("Softmax", {x}, {Attribute::make_int("axis", 1)}, "softmax1");
  Value* sm2 = b.op("Softmax", {x}, {Attribute::make_int("axis", 1)}, "softmax2");
  Value* sum = b.op("Add", {sm1, sm2}, {}, "sum");
  b.output(b.op("Concat", {g1, g2, g3}, {Attribute::make_int("axis", 0)}, "concat"));
  b.output(sum);
  auto before = clone_graph(b.graph());
  run_passes(b.graph(), {"cse", "dce"});
  Graph& g = b.graph();
  CHECK(count_op(g, "Shape") == 1);
  CHECK(count_op(g, "Gather") == 2);  // the axis=-1 one differs
  CHECK(count_op(g, "Softmax") == 1);
  CHECK((g.find("idx_a") == nullptr) != (g.find("idx_b") == nullptr));
  std::map<std::string, Tensor> feeds{{"x", rand_tensor({3, 4}, 9)}};
  std::vector<Tensor> want = run_cpu(*before, feeds), got = run_cpu(g, feeds);
  REQUIRE(got.size() == 2);
  CHECK(got[0].to_int_vector() == want[0].to_int_vector());
  CHECK(got[0].to_int_vector() == std::vector<int64_t>{3, 3, 3});
  for (int64_t i = 0; i < want[1].numel(); ++i) CHECK(got[1].data<float>()[i] == want[1].data<float>()[i]);
}

TEST_CASE("cse: a duplicate that is a graph output is kept") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* r1 = b.op("Relu", {x}, {}, "relu1");
  Value* r2 = b.op("Relu", {x}, {}, "relu2");
  b.output(r1);
  b.output(r2);
  FusionReport r = run_passes(b.graph(), {"cse"});
  CHECK(count_op(b.graph(), "Relu") == 2);
  CHECK(b.graph().outputs[0] != b.graph().outputs[1]);
}
