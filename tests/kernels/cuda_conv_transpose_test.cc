// CUDA ConvTranspose against the CPU reference on fresh random inputs
// (outputs NaN-poisoned by the harness): 1-D/2-D/3-D, strides, pads,
// output_padding, groups, dilation, odd sizes; fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda ConvTranspose", "[cuda][conv][conv_transpose]") {
  if (!gpu_ready()) return;
  struct C {
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> strides, pads, dil, out_pad;
    bool bias;
  };
  const C cases[] = {
      {{2, 8, 7, 9}, {8, 4, 4, 4}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, {0, 0}, true},    // UNet / VAE-style 2x upsample
      {{1, 6, 5, 5}, {6, 2, 3, 3}, 3, {2, 1}, {0, 1, 2, 1}, {1, 2}, {1, 0}, false},   // groups, dilation, output_padding
      {{2, 16, 37}, {16, 8, 16}, 1, {8}, {4, 4}, {1}, {0}, true},                     // vocoder 1-D upsample
      {{1, 1, 1}, {1, 3, 1}, 1, {1}, {0, 0}, {1}, {0}, true},                        // spatial 1
      {{1, 4, 3, 4, 5}, {4, 2, 2, 3, 2}, 2, {2, 1, 2}, {0, 1, 0, 0, 1, 1}, {1, 1, 1}, {1, 0, 0}, true},  // 3-D
  };
  for (const C& cc : cases)
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
      Case c("ConvTranspose", 3);
      c.attr(Attribute::make_int("group", cc.group)).attr(Attribute::make_ints("strides", cc.strides));
      c.attr(Attribute::make_ints("pads", cc.pads)).attr(Attribute::make_ints("dilations", cc.dil));
      c.attr(Attribute::make_ints("output_padding", cc.out_pad));
      c.in(0, randn(cc.x)).in(1, randn(cc.w, 0.3f));
      if (cc.bias) c.in(2, randn({cc.w[1] * cc.group}));
      INFO("X " << dims_str(cc.x) << " W " << dims_str(cc.w) << " group " << cc.group);
      c.check(dt, 1e-4, 1e-4);
    }
  Case shaped("ConvTranspose", 2);  // output_shape instead of pads
  shaped.attr(Attribute::make_ints("strides", {2, 2})).attr(Attribute::make_ints("output_shape", {10, 9}));
  shaped.in(0, randn({1, 3, 5, 5})).in(1, randn({3, 2, 3, 3}));
  shaped.check();
  Case bad("ConvTranspose", 2);
  bad.in(0, randn({1, 2, 4})).in(1, randn({3, 1, 2}));
  REQUIRE_THROWS_WITH(bad.run_cuda(DType::Float), Catch::Contains("ConvTranspose"));
}
