// fuserun's output comparison (tools/fuserun/compare.cc): pass/fail against rtol/atol, NaN
// placement, and the hint a failed fp16 check gets when the reference lies below fp16's
// normal range (random-weight vision models whose outputs are 1e-20 .. 1e-7).
#include <catch2/catch.hpp>

#include <limits>

#include "tools/fuserun/compare.h"

using namespace fuseopt;
using fuseopt::fuserun::compare;
using fuseopt::fuserun::half_range_hint;

TEST_CASE("fuserun compare: tolerances and NaN placement", "[unit][fuserun]") {
  const Tensor ref = Tensor::from_floats({1.f, -2.f, 3.f}, {3});
  CHECK(compare("y", Tensor::from_floats({1.f, -2.f, 3.f}, {3}), ref, 1e-4, 1e-4).pass);
  const auto off = compare("y", Tensor::from_floats({1.f, -2.f, 3.5f}, {3}), ref, 1e-4, 1e-4);
  CHECK_FALSE(off.pass);
  CHECK(off.max_abs == Approx(0.5));
  CHECK(off.ref_max_abs == Approx(3.0));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(compare("y", Tensor::from_floats({1.f, nan, 3.f}, {3}), ref, 1e-4, 1e-4).pass);
  CHECK_FALSE(compare("y", Tensor::from_floats({1.f, -2.f}, {2}), ref, 1e-4, 1e-4).pass);
}

TEST_CASE("fuserun compare: fp16 range hint only for a failed fp16 check below 6.1e-5", "[unit][fuserun]") {
  const Tensor tiny_ref = Tensor::from_floats({3e-8f, -1e-7f, 2e-9f}, {3});
  const Tensor flushed = Tensor::from_floats({0.f, -1.19e-7f, 0.f}, {3});  // what fp16 makes of it
  const auto c = compare("pred", flushed, tiny_ref, 1e-9, 1e-2);
  REQUIRE_FALSE(c.pass);
  const std::string hint = half_range_hint(c, true);
  CHECK(hint.find("below fp16's normal range") != std::string::npos);
  CHECK(hint.find("1e-07") != std::string::npos);  // the largest |ref| is named
  CHECK(half_range_hint(c, false).empty());         // fp32 / bf16: no excuse
  // A reference that reaches the normal range: the failure is real.
  const auto big = compare("pred", Tensor::from_floats({0.f, 1.f}, {2}), Tensor::from_floats({1e-3f, 1.f}, {2}), 1e-9,
                           1e-4);
  REQUIRE_FALSE(big.pass);
  CHECK(half_range_hint(big, true).empty());
  // A passing check gets no hint.
  CHECK(half_range_hint(compare("pred", tiny_ref, tiny_ref, 1e-9, 1e-2), true).empty());
}
