// Elementwise kernels: unary functions, binary ops with numpy broadcasting,
// integer semantics, variadic Max/Min/Sum, Clip in both opset spellings.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor unary(const char* op, Tensor x) {
  OpTest t(op);
  t.input("x", std::move(x));
  return t.run()[0];
}
Tensor binary(const char* op, Tensor a, Tensor b) {
  OpTest t(op);
  t.input("a", std::move(a)).input("b", std::move(b));
  return t.run()[0];
}
const float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("unary float functions match libm values", "[cpu][elementwise]") {
  expect_near(unary("Sqrt", floats({0, 4, 2.25f}, {3})), {0, 2, 1.5f}, {3});
  expect_near(unary("Reciprocal", floats({2, -0.5f}, {2})), {0.5f, -2}, {2});
  // erf(0.5) = 0.5204998778, erf(-1) = -0.8427007929
  expect_near(unary("Erf", floats({0, 0.5f, -1}, {3})), {0, 0.5204998778f, -0.8427007929f}, {3});
  expect_near(unary("Tanh", floats({0, 1}, {2})), {0, 0.7615941560f}, {2});
  expect_near(unary("Exp", floats({0, 1}, {2})), {1, 2.7182818285f}, {2});
  expect_near(unary("Log", floats({1, 2.7182818285f}, {2})), {0, 1}, {2});
  expect_near(unary("Floor", floats({-1.5f, 1.5f, 2}, {3})), {-2, 1, 2}, {3});
  expect_near(unary("Sin", floats({0, 1.5707963268f}, {2})), {0, 1}, {2});
  expect_near(unary("Cos", floats({0, 3.1415926536f}, {2})), {1, -1}, {2});
  expect_near(unary("Neg", floats({1, -2}, {2})), {-1, 2}, {2});
  expect_near(unary("Abs", floats({-3, 2}, {2})), {3, 2}, {2});
  expect_near(unary("Relu", floats({-3, 0, 2}, {3})), {0, 0, 2}, {3});
}

TEST_CASE("Sigmoid is stable for large magnitudes", "[cpu][elementwise]") {
  Tensor y = unary("Sigmoid", floats({-1000, -1, 0, 1, 1000}, {5}));
  expect_near(y, {0, 0.2689414214f, 0.5f, 0.7310585786f, 1}, {5});
}

TEST_CASE("Gelu erf and tanh forms", "[cpu][elementwise]") {
  // 0.5*x*(1+erf(x/sqrt2)) at 1 = 0.8413447461; tanh form at 1 = 0.8411919906
  expect_near(unary("Gelu", floats({0, 1, -1}, {3})), {0, 0.8413447461f, -0.1586552539f}, {3});
  OpTest t("Gelu");
  t.input("x", floats({1}, {1})).attr(Attribute::make_string("approximate", "tanh"));
  expect_near(t.run()[0], {0.8411919906f}, {1});
}

TEST_CASE("integer unary ops keep the dtype", "[cpu][elementwise]") {
  expect_ints(unary("Neg", ints({3, -4}, {2})), DType::Int64, {-3, 4}, {2});
  expect_ints(unary("Abs", int32s({-7, 2}, {2})), DType::Int32, {7, 2}, {2});
  expect_ints(unary("Relu", ints({-7, 2}, {2})), DType::Int64, {0, 2}, {2});
}

TEST_CASE("binary ops broadcast like numpy", "[cpu][elementwise]") {
  // [2,3] + [3]
  expect_near(binary("Add", floats({1, 2, 3, 4, 5, 6}, {2, 3}), floats({10, 20, 30}, {3})),
              {11, 22, 33, 14, 25, 36}, {2, 3});
  // [2,1,3] * [4,1] -> [2,4,3]
  Tensor y = binary("Mul", floats({1, 2, 3, 4, 5, 6}, {2, 1, 3}), floats({1, 2, 3, 4}, {4, 1}));
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(static_cast<float>((i * 3 + k + 1) * (j + 1)));
  expect_near(y, want, {2, 4, 3});
  // scalar on the left, [1] on the right, and a rank-0 result
  expect_near(binary("Sub", floats({10}, {}), floats({1, 2}, {2})), {9, 8}, {2});
  expect_near(binary("Div", floats({1, 2}, {2}), floats({4}, {1})), {0.25f, 0.5f}, {2});
  expect_near(binary("Add", floats({1}, {}), floats({2}, {})), {3}, {});
}

