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
