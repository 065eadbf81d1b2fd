#include <catch2/catch.hpp>

#include "ir/graph.h"
#include "util/error.h"

using namespace fuseopt;

TEST_CASE("graph: use lists follow set_input and replace_all_uses") {
  Graph g;
  Value* x = g.create_value("x");
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Node* a = g.add_node("Relu", "", {x}, {"a"});
  Node* b = g.add_node("Neg", "", {a->outputs[0]}, {"b"});
  g.outputs.push_back(b->outputs[0]);
  b->outputs[0]->is_graph_output = true;
  REQUIRE(x->uses.size() == 1);
  REQUIRE(a->outputs[0]->uses.size() == 1);
  g.replace_all_uses(a->outputs[0], x);
  REQUIRE(x->uses.size() == 2);
  g.erase_node(a);
  REQUIRE(x->uses.size() == 1);
  REQUIRE(g.num_nodes() == 1);
  g.verify();
}

TEST_CASE("graph: topo_sort orders producers first and finds cycles") {
  Graph g;
  Value* x = g.create_value("x");
  x->is_graph_input = true;
  g.inputs.push_back(x);
  Value* later = g.create_value("later_in");
  Node* use = g.add_node("Neg", "", {x}, {"u"});
  (void)later;
  Node* prod = g.add_node("Relu", "", {x}, {"p"});
  g.set_input(use, 0, prod->outputs[0]);
  g.topo_sort();
  REQUIRE(g.nodes().front().get() == prod);
  g.set_input(prod, 0, use->outputs[0]);
  REQUIRE_THROWS_AS(g.topo_sort(), Error);
}

TEST_CASE("graph: a value that takes over a graph output keeps the output's declared type where its own is unknown") {
  // Identity elimination on a model whose inference left the Identity's input untyped wrote
  // the output with elem_type 0 (fuzz/mutate_models.py: no valid ONNX model).
  Graph g;
  Value* x = g.create_value("x");
  x->is_graph_input = true;
  x->dtype = DType::Float;
  x->shape = Shape{Dim::sym("batch"), Dim::of(16)};
  g.inputs.push_back(x);
  Node* a = g.add_node("NoShapeFunction", "custom.domain", {x}, {"t"});
  Node* id = g.add_node("Identity", "", {a->outputs[0]}, {"y"});
  Value* y = id->outputs[0];
  y->is_graph_output = true;
  y->dtype = DType::Float;
  y->shape = Shape{Dim::sym("batch"), Dim::of(16)};
  g.outputs.push_back(y);
  Value* t = a->outputs[0];
  REQUIRE(t->dtype == DType::Undefined);
  REQUIRE_FALSE(t->shape);
  g.replace_all_uses(y, t);
  REQUIRE(g.outputs.front() == t);
  CHECK(t->name == "y");
  CHECK(t->dtype == DType::Float);
  REQUIRE(t->shape);
  CHECK(shape_str(*t->shape) == shape_str(*y->shape));

  // A replacement that knows its type keeps it.
  Graph h;
  Value* u = h.create_value("u");
  u->is_graph_input = true;
  u->dtype = DType::Float;
  h.inputs.push_back(u);
  Node* c = h.add_node("Cast", "", {u}, {"half"});
  c->outputs[0]->dtype = DType::Float16;
  Node* id2 = h.add_node("Identity", "", {c->outputs[0]}, {"out"});
  id2->outputs[0]->is_graph_output = true;
  id2->outputs[0]->dtype = DType::Float;
  h.outputs.push_back(id2->outputs[0]);
  h.replace_all_uses(id2->outputs[0], c->outputs[0]);
  CHECK(c->outputs[0]->dtype == DType::Float16);
}
