// Slice, both spellings, negative steps and clamping. Expected values from
// numpy slicing of np.arange(n).reshape(...).
#include <catch2/catch.hpp>

#include <limits>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("Slice with negative steps: z[3:0:-1, ::-2]", "[cpu][slice]") {
  OpTest t("Slice");
  t.input("z", iota({4, 5}))
      .input("starts", ints({3, -1}, {2}))
      .input("ends", ints({0, kMin}, {2}))
      .input("axes", ints({0, 1}, {2}))
      .input("steps", ints({-1, -2}, {2}));
  expect_near(t.run()[0], {19, 17, 15, 14, 12, 10, 9, 7, 5}, {3, 3});
}

TEST_CASE("Slice clamps out-of-range ends; axes omitted, steps given: z[-3:100, 1:-1:2]", "[cpu][slice]") {
  OpTest t("Slice");
  t.input("z", iota({4, 5}))
      .input("starts", ints({-3, 1}, {2}))
      .input("ends", ints({100, -1}, {2}))
      .omitted_input()
      .input("steps", ints({1, 2}, {2}));
  expect_near(t.run()[0], {6, 8, 11, 13, 16, 18}, {3, 2});
}

TEST_CASE("Slice opset-1 attribute form with a negative axis", "[cpu][slice]") {
  OpTest t("Slice");
  t.input("z", iota({4, 5}));
  t.attr(Attribute::make_ints("starts", {1})).attr(Attribute::make_ints("ends", {kMax}));
  t.attr(Attribute::make_ints("axes", {-1}));
  expect_near(t.run()[0], {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19}, {4, 4});
}

TEST_CASE("Slice: negative axis input, int32 starts, int64 data", "[cpu][slice]") {
  OpTest t("Slice");
  t.input("z", iota({4, 5})).input("starts", int32s({1}, {1})).input("ends", int32s({3}, {1}))
      .input("axes", int32s({-2}, {1}));
  expect_near(t.run()[0], {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {2, 5});

  OpTest s("Slice");  // the shape-slicing idiom of exporters: shape[-1:]
  s.input("shape", ints({2, 16, 128}, {3})).input("starts", ints({-1}, {1})).input("ends", ints({kMax}, {1}));
  expect_ints(s.run()[0], DType::Int64, {128}, {1});
}

TEST_CASE("Slice reversing a middle axis of a 3-d tensor", "[cpu][slice]") {
  OpTest t("Slice");
  t.input("x", iota({2, 3, 4})).input("starts", ints({-1}, {1})).input("ends", ints({kMin}, {1}))
      .input("axes", ints({1}, {1})).input("steps", ints({-1}, {1}));
  expect_near(t.run()[0], {8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 16, 17, 18, 19, 12, 13, 14, 15},
              {2, 3, 4});
}

TEST_CASE("Slice: an INT64_MAX end with a negative step runs to index 0 (ONNX Runtime)", "[cpu][slice]") {
  // x = [0..4]; start -7 -> clamps to 0; end "None" -> past index 0: one element.
  OpTest t("Slice");
  t.input("x", iota({5})).input("starts", ints({-7}, {1})).input("ends", ints({kMax}, {1}))
      .input("axes", ints({0}, {1})).input("steps", ints({-2}, {1}));
  expect_near(t.run()[0], {0}, {1});
  // start 4, end "None", step -2 -> 4, 2, 0 (numpy x[4::-2]).
  OpTest u("Slice");
  u.input("x", iota({5})).input("starts", ints({4}, {1})).input("ends", ints({kMax}, {1}))
      .input("axes", ints({0}, {1})).input("steps", ints({-2}, {1}));
  expect_near(u.run()[0], {4, 2, 0}, {3});
}

TEST_CASE("Slice giving an empty result; zero step is an error", "[cpu][slice]") {
  OpTest e("Slice");
  e.input("z", iota({4, 5})).input("starts", ints({3}, {1})).input("ends", ints({1}, {1}));
  expect_near(e.run()[0], {}, {0, 5});

  OpTest e2("Slice");
  e2.input("z", iota({4, 5})).input("starts", ints({0}, {1})).input("ends", ints({4}, {1}))
      .input("axes", ints({0}, {1})).input("steps", ints({-1}, {1}));
  expect_near(e2.run()[0], {}, {0, 5});

  OpTest z("Slice");
  z.input("z", iota({4, 5})).input("starts", ints({0}, {1})).input("ends", ints({4}, {1}))
      .input("axes", ints({0}, {1})).input("steps", ints({0}, {1}));
  REQUIRE_THROWS_AS(z.run(), Error);

  OpTest bad_axis("Slice");
  bad_axis.input("z", iota({4, 5})).input("starts", ints({0}, {1})).input("ends", ints({4}, {1}))
      .input("axes", ints({2}, {1}));
  REQUIRE_THROWS_AS(bad_axis.run(), Error);
}
