// The opset upgrader (src/onnx_io/opset_upgrade.h): one case per op change, outputs
// compared on the CPU backend before/after where the change is numeric, refusals named.
#include <catch2/catch.hpp>

#include <onnx/onnx_pb.h>

#include "onnx_io/opset_upgrade.h"
#include "support/fusion_check.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

int upgrade(Graph& g, int64_t to) {
  Rewriter rw(g);
  int n = upgrade_opset(g, rw, to);
  g.topo_sort();
  g.verify();
  return n;
}

}  // namespace

TEST_CASE("opset upgrade: Reduce ops axes attribute becomes an input at 18 - numbers unchanged") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, 4});
  Value* m = b.op("ReduceMean", {x}, {Attribute::make_ints("axes", {-1}), Attribute::make_int("keepdims", 1)});
  Value* s = b.op("ReduceMax", {m}, {Attribute::make_ints("axes", {1})});
  Value* all = b.op("ReduceL2", {x});  // no axes: reduces everything at both opsets
  b.output(s);
  b.output(all);
  auto before = clone_graph(b.graph());
  REQUIRE(opset_upgrade_blocker(b.graph(), 23).empty());
  CHECK(upgrade(b.graph(), 23) == 3);
  CHECK(b.graph().opset("") == 23);
  for (const auto& n : b.graph().nodes()) {
    CHECK_FALSE(n->has_attr("axes"));
    if (n->op_type != "ReduceL2") {
      REQUIRE(n->input(1));
      CHECK(n->input(1)->const_data->dtype == DType::Int64);
    } else {
      CHECK(n->inputs.size() == 1);
    }
  }
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 3, 4}, 1)}});
}

TEST_CASE("opset upgrade: Squeeze/Unsqueeze/ReduceSum axes and Split sizes become inputs at 13") {
  GraphBuilder b(12);
  Value* x = b.input("x", DType::Float, {2, 1, 6});
  Value* sq = b.op("Squeeze", {x}, {Attribute::make_ints("axes", {1})});
  Value* un = b.op("Unsqueeze", {sq}, {Attribute::make_ints("axes", {0})});
  Value* rs = b.op("ReduceSum", {un}, {Attribute::make_ints("axes", {2}), Attribute::make_int("keepdims", 0)});
  Node* split = b.node("Split", {x}, 2, {Attribute::make_int("axis", 2), Attribute::make_ints("split", {2, 4})});
  b.output(rs);
  b.output(split->output(0));
  b.output(split->output(1));
  auto before = clone_graph(b.graph());
  upgrade(b.graph(), 13);
  for (const auto& n : b.graph().nodes()) {
    CHECK_FALSE(n->has_attr("axes"));
    CHECK_FALSE(n->has_attr("split"));
    CHECK(n->input(1) != nullptr);
  }
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 1, 6}, 2)}});
}

TEST_CASE("opset upgrade: Split without sizes gets num_outputs at 18 - with a sizes input it is left alone") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 6});
  Node* eq = b.node("Split", {x}, 3, {Attribute::make_int("axis", 1)}, "", "eq");
  Node* sized = b.node("Split", {x, b.constant("sizes", Tensor::from_ints({2, 4}, {2}))}, 2,
                       {Attribute::make_int("axis", 1)}, "", "sized");
  for (Node* n : {eq, sized})
    for (Value* o : n->outputs) b.output(o);
  auto before = clone_graph(b.graph());
  upgrade(b.graph(), 23);
  CHECK(b.graph().find_node("eq")->attr_int("num_outputs", 0) == 3);
  CHECK_FALSE(b.graph().find_node("sized")->has_attr("num_outputs"));
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 6}, 3)}});
}

TEST_CASE("opset upgrade: Softmax at 13 is exact on the last axis and refused elsewhere - naming the node") {
  {
    GraphBuilder b(12);
    Value* x = b.input("x", DType::Float, {2, 3, 4});
    b.output(b.op("Softmax", {x}, {Attribute::make_int("axis", 2)}, "last"));
    auto before = clone_graph(b.graph());
    upgrade(b.graph(), 23);
    CHECK(b.graph().find_node("last")->attr_int("axis", 0) == -1);
    require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 3, 4}, 4)}});
  }
  {
    GraphBuilder b(12);
    Value* x = b.input("x", DType::Float, {2, 3, 4});
    b.output(b.op("Softmax", {x}, {}, "flat"));  // default axis 1 of a rank-3 input: flattens [3, 4]
    const std::string why = opset_upgrade_blocker(b.graph(), 23);
    CHECK(why.find("Softmax 'flat'") != std::string::npos);
    CHECK(why.find("opset 12 -> 23") != std::string::npos);
    Rewriter rw(b.graph());
    CHECK_THROWS_AS(upgrade_opset(b.graph(), rw, 23), Error);
    CHECK(b.graph().opset("") == 12);  // nothing changed
    CHECK_FALSE(b.graph().find_node("flat")->has_attr("axis"));
  }
}

