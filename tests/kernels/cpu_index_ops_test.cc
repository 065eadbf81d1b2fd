// NonZero, OneHot, Compress, EyeLike, DepthToSpace, SpaceToDepth. Expected
// values computed once with numpy (np.nonzero, np.compress, np.eye, and the
// reshape/transpose definitions of the ONNX spec).
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("NonZero gives [rank, count] indices in row-major order", "[cpu][index_ops]") {
  OpTest t("NonZero");
  t.input("x", floats({1, 0, 1, 1}, {2, 2}));
  expect_ints(t.run()[0], DType::Int64, {0, 1, 1, 0, 0, 1}, {2, 3});

  OpTest t3("NonZero");
  t3.input("x", ints({0, 2, 0, 0, 3, 0, 0, 4}, {2, 2, 2}));
  expect_ints(t3.run()[0], DType::Int64, {0, 1, 1, 0, 0, 1, 1, 0, 1}, {3, 3});

  OpTest none("NonZero");
  none.input("x", bools({0, 0}, {2}));
  expect_ints(none.run()[0], DType::Int64, {}, {1, 0});
}

TEST_CASE("OneHot on the last, first and a middle axis; out-of-range is all off", "[cpu][index_ops]") {
  auto run = [](int64_t axis) {
    OpTest t("OneHot");
    t.input("idx", ints({1, 9, 2, -1}, {2, 2})).input("depth", ints({3}, {})).input("values", floats({0, 1}, {2}));
    if (axis != -1) t.attr(Attribute::make_int("axis", axis));
    return t.run()[0];
  };
  expect_near(run(-1), {0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1}, {2, 2, 3});
  expect_near(run(0), {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1}, {3, 2, 2});
  expect_near(run(1), {0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1}, {2, 3, 2});

  OpTest v("OneHot");  // int64 values [off, on] = [-1, 5], float depth
  v.input("idx", int32s({0, 1}, {2})).input("depth", Tensor::scalar_float(2)).input("values", ints({-1, 5}, {2}));
  expect_ints(v.run()[0], DType::Int64, {5, -1, -1, 5}, {2, 2});
}

TEST_CASE("Compress along an axis and flattened", "[cpu][index_ops]") {
  OpTest a0("Compress");
  a0.input("x", iota({3, 2})).input("c", bools({0, 1, 1}, {3})).attr(Attribute::make_int("axis", 0));
  expect_near(a0.run()[0], {2, 3, 4, 5}, {2, 2});
  OpTest a1("Compress");
  a1.input("x", iota({3, 2})).input("c", bools({0, 1}, {2})).attr(Attribute::make_int("axis", -1));
  expect_near(a1.run()[0], {1, 3, 5}, {3, 1});
  OpTest flat("Compress");
  flat.input("x", iota({3, 2})).input("c", bools({0, 1, 0, 0, 1}, {5}));
  expect_near(flat.run()[0], {1, 4}, {2});
  OpTest bad("Compress");
  bad.input("x", iota({3, 2})).input("c", bools({1, 1, 1}, {3})).attr(Attribute::make_int("axis", 1));
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("EyeLike with k and dtype", "[cpu][index_ops]") {
  OpTest t("EyeLike");
  t.input("x", iota({3, 4})).attr(Attribute::make_int("k", 1));
  expect_near(t.run()[0], {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {3, 4});
  OpTest i("EyeLike");
  i.input("x", iota({3, 4})).attr(Attribute::make_int("k", -2))
      .attr(Attribute::make_int("dtype", static_cast<int64_t>(DType::Int64)));
  expect_ints(i.run()[0], DType::Int64, {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, {3, 4});
}

TEST_CASE("DepthToSpace DCR and CRD, SpaceToDepth", "[cpu][index_ops]") {
  OpTest dcr("DepthToSpace");
  dcr.input("x", iota({1, 8, 2, 3})).attr(Attribute::make_int("blocksize", 2));
  expect_near(dcr.run()[0], {0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                             5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                             31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47},
              {1, 2, 4, 6});
  OpTest crd("DepthToSpace");
  crd.input("x", iota({1, 8, 2, 3})).attr(Attribute::make_int("blocksize", 2))
      .attr(Attribute::make_string("mode", "CRD"));
  expect_near(crd.run()[0], {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                             5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                             37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47},
              {1, 2, 4, 6});
  OpTest s2d("SpaceToDepth");
  s2d.input("x", iota({1, 2, 4, 4})).attr(Attribute::make_int("blocksize", 2));
  expect_near(s2d.run()[0], {0, 2, 8, 10, 16, 18, 24, 26, 1, 3, 9, 11, 17, 19, 25, 27,
                             4, 6, 12, 14, 20, 22, 28, 30, 5, 7, 13, 15, 21, 23, 29, 31},
              {1, 8, 2, 2});
  OpTest bad("SpaceToDepth");
  bad.input("x", iota({1, 2, 3, 4})).attr(Attribute::make_int("blocksize", 2));
  REQUIRE_THROWS_AS(bad.run(), Error);
}
