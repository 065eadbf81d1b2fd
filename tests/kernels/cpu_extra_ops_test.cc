// Less common exporter ops on the CPU reference backend: Selu, Celu, Mish,
// ThresholdedRelu, Shrink, IsInf (values from numpy), ArgMax/ArgMin and TopK
// (hand-worked on small rows: ties, NaN, axis 0, int64).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
const std::vector<float> kActIn = {-3, -1, -0.25f, 0, 0.5f, 1, 2.5f, 25};

Tensor act(const char* op, std::vector<Attribute> attrs = {}) {
  OpTest t(op);
  t.input("x", floats(kActIn, {2, 4}));
  for (Attribute& a : attrs) t.attr(std::move(a));
  return t.run()[0];
}
}  // namespace

TEST_CASE("Selu, Celu, Mish, ThresholdedRelu, Shrink match numpy", "[cpu][extra_ops]") {
  // 1.0507009873554805 * where(x > 0, x, 1.6732632423543772 * expm1(x))
  expect_near(act("Selu"), {-1.670569f, -1.111331f, -0.3888902f, 0, 0.5253505f, 1.050701f, 2.626752f, 26.26752f},
              {2, 4}, 1e-6f, 2e-6f);
  // max(0, x) + min(0, 2 * expm1(x / 2))
  expect_near(act("Celu", {Attribute::make_float("alpha", 2.f)}),
              {-1.55374f, -0.7869387f, -0.2350062f, 0, 0.5f, 1, 2.5f, 25}, {2, 4}, 1e-6f, 2e-6f);
  // x * tanh(log1p(exp(x)))
  expect_near(act("Mish"), {-0.1456475f, -0.3034015f, -0.129927f, 0, 0.3752452f, 0.8650984f, 2.471392f, 25}, {2, 4},
              1e-6f, 2e-6f);
  expect_near(act("ThresholdedRelu", {Attribute::make_float("alpha", 0.5f)}), {0, 0, 0, 0, 0, 1, 2.5f, 25}, {2, 4});
  expect_near(act("Shrink", {Attribute::make_float("lambd", 0.75f), Attribute::make_float("bias", 0.25f)}),
              {-2.75f, -0.75f, 0, 0, 0, 0.75f, 2.25f, 24.75f}, {2, 4});
  REQUIRE_THROWS_WITH(act("Celu", {Attribute::make_float("alpha", 0.f)}), Catch::Contains("Celu_node"));
}

TEST_CASE("IsInf with detect_negative / detect_positive", "[cpu][extra_ops]") {
  const float inf = std::numeric_limits<float>::infinity();
  auto run = [&](int neg, int pos) {
    OpTest t("IsInf");
    t.input("x", floats({1, inf, -inf, std::nanf(""), -0.f}, {5}));
    t.attr(Attribute::make_int("detect_negative", neg)).attr(Attribute::make_int("detect_positive", pos));
    return t.run()[0];
  };
  expect_ints(run(1, 1), DType::Bool, {0, 1, 1, 0, 0}, {5});
  expect_ints(run(0, 1), DType::Bool, {0, 1, 0, 0, 0}, {5});
  expect_ints(run(1, 0), DType::Bool, {0, 0, 1, 0, 0}, {5});
}

namespace {
// Rows with ties: [3 1 4 1 5 9 2 6] and [5 3 5 8 9 7 9 3].
Tensor tie_rows() { return floats({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}, {2, 8}); }

Tensor arg(const char* op, Tensor x, int64_t axis, int keepdims, int last) {
  OpTest t(op);
  t.input("x", std::move(x));
  t.attr(Attribute::make_int("axis", axis)).attr(Attribute::make_int("keepdims", keepdims));
  t.attr(Attribute::make_int("select_last_index", last));
  return t.run()[0];
}

std::vector<Tensor> topk(Tensor x, int64_t k, int64_t axis, int largest) {
  OpTest t("TopK");
  t.input("x", std::move(x)).const_input("k", ints({k}, {1}));
  t.attr(Attribute::make_int("axis", axis)).attr(Attribute::make_int("largest", largest));
  t.num_outputs(2);
  return t.run();
}
}  // namespace

