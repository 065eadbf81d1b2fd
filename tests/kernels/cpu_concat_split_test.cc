// Concat and Split, both Split spellings (attribute < 13, input >= 13,
// num_outputs opset 18). Expected values hand-computed from 0..n-1 data.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

TEST_CASE("Concat on a negative axis with an empty input", "[cpu][concat_split]") {
  OpTest t("Concat");
  t.input("a", iota({2, 2})).input("b", iota({2, 3}, 1.0f, 10.0f)).input("c", Tensor(DType::Float, {2, 0}));
  t.attr(Attribute::make_int("axis", -1));
  expect_near(t.run()[0], {0, 1, 10, 11, 12, 2, 3, 13, 14, 15}, {2, 5});
}

TEST_CASE("Concat on axis 0; int64 shape vectors", "[cpu][concat_split]") {
  OpTest t("Concat");
  t.input("a", ints({1, 2}, {1, 2})).input("b", ints({3, 4, 5, 6}, {2, 2}));
  t.attr(Attribute::make_int("axis", 0));
  expect_ints(t.run()[0], DType::Int64, {1, 2, 3, 4, 5, 6}, {3, 2});

  OpTest s("Concat");
  s.input("a", ints({2}, {1})).input("b", ints({-1}, {1})).input("c", ints({64, 8}, {2}));
  s.attr(Attribute::make_int("axis", 0));
  expect_ints(s.run()[0], DType::Int64, {2, -1, 64, 8}, {4});
}

TEST_CASE("Concat rejects mismatched dims naming the shapes", "[cpu][concat_split]") {
  OpTest t("Concat");
  t.input("a", iota({2, 2})).input("b", iota({3, 3}));
  t.attr(Attribute::make_int("axis", 0));
  REQUIRE_THROWS_WITH(t.run(), Contains("Concat") && Contains("[2,2]") && Contains("[3,3]"));
}

TEST_CASE("Split sizes from the input (opset 13) and the attribute (opset 11)", "[cpu][concat_split]") {
  OpTest t("Split");
  t.input("x", iota({2, 6})).input("split", ints({2, 4}, {2})).num_outputs(2);
  t.attr(Attribute::make_int("axis", 1));
  auto out = t.run();
  expect_near(out[0], {0, 1, 6, 7}, {2, 2});
  expect_near(out[1], {2, 3, 4, 5, 8, 9, 10, 11}, {2, 4});

  OpTest a("Split");
  a.input("x", iota({2, 6})).num_outputs(2).attr(Attribute::make_ints("split", {1, 1}));
  auto rows = a.run();
  expect_near(rows[0], {0, 1, 2, 3, 4, 5}, {1, 6});
  expect_near(rows[1], {6, 7, 8, 9, 10, 11}, {1, 6});
}

TEST_CASE("Split into equal parts and by num_outputs (opset 18)", "[cpu][concat_split]") {
  OpTest e("Split");
  e.input("x", iota({2, 6})).num_outputs(3).attr(Attribute::make_int("axis", -1));
  auto out = e.run();
  expect_near(out[0], {0, 1, 6, 7}, {2, 2});
  expect_near(out[1], {2, 3, 8, 9}, {2, 2});
  expect_near(out[2], {4, 5, 10, 11}, {2, 2});

  OpTest empty("Split");  // an empty split input counts as omitted: equal parts
  empty.input("x", iota({4})).input("split", ints({}, {0})).num_outputs(2);
  auto halves = empty.run();
  expect_near(halves[0], {0, 1}, {2});
  expect_near(halves[1], {2, 3}, {2});

  OpTest n("Split");
  n.input("x", ints({0, 1, 2, 3, 4}, {5})).num_outputs(3).attr(Attribute::make_int("num_outputs", 3));
  auto parts = n.run();
  expect_ints(parts[0], DType::Int64, {0, 1}, {2});
  expect_ints(parts[1], DType::Int64, {2, 3}, {2});
  expect_ints(parts[2], DType::Int64, {4}, {1});
}

TEST_CASE("Split rejects sizes that do not add up", "[cpu][concat_split]") {
  OpTest t("Split");
  t.input("x", iota({6})).input("split", ints({2, 3}, {2})).num_outputs(2);
  REQUIRE_THROWS_WITH(t.run(), Contains("Split") && Contains("6"));
  OpTest u("Split");
  u.input("x", iota({6})).num_outputs(4);
  REQUIRE_THROWS_AS(u.run(), Error);
}
