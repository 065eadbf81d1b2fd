// CUDA ONNX RMSNormalization against the CPU reference on fresh random
// inputs (outputs NaN-poisoned by the harness), fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda RMSNormalization", "[cuda][norm][rms_normalization]") {
  if (!gpu_ready()) return;
  for (int64_t d : {1, 7, 64, 1000, 5000})
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
      Case c("RMSNormalization", 2);
      c.attr(Attribute::make_float("epsilon", 1e-6f));
      c.in(0, randn({3, 5, d}, 1.f, 0.5f)).in(1, uniform({d}, 0.5f, 1.5f));
      INFO("D " << d);
      c.check(dt);
    }
  Case two_axes("RMSNormalization", 2);  // axis -2 with scale [1, D] broadcast over the normalised [4, D]
  two_axes.attr(Attribute::make_int("axis", -2)).in(0, randn({3, 4, 33})).in(1, uniform({1, 33}, 0.5f, 1.5f));
  two_axes.check();
  Case bad("RMSNormalization", 2);
  bad.in(0, randn({2, 4})).in(1, randn({3}));
  REQUIRE_THROWS_WITH(bad.run_cuda(DType::Float), Catch::Contains("RMSNormalization"));
}