TEST_CASE("ArgMax / ArgMin: axis, keepdims, ties, select_last_index, NaN", "[cpu][extra_ops]") {
  expect_ints(arg("ArgMax", tie_rows(), 1, 1, 0), DType::Int64, {5, 4}, {2, 1});
  expect_ints(arg("ArgMax", tie_rows(), -1, 0, 1), DType::Int64, {5, 6}, {2});
  expect_ints(arg("ArgMin", tie_rows(), 1, 0, 0), DType::Int64, {1, 1}, {2});
  expect_ints(arg("ArgMin", tie_rows(), 1, 0, 1), DType::Int64, {3, 7}, {2});
  expect_ints(arg("ArgMax", tie_rows(), 0, 0, 0), DType::Int64, {1, 1, 1, 1, 1, 0, 1, 0}, {8});
  expect_ints(arg("ArgMax", ints({4, -2, 4}, {3}), 0, 1, 0), DType::Int64, {0}, {1});
  const float nan = std::nanf("");
  expect_ints(arg("ArgMax", floats({1, nan, 3, nan}, {4}), 0, 0, 0), DType::Int64, {1}, {});
  expect_ints(arg("ArgMin", floats({1, nan, 3, nan}, {4}), 0, 0, 0), DType::Int64, {1}, {});
  REQUIRE_THROWS_WITH(arg("ArgMax", tie_rows(), 2, 1, 0), Catch::Contains("ArgMax_node"));
}

TEST_CASE("TopK: largest / smallest, ties to the lower index, axis 0, int64, NaN", "[cpu][extra_ops]") {
  std::vector<Tensor> big = topk(tie_rows(), 3, -1, 1);
  expect_near(big[0], {9, 6, 5, 9, 9, 8}, {2, 3});
  expect_ints(big[1], DType::Int64, {5, 7, 4, 4, 6, 3}, {2, 3});
  std::vector<Tensor> small = topk(tie_rows(), 3, 1, 0);
  expect_near(small[0], {1, 1, 2, 3, 3, 5}, {2, 3});
  expect_ints(small[1], DType::Int64, {1, 3, 6, 1, 7, 0}, {2, 3});
  std::vector<Tensor> col = topk(tie_rows(), 1, 0, 1);
  expect_near(col[0], {5, 3, 5, 8, 9, 9, 9, 6}, {1, 8});
  expect_ints(col[1], DType::Int64, {1, 1, 1, 1, 1, 0, 1, 0}, {1, 8});
  std::vector<Tensor> i64 = topk(ints({-5, 7, 7, 0}, {1, 4}), 2, -1, 1);
  expect_ints(i64[0], DType::Int64, {7, 7}, {1, 2});
  expect_ints(i64[1], DType::Int64, {1, 2}, {1, 2});
  const float nan = std::nanf("");
  std::vector<Tensor> nl = topk(floats({1, nan, 3, nan}, {4}), 2, 0, 1);
  REQUIRE((std::isnan(nl[0].data<float>()[0]) && std::isnan(nl[0].data<float>()[1])));
  expect_ints(nl[1], DType::Int64, {1, 3}, {2});
  std::vector<Tensor> ns = topk(floats({1, nan, 3, nan}, {4}), 2, 0, 0);
  expect_near(ns[0], {1, 3}, {2});
  expect_ints(ns[1], DType::Int64, {0, 2}, {2});
  std::vector<Tensor> none = topk(tie_rows(), 0, 1, 1);
  REQUIRE(shape_str(none[0].dims) == shape_str({2, 0}));
}

TEST_CASE("TopK with K larger than the axis is a one-line Error naming the node", "[cpu][extra_ops]") {
  REQUIRE_THROWS_WITH(topk(tie_rows(), 9, -1, 1), Catch::Contains("TopK_node") && Catch::Contains("K = 9"));
  REQUIRE_THROWS_WITH(topk(tie_rows(), -1, -1, 1), Catch::Contains("TopK_node"));
}

