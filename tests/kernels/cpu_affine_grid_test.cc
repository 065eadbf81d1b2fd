// AffineGrid (opset 20, 2-D) on the CPU reference backend; expected values
// from the onnx package's ReferenceEvaluator (theta [[1, .5, .1], [-.2, 2, 0]],
// size [1, 1, 2, 3]). onnxruntime comparisons: tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor affine_grid(int align, Tensor size = ints({1, 1, 2, 3}, {4})) {
  OpTest t("AffineGrid");
  t.input("theta", floats({1, 0.5f, 0.1f, -0.2f, 2, 0}, {1, 2, 3})).const_input("size", std::move(size));
  t.attr(Attribute::make_int("align_corners", align));
  return t.run()[0];
}
}  // namespace

TEST_CASE("AffineGrid with and without align_corners", "[cpu][affine_grid]") {
  expect_near(affine_grid(0),
              {-0.8166667f, -0.8666667f, -0.15f, -1, 0.5166667f, -1.133333f, -0.3166667f, 1.133333f, 0.35f, 1,
               1.016667f, 0.8666667f},
              {1, 2, 3, 2}, 1e-6f, 1e-5f);
  expect_near(affine_grid(1), {-1.4f, -1.8f, -0.4f, -2, 0.6f, -2.2f, -0.4f, 2.2f, 0.6f, 2, 1.6f, 1.8f}, {1, 2, 3, 2},
              1e-6f, 1e-5f);
}

TEST_CASE("AffineGrid rejects 3-D sizes and a theta of the wrong shape", "[cpu][affine_grid]") {
  REQUIRE_THROWS_WITH(affine_grid(0, ints({1, 1, 2, 3, 4}, {5})), Catch::Contains("AffineGrid_node") && Catch::Contains("2-D"));
  REQUIRE_THROWS_WITH(affine_grid(0, ints({2, 1, 2, 3}, {4})), Catch::Contains("AffineGrid_node") && Catch::Contains("theta"));
}
