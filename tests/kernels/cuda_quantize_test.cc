// CUDA QuantizeLinear / DequantizeLinear against the CPU reference on fresh
// random inputs (outputs poisoned by the harness): per tensor and per axis,
// int8 / uint8 / int32, with and without zero point; quantized outputs must
// match bit for bit (same float division, round half to even).
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda QuantizeLinear", "[cuda][quantize]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case per_tensor("QuantizeLinear", 3);
    per_tensor.in(0, randn({7, 300}, 4.f)).in(1, uniform({}, 0.02f, 0.05f)).in(2, randint({}, 100, 150, DType::UInt8));
    per_tensor.check(dt);
    Case per_axis("QuantizeLinear", 3);
    per_axis.attr(Attribute::make_int("axis", 1));
    per_axis.in(0, randn({3, 5, 33}, 4.f)).in(1, uniform({5}, 0.01f, 0.1f)).in(2, randint({5}, -10, 10, DType::Int8));
    per_axis.check(dt);
    Case no_zp("QuantizeLinear", 2);  // uint8, zero point 0: negatives saturate at 0
    no_zp.in(0, randn({1000}, 3.f)).in(1, uniform({}, 0.01f, 0.03f));
    no_zp.check(dt);
  }
}

TEST_CASE("cuda DequantizeLinear", "[cuda][quantize]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case per_tensor("DequantizeLinear", 3);
    per_tensor.in(0, randint({7, 300}, -128, 127, DType::Int8)).in(1, uniform({}, 0.01f, 0.1f));
    per_tensor.in(2, randint({}, -5, 5, DType::Int8));
    per_tensor.check(dt);
    Case per_axis("DequantizeLinear", 3);
    per_axis.attr(Attribute::make_int("axis", 0));
    per_axis.in(0, randint({6, 129}, 0, 255, DType::UInt8)).in(1, uniform({6}, 0.01f, 0.1f));
    per_axis.in(2, randint({6}, 100, 150, DType::UInt8));
    per_axis.check(dt);
    Case wide("DequantizeLinear", 2);  // int32 (bias) without zero point
    wide.in(0, randint({50}, -100000, 100000, DType::Int32)).in(1, uniform({}, 1e-4f, 1e-3f));
    wide.check(dt);
  }
}