TEST_CASE("Sinh, Cosh, Asin, Acos, Asinh, Acosh, Atanh match numpy", "[cpu][extra_ops]") {
  auto run = [](const char* op, std::vector<float> x) {
    OpTest t(op);
    t.input("x", floats(std::move(x), {2, 3}));
    return t.run()[0];
  };
  const std::vector<float> x = {-0.9f, -0.5f, 0, 0.3f, 0.75f, 0.99f};
  const float tol = 2e-6f;
  expect_near(run("Sinh", x), {-1.026517f, -0.5210953f, 0, 0.3045203f, 0.8223167f, 1.159829f}, {2, 3}, tol, tol);
  expect_near(run("Cosh", x), {1.433086f, 1.127626f, 1, 1.045339f, 1.294683f, 1.531406f}, {2, 3}, tol, tol);
  expect_near(run("Asin", x), {-1.11977f, -0.5235988f, 0, 0.3046927f, 0.8480621f, 1.429257f}, {2, 3}, tol, tol);
  expect_near(run("Acos", x), {2.690566f, 2.094395f, 1.570796f, 1.266104f, 0.7227342f, 0.1415395f}, {2, 3}, tol, tol);
  expect_near(run("Asinh", x), {-0.8088669f, -0.4812118f, 0, 0.295673f, 0.6931472f, 0.8742848f}, {2, 3}, tol, tol);
  expect_near(run("Atanh", x), {-1.472219f, -0.5493061f, 0, 0.3095196f, 0.9729551f, 2.646652f}, {2, 3}, tol, tol);
  expect_near(run("Acosh", {1, 1.5f, 2, 3, 10, 100}), {0, 0.9624237f, 1.316958f, 1.762747f, 2.993223f, 5.298292f},
              {2, 3}, tol, tol);
}

TEST_CASE("BitwiseAnd/Or/Xor with broadcasting, BitwiseNot, BitShift", "[cpu][extra_ops]") {
  auto bin = [](const char* op, Tensor a, Tensor b, const char* dir = nullptr) {
    OpTest t(op);
    t.input("a", std::move(a)).input("b", std::move(b));
    if (dir) t.attr(Attribute::make_string("direction", dir));
    return t.run()[0];
  };
  const Tensor a = ints({12, -1, 5, 0, 7, 255}, {2, 3});
  const Tensor b = ints({10, 6, -8}, {3});
  expect_ints(bin("BitwiseAnd", a, b), DType::Int64, {8, 6, 0, 0, 6, 248}, {2, 3});
  expect_ints(bin("BitwiseOr", a, b), DType::Int64, {14, -1, -3, 10, 7, -1}, {2, 3});
  expect_ints(bin("BitwiseXor", a, b), DType::Int64, {6, -7, -3, 10, 1, -249}, {2, 3});
  OpTest n("BitwiseNot");
  n.input("x", int32s({0, -1, 5}, {3}));
  expect_ints(n.run()[0], DType::Int32, {-1, 0, -6}, {3});
  auto u8 = [](std::vector<int> v) {
    Tensor t(DType::UInt8, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
    return t;
  };
  expect_ints(bin("BitShift", u8({1, 3, 255, 16}), u8({1, 7, 4, 8}), "LEFT"), DType::UInt8, {2, 128, 240, 0}, {4});
  expect_ints(bin("BitShift", u8({1, 200, 255, 16}), u8({1, 3, 4, 9}), "RIGHT"), DType::UInt8, {0, 25, 15, 0}, {4});
  REQUIRE_THROWS_WITH(bin("BitShift", a, b, "LEFT"), Catch::Contains("BitShift_node") && Catch::Contains("unsigned"));
  REQUIRE_THROWS_WITH(bin("BitShift", u8({1}), u8({1}), "UP"), Catch::Contains("direction"));
  REQUIRE_THROWS_WITH(bin("BitwiseAnd", a, int32s({1, 2, 3}, {3})), Catch::Contains("BitwiseAnd_node"));
}
