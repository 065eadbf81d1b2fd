// LpNormalization, MeanVarianceNormalization and LRN on the CPU reference
// backend; expected values from numpy (the ONNX formulas; a zero Lp norm
// gives 0 as in onnxruntime). onnxruntime comparisons: tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("LpNormalization p = 2 and p = 1, zero rows stay 0", "[cpu][norm_extra]") {
  OpTest l2("LpNormalization");
  l2.input("x", floats({0, 0, 0, 3, 4, 0}, {2, 3}));
  expect_near(l2.run()[0], {0, 0, 0, 0.6f, 0.8f, 0}, {2, 3});
  OpTest l1("LpNormalization");
  l1.input("x", floats({0, 0, 0, 3, -4, 1}, {2, 3})).attr(Attribute::make_int("p", 1)).attr(Attribute::make_int("axis", 1));
  expect_near(l1.run()[0], {0, 0, 0, 0.375f, -0.5f, 0.125f}, {2, 3});
  OpTest bad("LpNormalization");
  bad.input("x", iota({2, 3})).attr(Attribute::make_int("p", 3));
  REQUIRE_THROWS_WITH(bad.run(), Catch::Contains("LpNormalization_node"));
}

TEST_CASE("MeanVarianceNormalization over the default axes [0, 2, 3]", "[cpu][norm_extra]") {
  OpTest t("MeanVarianceNormalization");
  t.input("x", floats({1, 1, 1, 1, 1, 2, 3, 4}, {2, 1, 2, 2}));
  // mean 1.75, std sqrt(1.1875)
  expect_near(t.run()[0],
              {-0.6882472f, -0.6882472f, -0.6882472f, -0.6882472f, -0.6882472f, 0.22941573f, 1.1470786f, 2.0647416f},
              {2, 1, 2, 2});
}

TEST_CASE("LRN across channels", "[cpu][norm_extra]") {
  OpTest t("LRN");
  t.input("x", floats({1, 2, 3, 4, 5, 6}, {1, 3, 2}));
  t.attr(Attribute::make_int("size", 3)).attr(Attribute::make_float("alpha", 0.1f));
  t.attr(Attribute::make_float("beta", 0.75f)).attr(Attribute::make_float("bias", 2.f));
  expect_near(t.run()[0], {0.5296847f, 0.9584147f, 1.263774f, 1.450633f, 2.123074f, 2.233977f}, {1, 3, 2}, 1e-6f, 1e-5f);
  OpTest no_size("LRN");
  no_size.input("x", iota({1, 3, 2}));
  REQUIRE_THROWS_WITH(no_size.run(), Catch::Contains("LRN_node") && Catch::Contains("size"));
}
