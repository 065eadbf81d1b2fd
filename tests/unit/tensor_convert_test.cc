// Host-side float -> half/bfloat16 conversions: rounding, specials, and the
// saturating variants used when weights are narrowed to a compute precision.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>

#include "ir/tensor.h"

using namespace fuseopt;

TEST_CASE("float_to_bf16 rounds to nearest even and keeps specials", "[unit][tensor]") {
  CHECK(bf16_to_float(float_to_bf16(1.0f)) == 1.0f);
  CHECK(bf16_to_float(float_to_bf16(1.00390625f)) == 1.0f);      // halfway, even stays
  CHECK(bf16_to_float(float_to_bf16(1.01171875f)) == 1.015625f);  // halfway, odd rounds up
  CHECK(std::isinf(bf16_to_float(float_to_bf16(-INFINITY))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  // The reason for the _finite variant: FLT_MAX rounds up past the largest bfloat16.
  CHECK(std::isinf(bf16_to_float(float_to_bf16(-FLT_MAX))));
}

TEST_CASE("narrowing to a compute precision keeps finite values finite", "[unit][tensor]") {
  const float bf16_max = bf16_to_float(0x7f7f);
  CHECK(bf16_to_float(float_to_bf16_finite(-FLT_MAX)) == -bf16_max);
  CHECK(bf16_to_float(float_to_bf16_finite(FLT_MAX)) == bf16_max);
  CHECK(half_to_float(float_to_half_finite(-FLT_MAX)) == -65504.0f);
  CHECK(half_to_float(float_to_half_finite(1e5f)) == 65504.0f);
  // Infinities and NaN are the model's own: they pass through.
  CHECK(std::isinf(bf16_to_float(float_to_bf16_finite(-INFINITY))));
  CHECK(std::isinf(half_to_float(float_to_half_finite(INFINITY))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16_finite(NAN))));
  CHECK(std::isnan(half_to_float(float_to_half_finite(NAN))));
  // In range: same as plain rounding.
  for (float v : {0.0f, -0.0f, 3.14159f, -2.5e-3f, 1e30f, -1e-30f}) {
    CHECK(float_to_bf16_finite(v) == float_to_bf16(v));
    if (std::fabs(v) < 65504.0f) CHECK(float_to_half_finite(v) == float_to_half(v));
  }
}