TEST_CASE("opset upgrade: GridSample modes renamed at 20 - DFT axis becomes an input - GroupNormalization scale per channel at 21") {
  GraphBuilder b(18);
  Value* x = b.input("x", DType::Float, {1, 4, 3, 3});
  Value* grid = b.input("grid", DType::Float, {1, 2, 2, 2});
  b.output(b.op("GridSample", {x, grid}, {Attribute::make_string("mode", "bilinear")}, "gs"));
  Value* sig = b.input("sig", DType::Float, {1, 8, 1});
  b.output(b.op("DFT", {sig}, {Attribute::make_int("axis", 1)}, "dft"));
  Value* scale = b.constant("gn_scale", Tensor::from_floats({1, 2}, {2}));
  Value* bias = b.constant("gn_bias", Tensor::from_floats({0, 1}, {2}));
  b.output(b.op("GroupNormalization", {x, scale, bias}, {Attribute::make_int("num_groups", 2)}, "gn"));
  upgrade(b.graph(), 23);
  Graph& g = b.graph();
  CHECK(g.find_node("gs")->attr_string("mode", "") == "linear");
  Node* dft = g.find_node("dft");
  CHECK_FALSE(dft->has_attr("axis"));
  REQUIRE(dft->input(2));
  CHECK(dft->input(2)->const_data->as_int(0) == 1);
  CHECK(dft->input(1) == nullptr);  // dft_length stays omitted
  Node* gn = g.find_node("gn");
  REQUIRE(gn->input(1)->producer);
  CHECK(gn->input(1)->producer->op_type == "Reshape");
  CHECK(gn->input(1)->shape->at(0).value == 4);
}

TEST_CASE("opset upgrade: refusals for what cannot be upgraded exactly") {
  SECTION("below the upgrader's first opset") {
    GraphBuilder b(11);
    Value* x = b.input("x", DType::Float, {2});
    b.output(b.op("Relu", {x}));
    CHECK(opset_upgrade_blocker(b.graph(), 23).find("below 12") != std::string::npos);
  }
  SECTION("GroupNormalization with an unknown channel count") {
    GraphBuilder b(18);
    Value* x = b.input("x", DType::Float, {1, -1, 3});
    b.output(b.op("GroupNormalization", {x, b.input("s", DType::Float, {2}), b.input("b", DType::Float, {2})},
                  {Attribute::make_int("num_groups", 2)}, "gn"));
    const std::string why = opset_upgrade_blocker(b.graph(), 23);
    CHECK(why.find("GroupNormalization 'gn'") != std::string::npos);
    CHECK(opset_upgrade_blocker(b.graph(), 20).empty());  // 21 is where it changed
  }
  SECTION("nothing to do at or below the current opset") {
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {2, 3});
    b.output(b.op("ReduceMean", {x}, {Attribute::make_ints("axes", {1})}));
    CHECK(opset_upgrade_blocker(b.graph(), 17).empty());
    CHECK(upgrade(b.graph(), 17) == 0);
    CHECK(b.graph().nodes().front()->has_attr("axes"));
  }
}

TEST_CASE("opset upgrade: a subgraph holding an op that changed in the range is refused (subgraphs are kept as written)") {
  GraphBuilder b(17);
  Value* cond = b.input("cond", DType::Bool, {});
  Value* x = b.input("x", DType::Float, {2, 3});
  auto branch = [&](const std::string& op) {
    onnx::AttributeProto a;
    a.set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* g = a.mutable_g();
    g->set_name(op + "_branch");
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    n->add_input("x");
    n->add_output(op + "_out");
    g->add_output()->set_name(op + "_out");
    Attribute at;
    at.kind = Attribute::Kind::Graph;
    at.opaque = a.SerializeAsString();
    return at;
  };
  Attribute then_b = branch("ReduceMean"), else_b = branch("Relu");
  then_b.name = "then_branch";
  else_b.name = "else_branch";
  Node* n = b.node("If", {cond}, 1, {then_b, else_b}, "", "branchy");
  b.graph().add_implicit_input(n, x);
  b.output(n->output(0));
  const std::string why = opset_upgrade_blocker(b.graph(), 23);
  CHECK(why.find("If 'branchy'") != std::string::npos);
  CHECK(why.find("ReduceMean") != std::string::npos);
  CHECK(opset_upgrade_blocker(b.graph(), 17).empty());
}
