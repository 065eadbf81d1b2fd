// ONNX RMSNormalization (opset 23); expected values from numpy:
//   x / sqrt((x * x).mean(axis=(axis..), keepdims=True) + eps) * scale
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor rms(Tensor x, Tensor scale, int64_t axis, float eps) {
  OpTest t("RMSNormalization");
  t.input("x", std::move(x)).input("scale", std::move(scale));
  t.attr(Attribute::make_int("axis", axis)).attr(Attribute::make_float("epsilon", eps));
  return t.run()[0];
}
}  // namespace

TEST_CASE("RMSNormalization over the last axis", "[cpu][rms_normalization]") {
  expect_near(rms(floats({1, 2, 3, 4, -1, 0, 0.5f, 2}, {2, 4}), floats({1, 0.5f, 2, -1}, {4}), -1, 1e-5f),
              {0.3651481f, 0.3651481f, 2.190889f, -1.460593f, -0.8728682f, 0.f, 0.8728682f, -1.745736f}, {2, 4});
}

TEST_CASE("RMSNormalization over two axes with a broadcast scale", "[cpu][rms_normalization]") {
  expect_near(rms(iota({2, 2, 3}, 1.f, -4.f), floats({1, 2, -1}, {1, 3}), -2, 1e-3f),
              {-1.759595f, -2.639393f, 0.8797976f, -0.4398988f, 0.f, -0.4398988f, 0.415517f, 1.246551f, -0.8310341f,
               1.038793f, 2.493102f, -1.45431f},
              {2, 2, 3});
}

TEST_CASE("RMSNormalization rejects a scale that does not broadcast", "[cpu][rms_normalization]") {
  REQUIRE_THROWS_WITH(rms(iota({2, 4}), floats({1, 1, 1}, {3}), -1, 1e-5f), Catch::Contains("RMSNormalization_node"));
}
