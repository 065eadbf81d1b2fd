// CUDA InstanceNormalization against the CPU reference kernel on fresh
// random inputs (outputs NaN-poisoned by the harness): 3-D and 4-D inputs,
// spatial sizes 1, 7, 1000 and one large enough for several strides of a
// 512-thread block, fp32 and fp16/bf16 storage (fp32 statistics).
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda InstanceNormalization", "[cuda][norm][instance_norm]") {
  if (!gpu_ready()) return;
  const std::vector<std::vector<int64_t>> shapes = {
      {2, 3, 1}, {2, 5, 7}, {3, 4, 1000}, {1, 3, 9000}, {2, 3, 1, 1}, {2, 4, 7, 5}, {1, 6, 40, 25}};
  for (const auto& shape : shapes)
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
      const int64_t C = shape[1];
      Case c("InstanceNormalization", 3);
      c.attr(Attribute::make_float("epsilon", 1e-5f));
      // An offset of 3 checks that the variance is centred.
      c.in(0, randn(shape, 2.f, 3.f)).in(1, uniform({C}, 0.5f, 1.5f)).in(2, randn({C}));
      INFO("X " << dims_str(shape));
      c.check(dt);
    }
}

TEST_CASE("cuda InstanceNormalization keeps fp32 scale/B in a 16-bit run", "[cuda][norm][instance_norm]") {
  if (!gpu_ready()) return;
  Case c("InstanceNormalization", 3);
  c.in(0, randn({2, 8, 33})).in(1, uniform({8}, 0.5f, 1.5f), false).in(2, randn({8}), false);
  c.check(DType::Float16);
}

TEST_CASE("cuda InstanceNormalization rejects scale of the wrong length", "[cuda][norm][instance_norm]") {
  if (!gpu_ready()) return;
  Case c("InstanceNormalization", 3);
  c.in(0, randn({1, 4, 5})).in(1, randn({3})).in(2, randn({4}));
  REQUIRE_THROWS_WITH(c.run_cuda(DType::Float), Catch::Contains("InstanceNormalization") && Catch::Contains("scale"));
}