TEST_CASE("broadcast mismatch names the node and both shapes", "[cpu][elementwise]") {
  try {
    binary("Add", floats({1, 2, 3, 4, 5, 6}, {2, 3}), floats({1, 2, 3, 4}, {2, 2}));
    FAIL("expected an Error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK(m.find("Add_node") != std::string::npos);
    CHECK(m.find("[2,3]") != std::string::npos);
    CHECK(m.find("[2,2]") != std::string::npos);
  }
}

TEST_CASE("integer Div truncates, Mod follows fmod", "[cpu][elementwise]") {
  expect_ints(binary("Div", ints({7, -7, 6}, {3}), ints({2}, {1})), DType::Int64, {3, -3, 3}, {3});
  expect_ints(binary("Mul", ints({3, 4}, {2}), ints({5}, {})), DType::Int64, {15, 20}, {2});
  // Python-style (sign of the divisor) with fmod=0; C fmod with fmod=1.
  expect_ints(binary("Mod", ints({7, -7, 7, -7}, {4}), ints({3, 3, -3, -3}, {4})), DType::Int64, {1, 2, -2, -1}, {4});
  OpTest t("Mod");
  t.input("a", floats({7, -7}, {2})).input("b", floats({3, 3}, {2})).attr(Attribute::make_int("fmod", 1));
  expect_near(t.run()[0], {1, -1}, {2});
  REQUIRE_THROWS_AS(binary("Div", ints({1}, {1}), ints({0}, {1})), Error);
}

TEST_CASE("Pow with same and mixed exponent dtypes", "[cpu][elementwise]") {
  expect_near(binary("Pow", floats({2, -3, 4}, {3}), floats({2}, {})), {4, 9, 16}, {3});
  expect_near(binary("Pow", floats({4, 9}, {2}), floats({0.5f}, {1})), {2, 3}, {2});
  expect_near(binary("Pow", floats({2, 3}, {2}), ints({3}, {})), {8, 27}, {2});
}

TEST_CASE("variadic Max/Min/Sum broadcast and propagate NaN", "[cpu][elementwise]") {
  OpTest t("Max");
  t.input("a", floats({1, 5, 3}, {3})).input("b", floats({2}, {1})).input("c", floats({0, 0, 4, 9, 9, kNaN}, {2, 3}));
  Tensor y = t.run()[0];
  REQUIRE(y.dims == std::vector<int64_t>{2, 3});
  CHECK(y.data<float>()[0] == 2);
  CHECK(y.data<float>()[1] == 5);
  CHECK(y.data<float>()[2] == 4);
  CHECK(y.data<float>()[3] == 9);
  CHECK(std::isnan(y.data<float>()[5]));
  expect_ints(binary("Min", ints({3, 1}, {2}), ints({2}, {1})), DType::Int64, {2, 1}, {2});
  OpTest s("Sum");
  s.input("a", floats({1, 2}, {2})).input("b", floats({10}, {1})).input("c", floats({100, 200}, {2}));
  expect_near(s.run()[0], {111, 212}, {2});
}

TEST_CASE("Clip: opset 11+ inputs, omitted min, opset 6 attributes", "[cpu][elementwise]") {
  OpTest a("Clip");
  a.input("x", floats({-2, 0.5f, 3}, {3})).input("min", floats({0}, {})).input("max", floats({1}, {}));
  expect_near(a.run()[0], {0, 0.5f, 1}, {3});
  OpTest b("Clip");
  b.input("x", floats({-2, 0.5f, 3}, {3})).omitted_input().input("max", floats({1}, {}));
  expect_near(b.run()[0], {-2, 0.5f, 1}, {3});
  OpTest c("Clip");
  c.input("x", floats({-2, 0.5f, 3}, {3})).attr(Attribute::make_float("min", -1)).attr(Attribute::make_float("max", 2));
  expect_near(c.run()[0], {-1, 0.5f, 2}, {3});
  OpTest d("Clip");
  d.input("x", ints({-5, 5}, {2})).input("min", ints({0}, {}));
  expect_ints(d.run()[0], DType::Int64, {0, 5}, {2});
}
