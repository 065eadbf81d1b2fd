// Resize on the CPU: every mode / coordinate transformation / nearest
// rounding, cubic_coeff_a and exclude_outside, tf_crop_and_resize with
// extrapolation, axes, keep_aspect_ratio_policy and antialias against
// onnx.reference outputs (cpu_resize_refs.h, from gen_cpu_resize_refs.py);
// plus hand-computed cases (Resize-10, integers, fp16, negative axes, empty
// scales) and the errors.
#include <catch2/catch.hpp>

#include "cpu_resize_refs.h"
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

// x[i] = ((i * 7 + 3) % 11) * 0.5 - 2, as data() in gen_cpu_resize_refs.py.
Tensor resize_input(const std::vector<int64_t>& shape) {
  Tensor t(DType::Float, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 7 + 3) % 11) * 0.5f - 2.f;
  return t;
}

Tensor floats1(const std::vector<float>& v) { return floats(v, {static_cast<int64_t>(v.size())}); }
Tensor ints1(const std::vector<int64_t>& v) { return ints(v, {static_cast<int64_t>(v.size())}); }

OpTest from_ref(const cpu_resize_refs::Ref& r) {
  OpTest t("Resize");
  t.input("x", resize_input(r.in_shape));
  if (r.roi.empty()) t.omitted_input();
  else t.const_input("roi", floats1(r.roi));
  if (r.scales.empty()) t.omitted_input();
  else t.const_input("scales", floats1(r.scales));
  if (!r.sizes.empty()) t.const_input("sizes", ints1(r.sizes));
  t.attr(Attribute::make_string("mode", r.mode));
  t.attr(Attribute::make_string("coordinate_transformation_mode", r.coord));
  t.attr(Attribute::make_string("nearest_mode", r.nearest));
  t.attr(Attribute::make_string("keep_aspect_ratio_policy", r.policy));
  t.attr(Attribute::make_float("cubic_coeff_a", r.cubic_a));
  t.attr(Attribute::make_float("extrapolation_value", r.extrapolation));
  t.attr(Attribute::make_int("exclude_outside", r.exclude_outside));
  t.attr(Attribute::make_int("antialias", r.antialias));
  if (!r.axes.empty()) t.attr(Attribute::make_ints("axes", r.axes));
  return t;
}

}  // namespace

TEST_CASE("Resize matches onnx.reference in every mode", "[cpu][resize]") {
  REQUIRE(cpu_resize_refs::refs().size() >= 20);
  for (const auto& r : cpu_resize_refs::refs()) {
    INFO("case " << r.name);
    OpTest t = from_ref(r);
    expect_near(t.run()[0], r.want, r.out_shape, 2e-5f, 1e-5f);
  }
}

TEST_CASE("Resize through a Session (memory plan, constant sizes)", "[cpu][resize]") {
  const auto& r = cpu_resize_refs::refs()[11];  // cubic_half_pixel
  REQUIRE(r.name == "cubic_half_pixel");
  OpTest t = from_ref(r);
  expect_near(t.run_session()[0], r.want, r.out_shape, 2e-5f, 1e-5f);
}

TEST_CASE("Resize-10 (X, scales): asymmetric, nearest floors up and ceils down", "[cpu][resize]") {
  // Values from onnxruntime on x = 0..9 (Resize opset 10).
  Tensor x = iota({1, 10});
  OpTest up("Resize");
  up.input("x", x).const_input("scales", floats1({1, 1.5f}));
  expect_near(up.run()[0], {0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9}, {1, 15});
  OpTest down("Resize");
  down.input("x", x).const_input("scales", floats1({1, 0.6f}));
  expect_near(down.run()[0], {0, 2, 4, 5, 7, 9}, {1, 6});
  OpTest lin("Resize");
  lin.input("x", x).const_input("scales", floats1({1, 0.6f})).attr(Attribute::make_string("mode", "linear"));
  expect_near(lin.run()[0], {0, 5.f / 3, 10.f / 3, 5, 20.f / 3, 25.f / 3}, {1, 6});
}

TEST_CASE("Upsample (opsets 7 and 9) is Resize-10", "[cpu][resize]") {
  // Values from onnxruntime on x = 0..9.
  OpTest up9("Upsample");
  up9.input("x", iota({1, 10})).const_input("scales", floats1({1, 2.5f}));
  expect_near(up9.run()[0], {0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 5, 5, 6, 6, 6, 7, 7, 8, 8, 8, 9, 9}, {1, 25});
  OpTest up7("Upsample");
  up7.input("x", iota({1, 10})).attr(Attribute::make_floats("scales", {1, 1.5f}));
  expect_near(up7.run()[0], {0, 0, 1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 9}, {1, 15});
}

