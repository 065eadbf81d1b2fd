// const_fold: Constant nodes, nodes with constant inputs, static Shape/Size,
// partial folding of shape subgraphs with symbolic dims, and what must NOT fold
// (large results, symbolic dims, random ops). Values checked against hand-computed numbers.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Node* make_constant(GraphBuilder& b, const std::string& name, Tensor t) {
  Node* n = b.node("Constant", {}, 1, {Attribute::make_tensor("value", std::move(t))}, "", name);
  return n;
}
const Tensor& const_of(const Graph& g, const Value* v) {
  REQUIRE(v->const_data);
  return *v->const_data;
}
}  // namespace

TEST_CASE("const_fold: Constant nodes and constant arithmetic fold; the graph computes the same") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 2});
  Value* c1 = make_constant(b, "c1", Tensor::from_floats({1, 2, 3, 4}, {2, 2}))->outputs[0];
  Value* c2 = b.constant("c2", Tensor::from_floats({10, 20, 30, 40}, {2, 2}));
  Value* sum = b.op("Add", {c1, c2}, {}, "const_add");   // 11 22 33 44
  Value* neg = b.op("Neg", {sum}, {}, "const_neg");      // -11 -22 -33 -44
  b.output(b.op("Mul", {x, neg}, {}, "live_mul"));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"const_fold"});
  CHECK(r.pass("const_fold")->rewrites == 3);
  Graph& g = b.graph();
  REQUIRE(g.num_nodes() == 1);
  const Node& mul = *g.nodes().front();
  CHECK(mul.op_type == "Mul");
  const Tensor& folded = const_of(g, mul.inputs[1]);
  REQUIRE(folded.dims == std::vector<int64_t>{2, 2});
  CHECK(folded.data<float>()[0] == -11.0f);
  CHECK(folded.data<float>()[3] == -44.0f);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 2}, 7)}});
}

TEST_CASE("const_fold: a folded graph output keeps its name") {
  GraphBuilder b;
  b.input("x", DType::Float, {1});
  Value* c = b.constant("c", Tensor::from_floats({-1, 2}, {2}));
  Value* r = b.op("Relu", {c}, {}, "relu");
  b.output(r);
  std::string name = r->name;
  run_passes(b.graph(), {"const_fold"});
  REQUIRE(b.graph().num_nodes() == 0);
  REQUIRE(b.graph().outputs.size() == 1);
  CHECK(b.graph().outputs[0]->name == name);
  const Tensor& t = *b.graph().outputs[0]->const_data;
  CHECK(t.data<float>()[0] == 0.0f);
  CHECK(t.data<float>()[1] == 2.0f);
}

TEST_CASE("const_fold: Shape of static dims folds; partial folding picks static dims out of symbolic shapes") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {-1, 8, 4}, {"batch"});
  Value* s = b.input("s", DType::Float, {3, 5});
  Value* shape_x = b.op("Shape", {x}, {}, "shape_x");
  Value* idx1 = b.constant("idx1", Tensor::from_ints({1}, {}));
  Value* idx0 = b.constant("idx0", Tensor::from_ints({0}, {}));
  Value* d1 = b.op("Gather", {shape_x, idx1}, {Attribute::make_int("axis", 0)}, "gather_static");  // 8
  Value* d0 = b.op("Gather", {shape_x, idx0}, {Attribute::make_int("axis", 0)}, "gather_batch");  // batch
  Value* starts = b.constant("starts", Tensor::from_ints({1}, {1}));
  Value* ends = b.constant("ends", Tensor::from_ints({3}, {1}));
  Value* tail = b.op("Slice", {shape_x, starts, ends}, {}, "slice_static");  // [8, 4]
  Value* shape_s = b.op("Shape", {s}, {}, "shape_s");                          // [3, 5]
  for (Value* v : {d1, d0, tail, shape_s}) b.output(v);
  Graph& g = b.graph();
  run_passes(g, {"const_fold", "dce"});
  // Only the batch lookup stays (Shape + Gather).
  CHECK(count_op(g, "Shape") == 1);
  CHECK(count_op(g, "Gather") == 1);
  CHECK(count_op(g, "Slice") == 0);
  auto ints = [&](size_t out) { return g.outputs[out]->const_data->to_int_vector(); };
  REQUIRE(g.outputs[0]->is_const());
  CHECK(ints(0) == std::vector<int64_t>{8});
  CHECK(g.outputs[0]->const_data->dims.empty());
  CHECK_FALSE(g.outputs[1]->is_const());
  REQUIRE(g.outputs[2]->is_const());
  CHECK(ints(2) == std::vector<int64_t>{8, 4});
  REQUIRE(g.outputs[3]->is_const());
  CHECK(ints(3) == std::vector<int64_t>{3, 5});
}

TEST_CASE("const_fold: large results, random ops and non-constant inputs stay") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {4});
  Value* big_shape = b.constant("big_shape", Tensor::from_ints({2048, 1024}, {2}));
  Value* big = b.op("ConstantOfShape", {big_shape}, {}, "big");  // 2M elements: stays
  Value* small = b.constant("small", Tensor::from_floats({1, 2, 3, 4}, {4}));
  Value* noisy = b.op("RandomUniformLike", {small}, {}, "noisy");
  Value* live = b.op("Relu", {x}, {}, "live");
  for (Value* v : {big, noisy, live}) b.output(v);
  FusionReport r = run_passes(b.graph(), {"const_fold"});
  CHECK(r.pass("const_fold")->rewrites == 0);
  CHECK(b.graph().num_nodes() == 3);
}
