// GridSample (2-D); expected values from onnxruntime 1.32 (opset 16) on
// X = arange(12).reshape(1, 1, 3, 4) * 1.5 - 2 and a grid with points
// inside, on the corners and outside [-1, 1].
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor grid_sample(const char* mode, const char* pad, int align, Tensor x = iota({1, 1, 3, 4}, 1.5f, -2.f)) {
  OpTest t("GridSample");
  t.input("x", std::move(x));
  t.input("grid", floats({-1, -1, 1, 1, 0, 0, 0.3f, -0.7f, -1.4f, 0.2f, 1.9f, -1.6f, 0.55f, 0.95f, -0.25f, 2.6f},
                         {1, 2, 4, 2}));
  t.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_string("padding_mode", pad));
  t.attr(Attribute::make_int("align_corners", align));
  return t.run()[0];
}
}  // namespace

TEST_CASE("GridSample bilinear with zeros padding", "[cpu][grid_sample]") {
  expect_near(grid_sample("bilinear", "zeros", 0), {-0.5f, 3.625f, 6.25f, 1.0925f, 0, 0, 7.992497f, 0}, {1, 1, 2, 4},
              1e-5f, 1e-5f);
  expect_near(grid_sample("linear", "zeros", 1), {-2, 14.5f, 6.25f, 2.725f, 2.08f, 0, 13.1875f, 0}, {1, 1, 2, 4},
              1e-5f, 1e-5f);
}

TEST_CASE("GridSample border and reflection padding, nearest mode", "[cpu][grid_sample]") {
  expect_near(grid_sample("nearest", "border", 1), {-2, 14.5f, 7, 1, 4, 2.5f, 13, 11.5f}, {1, 1, 2, 4});
  expect_near(grid_sample("bilinear", "border", 0), {-2, 14.5f, 6.25f, 1.15f, 5.8f, 2.5f, 13.9f, 11.5f}, {1, 1, 2, 4},
              1e-5f, 1e-5f);
  expect_near(grid_sample("bilinear", "reflection", 0), {-2, 14.5f, 6.25f, 1.15f, 6.25f, 2.95f, 13.9f, 0.1000023f},
              {1, 1, 2, 4}, 2e-5f, 1e-5f);
  expect_near(grid_sample("bilinear", "reflection", 1), {-2, 14.5f, 6.25f, 2.725f, 6.1f, 4.074999f, 13.1875f, 2.087501f},
              {1, 1, 2, 4}, 2e-5f, 1e-5f);
  expect_near(grid_sample("nearest", "reflection", 0), {-2, 14.5f, 7, 1, 4, 1, 14.5f, -0.5f}, {1, 1, 2, 4});
}

TEST_CASE("GridSample rejects cubic mode, unknown padding and a bad grid", "[cpu][grid_sample]") {
  REQUIRE_THROWS_WITH(grid_sample("bicubic", "zeros", 0), Catch::Contains("GridSample_node") && Catch::Contains("bicubic"));
  REQUIRE_THROWS_WITH(grid_sample("bilinear", "mirror", 0), Catch::Contains("GridSample_node"));
  REQUIRE_THROWS_WITH(grid_sample("bilinear", "zeros", 0, iota({2, 1, 3, 4})), Catch::Contains("grid"));
}