TEST_CASE("Resize nearest copies integers exactly, with negative axes and empty scales", "[cpu][resize]") {
  // x = [[1,2,3],[4,5,6]] int64, asymmetric floor, x2 on the last axis via axes = [-1].
  OpTest t("Resize");
  t.input("x", ints({1, 2, 3, 4, 5, 6}, {2, 3})).omitted_input().const_input("scales", floats1({2}));
  t.attr(Attribute::make_ints("axes", {-1}))
      .attr(Attribute::make_string("coordinate_transformation_mode", "asymmetric"))
      .attr(Attribute::make_string("nearest_mode", "floor"));
  expect_ints(t.run()[0], DType::Int64, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}, {2, 6});

  // Empty roi and scales count as omitted (exporters write them).
  OpTest e("Resize");
  e.input("x", ints({1, 2, 3, 4, 5, 6}, {2, 3}))
      .const_input("roi", floats({}, {0}))
      .const_input("scales", floats({}, {0}))
      .const_input("sizes", ints1({1, 3}));
  // half_pixel, round_prefer_floor: row (0 + 0.5) * 2 - 0.5 = 0.5 -> 0.
  expect_ints(e.run()[0], DType::Int64, {1, 2, 3}, {1, 3});

  // Bool and uint8 go through the same gather.
  OpTest b("Resize");
  b.input("x", bools({1, 0}, {2})).omitted_input().const_input("scales", floats1({2}))
      .attr(Attribute::make_string("coordinate_transformation_mode", "asymmetric"));
  expect_ints(b.run()[0], DType::Bool, {1, 1, 0, 0}, {4});
}

TEST_CASE("Resize fp16 linear computes in fp32 and rounds once", "[cpu][resize]") {
  Tensor x(DType::Float16, {1, 2});
  x.data<uint16_t>()[0] = float_to_half(1.f);
  x.data<uint16_t>()[1] = float_to_half(2.f);
  OpTest t("Resize");
  t.input("x", x).omitted_input().omitted_input().const_input("sizes", ints1({1, 4}));
  t.attr(Attribute::make_string("mode", "linear"));
  Tensor y = t.run()[0];
  REQUIRE(y.dtype == DType::Float16);
  REQUIRE(shape_str(y.dims) == shape_str({1, 4}));
  // half_pixel x2: sources -0.25, 0.25, 0.75, 1.25 -> 1, 1.25, 1.75, 2.
  const float want[] = {1.f, 1.25f, 1.75f, 2.f};
  for (int i = 0; i < 4; ++i) CHECK(half_to_float(y.data<uint16_t>()[i]) == want[i]);
}

TEST_CASE("Resize to an empty output allocates and returns", "[cpu][resize]") {
  OpTest t("Resize");
  t.input("x", iota({2, 3})).omitted_input().omitted_input().const_input("sizes", ints1({0, 3}));
  t.attr(Attribute::make_string("mode", "linear"));
  expect_near(t.run()[0], {}, {0, 3});
}

TEST_CASE("Resize rejects bad inputs with an error naming the node", "[cpu][resize]") {
  auto expect_error = [](OpTest& t, const std::string& part) {
    try {
      t.run();
      FAIL("no error; expected: " << part);
    } catch (const Error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("Resize_node") != std::string::npos);
      CHECK(msg.find(part) != std::string::npos);
      CHECK(msg.find('\n') == std::string::npos);
    }
  };
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).omitted_input().const_input("scales", floats1({1, 2})).const_input("sizes", ints1({1, 8}));
    expect_error(t, "both scales and sizes");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).omitted_input().omitted_input().omitted_input();
    expect_error(t, "neither scales nor sizes");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).omitted_input().const_input("scales", floats1({2}));
    expect_error(t, "scales has 1 values for 2 axes");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).omitted_input().omitted_input().const_input("sizes", ints1({1, 2, 3}));
    expect_error(t, "sizes has 3 values for 2 axes");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).omitted_input().const_input("scales", floats1({1, -2}));
    expect_error(t, "must be positive");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({1, 4})).const_input("roi", floats1({0, 1})).omitted_input().const_input("sizes", ints1({1, 3}));
    t.attr(Attribute::make_string("coordinate_transformation_mode", "tf_crop_and_resize"));
    expect_error(t, "roi has 2 values for 2 axes");
  }
  {
    OpTest t("Resize");
    t.input("x", ints({1, 2}, {2})).omitted_input().const_input("scales", floats1({2}));
    t.attr(Attribute::make_string("mode", "linear"));
    expect_error(t, "need a float input");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({4})).omitted_input().const_input("scales", floats1({2}));
    t.attr(Attribute::make_string("mode", "area"));
    expect_error(t, "unknown mode 'area'");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({4})).omitted_input().const_input("scales", floats1({2}));
    t.attr(Attribute::make_string("coordinate_transformation_mode", "center"));
    expect_error(t, "unknown coordinate_transformation_mode");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({2, 4})).omitted_input().const_input("scales", floats1({2, 2}));
    t.attr(Attribute::make_ints("axes", {1, -1}));
    expect_error(t, "repeated");
  }
  {
    OpTest t("Resize");
    t.input("x", iota({2, 4})).omitted_input().const_input("scales", floats1({2}));
    t.attr(Attribute::make_ints("axes", {2}));
    expect_error(t, "out of range");
  }
}
