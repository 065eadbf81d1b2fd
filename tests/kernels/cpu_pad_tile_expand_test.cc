// Pad (constant/reflect/edge/wrap, both spellings, negative pads, axes),
// Tile, Expand. Expected values from np.pad / np.tile / np.broadcast_to on
// y = [[1,2,3],[4,5,6]].
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor y23() { return floats({1, 2, 3, 4, 5, 6}, {2, 3}); }

Tensor pad(const char* mode, std::vector<int64_t> pads) {
  OpTest t("Pad");
  t.input("x", y23()).input("pads", ints(pads, {static_cast<int64_t>(pads.size())}));
  t.attr(Attribute::make_string("mode", mode));
  return t.run()[0];
}
}  // namespace

TEST_CASE("Pad constant with a value input (opset >= 11)", "[cpu][pad]") {
  OpTest t("Pad");
  t.input("x", y23()).input("pads", ints({1, 0, 0, 1}, {4})).input("value", Tensor::scalar_float(9));
  expect_near(t.run()[0], {9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9}, {3, 4});
}

TEST_CASE("Pad constant with pads/value attributes (opset < 11)", "[cpu][pad]") {
  OpTest t("Pad");
  t.input("x", y23()).attr(Attribute::make_ints("pads", {1, 0, 0, 1})).attr(Attribute::make_float("value", 9));
  expect_near(t.run()[0], {9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9}, {3, 4});
}

TEST_CASE("Pad reflect, edge, wrap", "[cpu][pad]") {
  expect_near(pad("reflect", {1, 2, 1, 1}),
              {6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2}, {4, 6});
  expect_near(pad("edge", {0, 1, 1, 2}), {1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6, 4, 4, 5, 6, 6, 6}, {3, 6});
  expect_near(pad("wrap", {0, 2, 0, 1}), {2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4}, {2, 6});
}

TEST_CASE("Pad with negative pads crops; default value is 0", "[cpu][pad]") {
  expect_near(pad("constant", {0, -1, 0, 1}), {2, 3, 0, 5, 6, 0}, {2, 3});
  OpTest t("Pad");
  t.input("x", y23()).input("pads", ints({0, -4, 0, 0}, {4}));
  REQUIRE_THROWS_AS(t.run(), Error);
}

TEST_CASE("Pad with an axes input (opset 18) and int64 data", "[cpu][pad]") {
  OpTest t("Pad");
  t.input("x", y23()).input("pads", ints({2, 1}, {2})).omitted_input().input("axes", ints({-1}, {1}));
  expect_near(t.run()[0], {0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0}, {2, 6});

  OpTest i("Pad");
  i.input("x", ints({1, 2, 3}, {3})).input("pads", ints({1, 1}, {2})).input("value", ints({7}, {}));
  expect_ints(i.run()[0], DType::Int64, {7, 1, 2, 3, 7}, {5});

  OpTest bad("Pad");
  bad.input("x", y23()).input("pads", ints({1, 1}, {2}));  // 2 values for rank 2
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("Tile", "[cpu][tile]") {
  OpTest t("Tile");
  t.input("x", y23()).input("repeats", ints({2, 2}, {2}));
  expect_near(t.run()[0], {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, {4, 6});

  OpTest z("Tile");
  z.input("x", y23()).input("repeats", ints({1, 0}, {2}));
  expect_near(z.run()[0], {}, {2, 0});

  OpTest b("Tile");
  b.input("x", bools({1, 0}, {2})).input("repeats", ints({3}, {1}));
  expect_ints(b.run()[0], DType::Bool, {1, 0, 1, 0, 1, 0}, {6});

  OpTest bad("Tile");
  bad.input("x", y23()).input("repeats", ints({2}, {1}));
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("Expand broadcasts both ways", "[cpu][expand]") {
  OpTest t("Expand");
  t.input("x", floats({1, 2, 3}, {3, 1})).input("shape", ints({2, 1, 4}, {3}));
  expect_near(t.run()[0], {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, {2, 3, 4});

  OpTest keep("Expand");  // a smaller target keeps the input's larger dims
  keep.input("x", floats({1, 2, 3}, {3, 1})).input("shape", ints({1}, {1}));
  expect_near(keep.run()[0], {1, 2, 3}, {3, 1});

  OpTest mask("Expand");  // exporters expand int64/bool masks
  mask.input("x", ints({1, 0}, {1, 1, 1, 2})).input("shape", ints({2, 1, 2, 2}, {4}));
  expect_ints(mask.run()[0], DType::Int64, {1, 0, 1, 0, 1, 0, 1, 0}, {2, 1, 2, 2});

  OpTest neg("Expand");
  neg.input("x", floats({1, 2, 3}, {3, 1})).input("shape", ints({-1, 1}, {2}));
  REQUIRE_THROWS_AS(neg.run(), Error);

  OpTest bad("Expand");
  bad.input("x", floats({1, 2, 3}, {3, 1})).input("shape", ints({2, 4}, {2}));
  REQUIRE_THROWS_WITH(bad.run(), Catch::Matchers::Contains("Expand") && Catch::Matchers::Contains("[3,1]"));
}
