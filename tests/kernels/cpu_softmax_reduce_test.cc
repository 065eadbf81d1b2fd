// Softmax/LogSoftmax (stable, any axis), reductions (axes as attribute or
// input, negative axes, keepdims, empty axes) and CumSum, against numpy.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu_math_refs.h"
#include "kernels/cpu_math_test_util.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace cpu_math_refs;

TEST_CASE("Softmax along the last axis and axis 0", "[cpu][softmax]") {
  OpTest t("Softmax");
  t.input("x", pat({2, 3}));
  expect_near(t.run()[0], k_softmax_last, {2, 3});
  OpTest t0("Softmax");
  t0.input("x", pat({2, 3})).attr(Attribute::make_int("axis", 0));
  expect_near(t0.run()[0], k_softmax_0, {2, 3});
  OpTest l("LogSoftmax");
  l.input("x", pat({2, 3})).attr(Attribute::make_int("axis", -1));
  expect_near(l.run()[0], k_logsoftmax_last, {2, 3});
}

TEST_CASE("Softmax subtracts the max: huge logits do not overflow", "[cpu][softmax]") {
  OpTest t("Softmax");
  t.input("x", floats({1000, 1001, -3.4e38f, 1000}, {1, 4}));
  // e^-1 / (1 + 2e^-1) and 1 / (1 + 2e^-1)
  expect_near(t.run()[0], {0.2119416f, 0.5761169f, 0, 0.2119416f}, {1, 4}, 1e-6f, 1e-5f);
}

TEST_CASE("ReduceMean with negative axes as attribute, keepdims", "[cpu][reduce]") {
  OpTest t("ReduceMean");
  t.input("x", pat({2, 3, 4})).attr(Attribute::make_ints("axes", {-1, -3}));
  expect_near(t.run()[0], k_rmean_m1_m3, {1, 3, 1});
}

TEST_CASE("ReduceSum with axes as input (opset 13), keepdims=0", "[cpu][reduce]") {
  OpTest t("ReduceSum");
  t.input("x", pat({2, 3, 4})).input("axes", ints({1}, {1})).attr(Attribute::make_int("keepdims", 0));
  expect_near(t.run()[0], k_rsum_1, {2, 4});
  // ReduceMean with axes as input (opset 18 spelling) and a negative axis
  OpTest m("ReduceMean");
  m.input("x", floats({1, 2, 3, 4}, {2, 2})).input("axes", ints({-1}, {1}));
  expect_near(m.run()[0], {1.5f, 3.5f}, {2, 1});
}

TEST_CASE("empty axes reduce everything unless noop_with_empty_axes", "[cpu][reduce]") {
  OpTest t("ReduceSum");
  t.input("x", pat({2, 3, 4})).attr(Attribute::make_int("keepdims", 0));
  expect_near(t.run()[0], k_rsum_all, {}, 1e-5f, 1e-4f);
  OpTest e("ReduceSum");
  e.input("x", pat({2, 3, 4})).input("axes", ints({}, {0})).attr(Attribute::make_int("keepdims", 1));
  expect_near(e.run()[0], k_rsum_all, {1, 1, 1}, 1e-5f, 1e-4f);
  OpTest n("ReduceSum");
  n.input("x", floats({1, 2}, {2})).input("axes", ints({}, {0})).attr(Attribute::make_int("noop_with_empty_axes", 1));
  expect_near(n.run()[0], {1, 2}, {2});
}

TEST_CASE("ReduceMax over a middle axis; ints", "[cpu][reduce]") {
  OpTest t("ReduceMax");
  t.input("x", pat({2, 3, 4})).attr(Attribute::make_ints("axes", {1}));
  expect_near(t.run()[0], k_rmax_1, {2, 1, 4});
  OpTest i("ReduceMax");
  i.input("x", ints({1, 9, 3, 4}, {2, 2})).attr(Attribute::make_ints("axes", {0})).attr(Attribute::make_int("keepdims", 0));
  expect_ints(i.run()[0], DType::Int64, {3, 9}, {2});
}

TEST_CASE("bad reduce axis is an Error naming the node", "[cpu][reduce]") {
  OpTest t("ReduceMean");
  t.input("x", pat({2, 3})).attr(Attribute::make_ints("axes", {2}));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("ReduceMean_node") && Catch::Contains("axis 2"));
}

TEST_CASE("CumSum: axis input, negative axis, exclusive, reverse", "[cpu][cumsum]") {
  OpTest t("CumSum");
  t.input("x", floats({1, 2, 3, 4, 5, 6}, {2, 3})).input("axis", ints({-1}, {}));
  expect_near(t.run()[0], {1, 3, 6, 4, 9, 15}, {2, 3});
  OpTest a0("CumSum");
  a0.input("x", floats({1, 2, 3, 4, 5, 6}, {2, 3})).input("axis", int32s({0}, {}));
  expect_near(a0.run()[0], {1, 2, 3, 5, 7, 9}, {2, 3});
  OpTest ex("CumSum");
  ex.input("x", ints({1, 2, 3}, {3})).input("axis", ints({0}, {})).attr(Attribute::make_int("exclusive", 1)).attr(
      Attribute::make_int("reverse", 1));
  expect_ints(ex.run()[0], DType::Int64, {5, 3, 0}, {3});
}
