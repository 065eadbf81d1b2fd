// identity_elim: Identity, inference Dropout, no-op Cast and one-input Concat go; the cases where
// removing one would rename or duplicate a graph output stay.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("identity_elim: Identity chains, inference Dropout and no-op Cast are removed") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Value* a = b.op("Relu", {x}, {}, "relu");
  Value* i1 = b.op("Identity", {a}, {}, "id1");
  Value* i2 = b.op("Identity", {i1}, {}, "id2");
  Tensor training_false(DType::Bool, {});
  training_false.bytes[0] = 0;
  Value* no_training = b.constant("training", training_false);
  no_training->dtype = DType::Bool;
  Value* d = b.op("Dropout", {i2, nullptr, no_training}, {}, "dropout");
  Value* c = b.op("Cast", {d}, {Attribute::make_int("to", 1)}, "cast_same");
  Value* out = b.op("Neg", {c}, {}, "neg");
  b.output(out);
  auto before = clone_graph(b.graph());
  run_passes(b.graph(), {"identity_elim"});  // the PassManager infers dtypes first (Cast needs them)
  Graph& g = b.graph();
  CHECK(count_op(g, "Identity") == 0);
  CHECK(count_op(g, "Dropout") == 0);
  CHECK(count_op(g, "Cast") == 0);
  CHECK(g.num_nodes() == 2);
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3}, 11)}});
}

TEST_CASE("identity_elim: a Concat of one input is removed; of two it stays") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Value* one = b.op("Concat", {x}, {Attribute::make_int("axis", 1)}, "concat_one");
  Value* two = b.op("Concat", {one, x}, {Attribute::make_int("axis", 0)}, "concat_two");
  b.output(b.op("Neg", {two}, {}, "neg"));
  auto before = clone_graph(b.graph());
  run_passes(b.graph(), {"identity_elim"});
  Graph& g = b.graph();
  CHECK(count_op(g, "Concat") == 1);
  CHECK(g.outputs[0]->producer->inputs[0]->producer->inputs[0]->name == "x");
  require_same_outputs(*before, g, {{"x", rand_tensor({2, 3}, 12)}});
}

TEST_CASE("identity_elim: Identity from a graph input or initializer to a graph output stays") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Value* w = b.constant("w", Tensor::from_floats({1, 2}, {2}));
  Value* ox = b.op("Identity", {x}, {}, "pass_input");
  Value* ow = b.op("Identity", {w}, {}, "pass_weight");
  Value* r = b.op("Relu", {x}, {}, "relu");
  Value* or_ = b.op("Identity", {r}, {}, "pass_relu");
  b.output(ox);
  b.output(ow);
  b.output(or_);
  std::vector<std::string> names{ox->name, ow->name, or_->name};
  run_passes(b.graph(), {"identity_elim"});
  Graph& g = b.graph();
  CHECK(count_op(g, "Identity") == 2);  // pass_relu goes: Relu's output takes its name
  for (size_t i = 0; i < 3; ++i) CHECK(g.outputs[i]->name == names[i]);
  CHECK(g.outputs[2]->producer->op_type == "Relu");
}

TEST_CASE("identity_elim: Dropout whose mask is read, or in training mode, stays") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {4});
  Value* t = b.input("t", DType::Bool, {});
  Node* with_mask = b.node("Dropout", {x}, 2, {}, "", "with_mask");
  Value* train = b.op("Dropout", {x, nullptr, t}, {}, "maybe_training");
  b.output(with_mask->outputs[0]);
  b.output(with_mask->outputs[1]);
  b.output(b.op("Neg", {train}));
  FusionReport r = run_passes(b.graph(), {"identity_elim"});
  CHECK(r.pass("identity_elim")->rewrites == 0);
  CHECK(count_op(b.graph(), "Dropout") == 2);
}

TEST_CASE("identity_elim: values a subgraph reads by name keep their name") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Value* cond = b.input("cond", DType::Bool, {});
  Value* r = b.op("Relu", {x}, {}, "relu");
  Value* via_relu = b.op("Identity", {r}, {}, "id_relu");
  Value* via_input = b.op("Identity", {x}, {}, "id_input");
  // An If whose branches read both Identity outputs from the outer scope (by name).
  Node* branch = b.node("If", {cond}, 1, {}, "", "branch");
  b.graph().add_implicit_input(branch, via_relu);
  b.graph().add_implicit_input(branch, via_input);
  b.output(branch->outputs[0]);
  std::string relu_name = via_relu->name, input_name = via_input->name;
  run_passes(b.graph(), {"identity_elim"});
  Graph& g = b.graph();
  // id_relu goes and the Relu's output takes its name; id_input must stay.
  CHECK(count_op(g, "Identity") == 1);
  REQUIRE(branch->implicit_inputs.size() == 2);
  CHECK(branch->implicit_inputs[0]->name == relu_name);
  CHECK(branch->implicit_inputs[0]->producer->op_type == "Relu");
  CHECK(branch->implicit_inputs[1]->name == input_name);
  CHECK(branch->implicit_inputs[1]->producer->op_type == "Identity");
}
