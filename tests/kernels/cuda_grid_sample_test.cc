// CUDA GridSample against the CPU reference on fresh random inputs (outputs
// NaN-poisoned by the harness): every mode x padding x align_corners, grid
// points inside and outside [-1, 1], fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda GridSample", "[cuda][grid_sample]") {
  if (!gpu_ready()) return;
  for (const char* mode : {"bilinear", "nearest"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int align = 0; align < 2; ++align)
        for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
          Case c("GridSample", 2);
          c.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_string("padding_mode", pad));
          c.attr(Attribute::make_int("align_corners", align));
          // The grid stays fp32 in 16-bit runs: rounding a coordinate moves a
          // nearest-mode sample to another pixel, which no tolerance covers.
          c.in(0, randn({2, 3, 7, 9})).in(1, uniform({2, 5, 11, 2}, -1.3f, 1.3f), false);
          INFO(mode << " " << pad << " align_corners " << align);
          c.check(dt);
        }
  Case one_pixel("GridSample", 2);  // 1x1 image: align_corners maps everything to pixel 0
  one_pixel.attr(Attribute::make_int("align_corners", 1)).in(0, randn({1, 2, 1, 1})).in(1, uniform({1, 3, 3, 2}, -1.f, 1.f));
  one_pixel.check();
}

TEST_CASE("cuda AffineGrid", "[cuda][grid_sample]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (int align = 0; align < 2; ++align) {
      Case c("AffineGrid", 2);
      c.attr(Attribute::make_int("align_corners", align)).in(0, randn({3, 2, 3})).in(1, ints1({3, 4, 17, 1}));
      INFO("align_corners " << align);
      c.check(dt);
    }
}
