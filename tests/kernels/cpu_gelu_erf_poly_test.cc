// The polynomial erf-GELU of the CUDA kernels' 16-bit outputs (kernels/common/gelu_erf_poly.h),
// evaluated on the host by the same formula, against the exact x·Φ(x) in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/common/gelu_erf_poly.h"

namespace {

double gelu_exact(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

TEST_CASE("gelu_erf_poly: within 4.3e-6 relative of x·Phi(x) on a dense grid", "[gelu_poly]") {
  double worst_rel = 0, worst_abs = 0;
  int checked = 0;
  for (int i = -1200000; i <= 1200000; ++i) {
    const float x = float(i) * 1e-5f;  // [-12, 12], steps finer than fp16's at |x| < 2
    const double ref = gelu_exact(double(x));
    const double got = double(fuseopt::dm::gelu_erf_poly(x));
    const double err = std::fabs(got - ref);
    worst_abs = std::fmax(worst_abs, err);
    if (std::fabs(ref) > 1e-3) worst_rel = std::fmax(worst_rel, err / std::fabs(ref));
    ++checked;
  }
  INFO("worst relative " << worst_rel << ", worst absolute " << worst_abs << " over " << checked << " points");
  CHECK(worst_rel <= 4.3e-6);
  CHECK(worst_abs <= 1e-6);
  CHECK(worst_rel > 1e-7);  // the grid reaches where the fit's error is: not a vacuous bound
}

TEST_CASE("gelu_erf_poly: the clamped tail, NaN and infinities", "[gelu_poly]") {
  using fuseopt::dm::gelu_erf_poly;
  // Past |x| = 5.5: max(x, 0) less 5.5·Phi(-5.5) ~ 1.1e-7.
  for (float x : {-5.6f, -8.f, -60.f, -1e4f, -3e38f}) {
    CHECK(gelu_erf_poly(x) <= 0.f);
    CHECK(gelu_erf_poly(x) >= -1.2e-7f);
  }
  for (float x : {5.6f, 8.f, 1e4f}) CHECK(std::fabs(gelu_erf_poly(x) - x) <= 1.2e-7f + x * 1.2e-7f);
  CHECK(gelu_erf_poly(0.f) == 0.f);
  CHECK(std::isnan(gelu_erf_poly(std::numeric_limits<float>::quiet_NaN())));
  CHECK(gelu_erf_poly(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  const float neg_inf = gelu_erf_poly(-std::numeric_limits<float>::infinity());
  CHECK(neg_inf <= 0.f);
  CHECK(neg_inf >= -1.2e-7f);
}
