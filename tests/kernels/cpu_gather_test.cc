// Gather, GatherElements, GatherND. Expected values computed once with numpy
// (fancy indexing, np.take_along_axis) on 0..n-1 data.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

TEST_CASE("Gather along axis 0 with negative indices", "[cpu][gather]") {
  OpTest t("Gather");
  t.input("data", iota({3, 4})).input("idx", ints({0, 2, -1, 1}, {2, 2}));
  expect_near(t.run()[0], {0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11, 4, 5, 6, 7}, {2, 2, 4});
}

TEST_CASE("Gather along a negative axis with int32 indices", "[cpu][gather]") {
  OpTest t("Gather");
  t.input("data", iota({3, 4})).input("idx", int32s({3, 0}, {2}));
  t.attr(Attribute::make_int("axis", -1));
  expect_near(t.run()[0], {3, 0, 7, 4, 11, 8}, {3, 2});
}

TEST_CASE("Gather with a scalar index drops the axis; int64 data; empty indices", "[cpu][gather]") {
  OpTest t("Gather");
  t.input("data", ints({10, 11, 12, 13, 14, 15}, {3, 2})).input("idx", ints({1}, {}));
  expect_ints(t.run()[0], DType::Int64, {12, 13}, {2});

  OpTest e("Gather");
  e.input("data", iota({3, 4})).input("idx", ints({}, {0}));
  expect_near(e.run()[0], {}, {0, 4});
}

TEST_CASE("Gather rejects out-of-range indices", "[cpu][gather]") {
  OpTest t("Gather");
  t.input("data", iota({3, 4})).input("idx", ints({3}, {1}));
  REQUIRE_THROWS_WITH(t.run(), Contains("Gather") && Contains("out of range"));
  OpTest n("Gather");
  n.input("data", iota({3, 4})).input("idx", ints({-4}, {1}));
  REQUIRE_THROWS_AS(n.run(), Error);
}

TEST_CASE("GatherElements on axis 1 and axis 0", "[cpu][gather]") {
  OpTest t("GatherElements");
  t.input("data", iota({3, 4})).input("idx", ints({1, 0, 2, -2}, {2, 2}));
  t.attr(Attribute::make_int("axis", 1));
  expect_near(t.run()[0], {1, 0, 6, 6}, {2, 2});

  OpTest t0("GatherElements");
  t0.input("data", iota({3, 4})).input("idx", ints({2, 0, 1, 1, 2, 0}, {2, 3}));
  expect_near(t0.run()[0], {8, 1, 6, 4, 9, 2}, {2, 3});

  OpTest neg("GatherElements");
  neg.input("data", iota({3, 4})).input("idx", ints({3, 0}, {1, 2}));
  neg.attr(Attribute::make_int("axis", -1));
  expect_near(neg.run()[0], {3, 0}, {1, 2});

  OpTest bad("GatherElements");
  bad.input("data", iota({3, 4})).input("idx", ints({0, 3}, {1, 2}));
  REQUIRE_THROWS_AS(bad.run(), Error);  // index 3 on axis 0 of size 3
}

TEST_CASE("GatherND with and without batch_dims", "[cpu][gather]") {
  OpTest slices("GatherND");
  slices.input("data", iota({2, 2, 2})).input("idx", ints({1, 0}, {2, 1}));
  expect_near(slices.run()[0], {4, 5, 6, 7, 0, 1, 2, 3}, {2, 2, 2});

  OpTest pairs("GatherND");
  pairs.input("data", iota({2, 2, 2})).input("idx", ints({0, 1, 1, 0}, {2, 2}));
  expect_near(pairs.run()[0], {2, 3, 4, 5}, {2, 2});

  OpTest full("GatherND");
  full.input("data", ints({0, 1, 2, 3}, {2, 2})).input("idx", int32s({0, 0, 1, -1}, {2, 2}));
  expect_ints(full.run()[0], DType::Int64, {0, 3}, {2});

  OpTest b1("GatherND");
  b1.input("data", iota({2, 2, 2})).input("idx", ints({1, 0}, {2, 1}));
  b1.attr(Attribute::make_int("batch_dims", 1));
  expect_near(b1.run()[0], {2, 3, 4, 5}, {2, 2});

  OpTest b1d("GatherND");
  b1d.input("data", iota({2, 2, 2})).input("idx", ints({1, 0, 0, 1}, {2, 1, 2}));
  b1d.attr(Attribute::make_int("batch_dims", 1));
  expect_near(b1d.run()[0], {2, 5}, {2, 1});

  OpTest bad("GatherND");
  bad.input("data", iota({2, 2})).input("idx", ints({0, 2}, {1, 2}));
  REQUIRE_THROWS_AS(bad.run(), Error);
}
