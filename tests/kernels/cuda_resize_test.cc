// CUDA Resize against the CPU reference kernel (which is itself checked
// against onnx.reference in cpu_resize_test.cc): fresh random inputs, output
// poisoned with NaN before every run (cuda_generic_check.h), several shapes
// including odd sizes, every mode x coordinate transformation x nearest
// rounding, cubic_coeff_a / exclude_outside, tf_crop_and_resize with
// extrapolation, axes, keep_aspect_ratio_policy, antialias, Resize-10 and
// Upsample, fp16 / bf16 runs and integer / bool data in nearest mode.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {

Tensor floats1(const std::vector<float>& v) {
  return Tensor::from_floats(v, {static_cast<int64_t>(v.size())});
}

struct Geometry {
  std::vector<int64_t> in_shape;
  std::vector<float> scales;    // empty: sizes
  std::vector<int64_t> sizes;   // empty: scales
  std::vector<float> roi;       // tf_crop_and_resize: [starts..., ends...] over all dims
};

// Shapes with odd sizes; up- and downscaling, several resized axes.
std::vector<Geometry> geometries() {
  return {
      {{1, 3, 7, 9}, {1, 1, 1.7f, 0.6f}, {}, {0, 0, 0.1f, -0.2f, 1, 1, 0.85f, 1.1f}},
      {{2, 5, 6}, {}, {2, 11, 3}, {0, -0.1f, 0.3f, 1, 0.9f, 0.7f}},
      {{1, 2, 33, 17}, {}, {1, 2, 16, 40}, {0, 0, 0.25f, 0, 1, 1, 1, 0.5f}},
      {{13}, {2.5f}, {}, {0.2f, 0.9f}},
      {{3, 4, 5, 6, 7}, {1, 1, 2, 0.5f, 1.5f}, {}, {0, 0, 0, 0.1f, 0, 1, 1, 1, 0.9f, 1.2f}},
      {{1, 1, 5, 5}, {}, {1, 1, 1, 1}, {0, 0, 0.3f, 0.4f, 1, 1, 0.6f, 0.5f}},  // output of one element per axis
  };
}

Case make_case(const Geometry& g, const Tensor& x, const std::string& mode, const std::string& coord) {
  Case c("Resize", 4);
  c.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_string("coordinate_transformation_mode", coord));
  c.in(0, x, x.dtype == DType::Float);
  if (coord == "tf_crop_and_resize") c.in(1, floats1(g.roi), false);
  if (!g.scales.empty()) c.in(2, floats1(g.scales), false);
  else c.in(3, Tensor::from_ints(g.sizes, {static_cast<int64_t>(g.sizes.size())}));
  return c;
}

const char* const kCoords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                               "align_corners", "asymmetric", "tf_crop_and_resize"};

}  // namespace

TEST_CASE("cuda Resize nearest: every rounding x coordinate mode", "[cuda][resize]") {
  if (!gpu_ready()) return;
  for (const Geometry& g : geometries())
    for (const char* coord : kCoords)
      for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
        Case c = make_case(g, randn(g.in_shape), "nearest", coord);
        c.attr(Attribute::make_string("nearest_mode", nearest)).attr(Attribute::make_float("extrapolation_value", -7.f));
        INFO(dims_str(g.in_shape) << " " << coord << " " << nearest);
        c.check();
      }
}

TEST_CASE("cuda Resize nearest moves every dtype exactly", "[cuda][resize]") {
  if (!gpu_ready()) return;
  const Geometry g = geometries()[0];
  const std::vector<Tensor> xs = {randint(g.in_shape, -1000000, 1000000), randint(g.in_shape, -1000, 1000, DType::Int32),
                                  randint(g.in_shape, -100, 100, DType::Int8), randint(g.in_shape, 0, 255, DType::UInt8),
                                  randint(g.in_shape, 0, 1, DType::Bool), convert_float(randn(g.in_shape), DType::Float16),
                                  convert_float(randn(g.in_shape), DType::BFloat16)};
  for (const Tensor& x : xs)
    for (const char* coord : {"asymmetric", "tf_crop_and_resize"}) {
      Case c = make_case(g, x, "nearest", coord);
      c.attr(Attribute::make_float("extrapolation_value", 3.f));
      INFO(dtype_name(x.dtype) << " " << coord);
      c.check();
    }
}

TEST_CASE("cuda Resize linear and cubic: every coordinate mode, fp32/fp16/bf16", "[cuda][resize]") {
  if (!gpu_ready()) return;
  for (const Geometry& g : geometries())
    for (const char* mode : {"linear", "cubic"})
      for (const char* coord : kCoords)
        for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
          Case c = make_case(g, randn(g.in_shape), mode, coord);
          c.attr(Attribute::make_float("extrapolation_value", 2.5f));
          INFO(dims_str(g.in_shape) << " " << mode << " " << coord << " " << dtype_name(dt));
          c.check(dt);
        }
}

