// The FMA-pipe 2^x of the Hopper attention's softmax (kernels/common/exp2_poly.h), evaluated on
// the host by the same bit-level formula, against double exp2.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/common/exp2_poly.h"

TEST_CASE("exp2_poly3: within 7.6e-5 relative of 2^x on [-126, 1]", "[exp2_poly]") {
  double worst = 0;
  int checked = 0;
  for (int i = -12600000; i <= 100000; i += 3) {
    const float x = float(i) * 1e-5f;  // steps far finer than the fraction's period
    const double ref = std::exp2(double(x));
    const double got = double(fuseopt::dm::exp2_poly3(x));
    worst = std::fmax(worst, std::fabs(got - ref) / ref);
    ++checked;
  }
  INFO("worst relative error " << worst << " over " << checked << " points");
  CHECK(worst <= 7.6e-5);
  CHECK(worst > 1e-5);  // the grid reaches where the fit's error is: not a vacuous bound
}

TEST_CASE("exp2_poly3: integers are exact to the fit, the rounding boundary is continuous", "[exp2_poly]") {
  using fuseopt::dm::exp2_poly3;
  for (int j = -126; j <= 1; ++j) CHECK(std::fabs(exp2_poly3(float(j)) / std::exp2(double(j)) - 1) <= 7.6e-5);
  // x = j + 0.5 rounds one way, the next float below it the other: both sides agree to the fit.
  for (float x : {-0.5f, -3.5f, -20.5f}) {
    const float below = std::nextafter(x, -1000.f);
    CHECK(std::fabs(double(exp2_poly3(x)) / double(exp2_poly3(below)) - 1) <= 2e-4);
  }
}

TEST_CASE("exp2_poly3: below the clamp, NaN and infinities", "[exp2_poly]") {
  using fuseopt::dm::exp2_poly3;
  for (float x : {-126.5f, -127.f, -200.f, -1e30f, -std::numeric_limits<float>::infinity()}) {
    const float y = exp2_poly3(x);
    CHECK(y >= 0.f);
    CHECK(y <= 1.2e-38f);
  }
  CHECK(std::isnan(exp2_poly3(std::numeric_limits<float>::quiet_NaN())));
  CHECK(exp2_poly3(0.f) == Approx(1.0).epsilon(7.6e-5));
}
