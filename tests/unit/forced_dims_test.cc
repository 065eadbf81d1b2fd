// Dims a model's own Reshapes fix (src/pass/forced_dims.h): the monomial solver, which
// Reshapes count (live, explicit targets, one value per symbol) and the bind / restore of the
// declared input and output shapes.
#include <catch2/catch.hpp>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "pass/forced_dims.h"
#include "support/graph_builder.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

std::optional<std::pair<std::string, int64_t>> solve(const std::string& a, const std::string& b) {
  return SymExpr::parse(a).solve_for_atom(SymExpr::parse(b));
}

// x [seq, batch, 12] viewed as [len, batch·4, 3] (TorchScript's k.view(len, B·H, D)).
Value* baked_view(GraphBuilder& b, Value* x, int64_t len, const std::string& n) {
  Value* batch = b.op("Shape", {x}, {Attribute::make_int("start", 1), Attribute::make_int("end", 2)});
  Value* bh = b.op("Mul", {batch, ints(b, n + "_h", {4})});
  Value* target = b.op("Concat", {ints(b, n + "_len", {len}), bh, ints(b, n + "_d", {3})}, {Attribute::make_int("axis", 0)});
  return b.op("Reshape", {x, target}, {}, n);
}

Value* seq_first_input(GraphBuilder& b) { return b.input("x", DType::Float, {-1, -1, 12}, {"seq", "batch"}); }

}  // namespace

TEST_CASE("forced dims: one atom solved from two single-term element counts", "[unit][forced_dims]") {
  CHECK(solve("seq*batch*32", "batch*512") == std::make_pair(std::string("seq"), int64_t(16)));
  CHECK(solve("batch*512", "seq*batch*32") == std::make_pair(std::string("seq"), int64_t(16)));
  CHECK(solve("seq*3", "24") == std::make_pair(std::string("seq"), int64_t(8)));
  CHECK_FALSE(solve("seq*32", "100"));          // not a whole length
  CHECK_FALSE(solve("seq*seq", "16"));          // not linear in the atom
  CHECK_FALSE(solve("seq*batch", "16"));        // two unknowns
  CHECK_FALSE(solve("seq+1", "5"));             // not a single term
  CHECK_FALSE(solve("seq*4", "batch*4"));       // a symbol on each side
  CHECK_FALSE(solve("batch*4", "batch*4"));     // equal: nothing forced
}

TEST_CASE("forced dims: a live Reshape with an explicit target binds the input's length", "[unit][forced_dims]") {
  GraphBuilder b;
  Value* x = seq_first_input(b);
  b.output(baked_view(b, x, 5, "k_view"));
  infer_shapes(b.graph());
  auto f = forced_dims(b.graph());
  REQUIRE(f.size() == 1);
  CHECK(f[0].symbol == "seq");
  CHECK(f[0].value == 5);
  CHECK(f[0].reshape == "Reshape 'k_view'");

  ForcedDimBinding bind;
  REQUIRE(bind.bind(b.graph()));
  CHECK(shape_str(*x->shape) == "[5,batch,12]");
  bind.restore(b.graph());
  CHECK(shape_str(*x->shape) == "[seq,batch,12]");
}

TEST_CASE("forced dims: dead Reshapes, -1 targets and contradictions bind nothing", "[unit][forced_dims]") {
  SECTION("a Reshape no output depends on") {
    GraphBuilder b;
    Value* x = seq_first_input(b);
    baked_view(b, x, 5, "dead_view");
    b.output(b.op("Relu", {x}));
    infer_shapes(b.graph());
    CHECK(forced_dims(b.graph()).empty());
  }
  SECTION("a -1 target follows the element count") {
    GraphBuilder b;
    Value* x = seq_first_input(b);
    b.output(b.op("Reshape", {x, ints(b, "t", {5, -1, 3})}));
    infer_shapes(b.graph());
    CHECK(forced_dims(b.graph()).empty());
  }
  SECTION("two Reshapes forcing different lengths: the model runs on no input, nothing is bound") {
    GraphBuilder b;
    Value* x = seq_first_input(b);
    b.output(baked_view(b, x, 5, "a"));
    b.output(baked_view(b, x, 6, "b"));
    infer_shapes(b.graph());
    CHECK(forced_dims(b.graph()).empty());
    ForcedDimBinding bind;
    CHECK_FALSE(bind.bind(b.graph()));
    CHECK(shape_str(*x->shape) == "[seq,batch,12]");
  }
  SECTION("a symbol that is not a graph input's dim") {
    GraphBuilder b;
    Value* x = b.input("x", DType::Float, {-1, 12}, {"n*2"});
    b.output(b.op("Reshape", {x, ints(b, "t", {4, 6})}));
    infer_shapes(b.graph());
    CHECK(forced_dims(b.graph()).empty());
  }
}