TEST_CASE("cuda Resize cubic_coeff_a, exclude_outside and antialias", "[cuda][resize]") {
  if (!gpu_ready()) return;
  for (const Geometry& g : geometries())
    for (const char* mode : {"linear", "cubic"})
      for (int excl = 0; excl < 2; ++excl)
        for (int aa = 0; aa < 2; ++aa) {
          Case c = make_case(g, randn(g.in_shape), mode, "half_pixel");
          c.attr(Attribute::make_float("cubic_coeff_a", -0.5f))
              .attr(Attribute::make_int("exclude_outside", excl))
              .attr(Attribute::make_int("antialias", aa));
          INFO(dims_str(g.in_shape) << " " << mode << " exclude_outside " << excl << " antialias " << aa);
          c.check();
        }
  // Strong downscaling: wide antialias windows (several taps past the edges).
  for (const char* mode : {"linear", "cubic"}) {
    Case c("Resize", 4);
    c.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_int("antialias", 1));
    c.in(0, randn({2, 3, 61, 47})).in(3, Tensor::from_ints({2, 3, 5, 9}, {4}));
    INFO(mode << " antialias 61x47 -> 5x9");
    c.check();
  }
}

TEST_CASE("cuda Resize axes, keep_aspect_ratio_policy, Resize-10 and Upsample", "[cuda][resize]") {
  if (!gpu_ready()) return;
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Case ax("Resize", 4);  // opset 18 axes, negative and out of order
    ax.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_ints("axes", {-1, 1}));
    ax.in(0, randn({2, 9, 4, 11})).in(3, Tensor::from_ints({23, 5}, {2}));
    INFO(mode << " axes");
    ax.check();
    for (const char* policy : {"not_larger", "not_smaller"}) {
      Case k("Resize", 4);
      k.attr(Attribute::make_string("mode", mode))
          .attr(Attribute::make_ints("axes", {2, 3}))
          .attr(Attribute::make_string("keep_aspect_ratio_policy", policy));
      k.in(0, randn({1, 3, 7, 12})).in(3, Tensor::from_ints({15, 15}, {2}));
      INFO(mode << " " << policy);
      k.check();
    }
    Case r10("Resize", 2);  // Resize-10: (X, scales)
    r10.attr(Attribute::make_string("mode", mode == std::string("cubic") ? "linear" : mode));
    r10.in(0, randn({1, 2, 9, 10})).in(1, floats1({1, 1, 0.6f, 1.5f}), false);
    INFO(mode << " Resize-10");
    r10.check();
  }
  for (const char* mode : {"nearest", "linear"}) {
    Case up9("Upsample", 2);  // opset 9: scales input
    up9.attr(Attribute::make_string("mode", mode));
    up9.in(0, randn({2, 3, 5, 7})).in(1, floats1({1, 1, 2.5f, 1.5f}), false);
    INFO(mode << " Upsample-9");
    up9.check();
    Case up7("Upsample", 1);  // opset 7: scales attribute
    up7.attr(Attribute::make_string("mode", mode)).attr(Attribute::make_floats("scales", {1, 2, 1.5f, 3}));
    up7.in(0, randn({2, 3, 5, 7}));
    INFO(mode << " Upsample-7");
    up7.check();
  }
  Case same("Resize", 4);  // nothing to resize: a plain copy
  same.attr(Attribute::make_string("mode", "linear"));
  same.in(0, randn({3, 5})).in(2, floats1({1, 1}), false);
  same.check();
  Case empty("Resize", 4);  // empty output
  empty.attr(Attribute::make_string("mode", "cubic"));
  empty.in(0, randn({3, 5})).in(3, Tensor::from_ints({0, 4}, {2}));
  empty.check();
}

TEST_CASE("cuda Resize position-embedding shapes (dinov2 bicubic, beit bilinear)", "[cuda][resize]") {
  if (!gpu_ready()) return;
  // dinov2: [1, 768, 37, 37] -> sizes, bicubic half_pixel; beit: [1, 12, 27, 27] bilinear.
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case d("Resize", 4);
    d.attr(Attribute::make_string("mode", "cubic")).attr(Attribute::make_float("cubic_coeff_a", -0.75f));
    d.in(0, randn({1, 768, 37, 37})).in(3, Tensor::from_ints({1, 768, 16, 20}, {4}));
    INFO("dinov2 " << dtype_name(dt));
    d.check(dt);
    Case b("Resize", 4);
    b.attr(Attribute::make_string("mode", "linear"));
    b.in(0, randn({1, 12, 27, 27})).in(3, Tensor::from_ints({1, 12, 31, 31}, {4}));
    INFO("beit " << dtype_name(dt));
    b.check(dt);
  }
}
