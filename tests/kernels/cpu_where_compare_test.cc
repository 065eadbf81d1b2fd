// Where, comparisons, boolean logic and IsNaN, with numpy broadcasting.
// Expected values hand-computed (np.where / np.less ... give the same).
#include <catch2/catch.hpp>

#include <limits>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor halfs(std::vector<float> v, std::vector<int64_t> dims) {
  Tensor t(DType::Float16, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = float_to_half(v[i]);
  return t;
}
Tensor binary(const char* op, Tensor a, Tensor b) {
  OpTest t(op);
  t.input("a", std::move(a)).input("b", std::move(b));
  return t.run()[0];
}
}  // namespace

TEST_CASE("Where broadcasts condition, X and Y", "[cpu][where]") {
  OpTest t("Where");
  t.input("c", bools({1, 0}, {2, 1})).input("x", iota({2, 3})).input("y", floats({-1, -2, -3}, {3}));
  expect_near(t.run()[0], {0, 1, 2, -1, -2, -3}, {2, 3});

  OpTest s("Where");
  s.input("c", bools({1}, {})).input("x", ints({1, 2}, {2})).input("y", ints({5}, {1}));
  expect_ints(s.run()[0], DType::Int64, {1, 2}, {2});

  OpTest h("Where");
  h.input("c", bools({0, 1, 0}, {3})).input("x", halfs({1, 2, 3}, {3})).input("y", halfs({-1}, {1}));
  Tensor out = h.run()[0];
  REQUIRE(out.dtype == DType::Float16);
  CHECK(out.as_double(0) == -1.0);
  CHECK(out.as_double(1) == 2.0);
  CHECK(out.as_double(2) == -1.0);

  OpTest bad("Where");
  bad.input("c", bools({1, 0}, {2})).input("x", iota({3})).input("y", iota({3}));
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("Comparisons broadcast [2,1] against [3]", "[cpu][compare]") {
  auto a = [] { return floats({1, 5}, {2, 1}); };
  auto b = [] { return floats({0, 1, 6}, {3}); };
  expect_ints(binary("Less", a(), b()), DType::Bool, {0, 0, 1, 0, 0, 1}, {2, 3});
  expect_ints(binary("LessOrEqual", a(), b()), DType::Bool, {0, 1, 1, 0, 0, 1}, {2, 3});
  expect_ints(binary("Greater", a(), b()), DType::Bool, {1, 0, 0, 1, 1, 0}, {2, 3});
  expect_ints(binary("GreaterOrEqual", a(), b()), DType::Bool, {1, 1, 0, 1, 1, 0}, {2, 3});
  expect_ints(binary("Equal", a(), b()), DType::Bool, {0, 1, 0, 0, 0, 0}, {2, 3});
}

TEST_CASE("Equal on int64, int32 and bool; NaN is never equal", "[cpu][compare]") {
  expect_ints(binary("Equal", ints({1, 2, 3}, {3}), ints({2}, {1})), DType::Bool, {0, 1, 0}, {3});
  expect_ints(binary("Equal", int32s({-1, 0}, {2}), int32s({0, 0}, {2})), DType::Bool, {0, 1}, {2});
  expect_ints(binary("Equal", bools({1, 0}, {2}), bools({0}, {})), DType::Bool, {0, 1}, {2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_ints(binary("Equal", floats({nan, 1}, {2}), floats({nan, 1}, {2})), DType::Bool, {0, 1}, {2});
  REQUIRE_THROWS_AS(binary("Equal", ints({1}, {1}), floats({1}, {1})), Error);
  REQUIRE_THROWS_AS(binary("Less", iota({2}), iota({3})), Error);
}

TEST_CASE("float16 comparisons compare values, not bits", "[cpu][compare]") {
  // As raw bits -2.0 (0xC000) > 2.0 (0x4000); as numbers it is less.
  expect_ints(binary("Less", halfs({1, -2, 3}, {3}), halfs({2}, {1})), DType::Bool, {1, 1, 0}, {3});
  expect_ints(binary("GreaterOrEqual", halfs({1, -2, 2}, {3}), halfs({2}, {1})), DType::Bool, {0, 0, 1}, {3});
}

TEST_CASE("And, Or, Xor broadcast; Not", "[cpu][logic]") {
  auto a = [] { return bools({1, 0}, {2, 1}); };
  auto b = [] { return bools({1, 0, 1}, {3}); };
  expect_ints(binary("And", a(), b()), DType::Bool, {1, 0, 1, 0, 0, 0}, {2, 3});
  expect_ints(binary("Or", a(), b()), DType::Bool, {1, 1, 1, 1, 0, 1}, {2, 3});
  expect_ints(binary("Xor", a(), b()), DType::Bool, {0, 1, 0, 1, 0, 1}, {2, 3});
  OpTest n("Not");
  n.input("x", bools({1, 0, 1}, {3}));
  expect_ints(n.run()[0], DType::Bool, {0, 1, 0}, {3});
  REQUIRE_THROWS_AS(binary("And", ints({1}, {1}), ints({1}, {1})), Error);
}

TEST_CASE("IsNaN on float32 and float16", "[cpu][logic]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  OpTest f("IsNaN");
  f.input("x", floats({1, nan, inf, -0.f}, {2, 2}));
  expect_ints(f.run()[0], DType::Bool, {0, 1, 0, 0}, {2, 2});
  OpTest h("IsNaN");
  h.input("x", halfs({nan, 2}, {2}));
  expect_ints(h.run()[0], DType::Bool, {1, 0}, {2});
}
