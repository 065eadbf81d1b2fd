#include <catch2/catch.hpp>

#include "pass/op_arity.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using fuseopt::test::GraphBuilder;

TEST_CASE("op arity: required inputs by op and opset") {
  CHECK(min_inputs("Gather", 17) == 2);
  CHECK(min_inputs("Unsqueeze", 11) == 1);  // axes was an attribute
  CHECK(min_inputs("Unsqueeze", 13) == 2);
  CHECK(min_inputs("Slice", 9) == 1);
  CHECK(min_inputs("Slice", 10) == 3);
  CHECK(min_inputs("Where", 17) == 3);
  CHECK_FALSE(min_inputs("SomeCustomOp", 17).has_value());
}

TEST_CASE("op arity: a node lacking a required input is refused, naming it") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Value* ok = b.op("Add", {x, x}, {}, "fine_add");
  b.output(b.op("Mul", {ok, nullptr}, {}, "broken_mul"));  // slot 1 omitted
  REQUIRE_THROWS_WITH(check_op_arity(b.graph()),
                      Catch::Contains("Mul 'broken_mul' lacks required input 1"));
  GraphBuilder c;
  Value* y = c.input("y", DType::Float, {2});
  c.output(c.op("Relu", {y}));
  CHECK_NOTHROW(check_op_arity(c.graph()));
}
