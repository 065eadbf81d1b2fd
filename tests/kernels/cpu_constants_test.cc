// Constant (every attribute spelling), ConstantOfShape, Range.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor constant(Attribute a) {
  OpTest t("Constant");
  t.attr(std::move(a));
  return t.run()[0];
}
Tensor range(Tensor s, Tensor l, Tensor d) {
  OpTest t("Range");
  t.input("start", std::move(s)).input("limit", std::move(l)).input("delta", std::move(d));
  return t.run()[0];
}
}  // namespace

TEST_CASE("Constant value, value_float(s), value_int(s)", "[cpu][constants]") {
  expect_ints(constant(Attribute::make_tensor("value", ints({1, 2}, {2}))), DType::Int64, {1, 2}, {2});
  expect_near(constant(Attribute::make_tensor("value", floats({1, 2, 3, 4}, {2, 2}))), {1, 2, 3, 4}, {2, 2});
  expect_near(constant(Attribute::make_float("value_float", 2.5f)), {2.5f}, {});
  expect_near(constant(Attribute::make_floats("value_floats", {1, -2})), {1, -2}, {2});
  expect_ints(constant(Attribute::make_int("value_int", 7)), DType::Int64, {7}, {});
  expect_ints(constant(Attribute::make_ints("value_ints", {3, 4})), DType::Int64, {3, 4}, {2});
  OpTest none("Constant");
  REQUIRE_THROWS_AS(none.run(), Error);
}

TEST_CASE("ConstantOfShape: value dtype, default float 0, scalar shape", "[cpu][constants]") {
  OpTest t("ConstantOfShape");
  t.input("shape", ints({2, 3}, {2})).attr(Attribute::make_tensor("value", ints({7}, {1})));
  expect_ints(t.run()[0], DType::Int64, {7, 7, 7, 7, 7, 7}, {2, 3});

  OpTest z("ConstantOfShape");
  z.input("shape", ints({2, 1}, {2}));
  expect_near(z.run()[0], {0, 0}, {2, 1});

  OpTest s("ConstantOfShape");
  s.input("shape", ints({}, {0})).attr(Attribute::make_tensor("value", floats({1.5f}, {1})));
  expect_near(s.run()[0], {1.5f}, {});

  OpTest e("ConstantOfShape");
  e.input("shape", ints({0, 4}, {2}));
  expect_near(e.run()[0], {}, {0, 4});

  OpTest bad("ConstantOfShape");
  bad.input("shape", ints({-1}, {1}));
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("Range on int64, int32 and float, including empty and negative delta", "[cpu][constants]") {
  expect_ints(range(ints({0}, {}), ints({10}, {}), ints({3}, {})), DType::Int64, {0, 3, 6, 9}, {4});
  expect_ints(range(ints({5}, {}), ints({1}, {}), ints({1}, {})), DType::Int64, {}, {0});
  expect_ints(range(int32s({10}, {}), int32s({4}, {}), int32s({-3}, {})), DType::Int32, {10, 7}, {2});
  expect_near(range(Tensor::scalar_float(1), Tensor::scalar_float(0), Tensor::scalar_float(-0.25f)),
              {1, 0.75f, 0.5f, 0.25f}, {4});
  expect_near(range(Tensor::scalar_float(0), Tensor::scalar_float(1), Tensor::scalar_float(0.3f)),
              {0, 0.3f, 0.6f, 0.9f}, {4});
  REQUIRE_THROWS_AS(range(ints({0}, {}), ints({3}, {}), ints({0}, {})), Error);
  REQUIRE_THROWS_AS(range(ints({0}, {}), Tensor::scalar_float(3), ints({1}, {})), Error);
}
