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

TEST_CASE("cuda GroupNormalization", "[cuda][norm][instance_norm]") {
  if (!gpu_ready()) return;
  struct G {
    std::vector<int64_t> shape;
    int64_t groups;
    bool per_group;
  };
  const G cases[] = {{{2, 6, 1}, 3, false},      {{2, 6, 7}, 2, false},   {{1, 32, 1000}, 8, false},
                     {{2, 8, 7, 5}, 4, true},     {{1, 64, 16, 16}, 32, false}, {{3, 4, 9}, 4, true},
                     {{2, 12, 33}, 1, false}};
  for (const G& g : cases)
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
      const int64_t P = g.per_group ? g.groups : g.shape[1];
      Case c("GroupNormalization", 3);
      c.attr(Attribute::make_int("num_groups", g.groups)).attr(Attribute::make_float("epsilon", 1e-5f));
      c.in(0, randn(g.shape, 2.f, 3.f)).in(1, uniform({P}, 0.5f, 1.5f)).in(2, randn({P}));
      INFO("X " << dims_str(g.shape) << " groups " << g.groups << " per_group " << g.per_group);
      c.check(dt);
    }
  Case bad("GroupNormalization", 3);
  bad.attr(Attribute::make_int("num_groups", 3)).in(0, randn({1, 4, 5})).in(1, randn({4})).in(2, randn({4}));
  REQUIRE_THROWS_WITH(bad.run_cuda(DType::Float), Catch::Contains("GroupNormalization") && Catch::Contains("num_groups"));
}
