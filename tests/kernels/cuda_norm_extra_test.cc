// CUDA LpNormalization, MeanVarianceNormalization and LRN against the CPU
// reference on fresh random inputs (outputs NaN-poisoned by the harness),
// fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda LpNormalization, MeanVarianceNormalization, LRN", "[cuda][norm_extra]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    for (int p = 1; p <= 2; ++p)
      for (int64_t axis : {-1, 1}) {
        Case c("LpNormalization", 1);
        c.attr(Attribute::make_int("p", p)).attr(Attribute::make_int("axis", axis)).in(0, randn({3, 17, 33}));
        INFO("p " << p << " axis " << axis);
        c.check(dt);
      }
    Case mvn("MeanVarianceNormalization", 1);
    mvn.in(0, randn({2, 5, 7, 9}, 2.f, 3.f));
    mvn.check(dt);
    Case mvn_last("MeanVarianceNormalization", 1);
    mvn_last.attr(Attribute::make_ints("axes", {-1})).in(0, randn({4, 3, 1000}));
    mvn_last.check(dt);
    for (int64_t size : {1, 3, 5}) {
      Case lrn("LRN", 1);
      lrn.attr(Attribute::make_int("size", size)).attr(Attribute::make_float("alpha", 0.01f));
      lrn.in(0, randn({2, 7, 5, 6}, 3.f));
      INFO("LRN size " << size);
      lrn.check(dt);
    }
  }
}
