// QuantizeLinear / DequantizeLinear on the CPU reference backend; expected
// values worked by hand with binary-exact scales (round half to even,
// saturation). onnxruntime comparisons: tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor u8(std::vector<int> v, std::vector<int64_t> dims) {
  Tensor t(DType::UInt8, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  return t;
}
Tensor i8(std::vector<int> v, std::vector<int64_t> dims) {
  Tensor t(DType::Int8, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i) t.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
  return t;
}
}  // namespace

TEST_CASE("QuantizeLinear per tensor to uint8: half to even, saturation", "[cpu][quantize]") {
  OpTest t("QuantizeLinear");
  t.input("x", floats({-10, 0.25f, 0.75f, 1.25f, 200, -70}, {6}));
  t.const_input("s", floats({0.5f}, {})).const_input("z", u8({128}, {}));
  // x / 0.5 = -20, 0.5, 1.5, 2.5, 400, -140 -> -20, 0, 2, 2, 400, -140; + 128; clamp to [0, 255]
  expect_ints(t.run()[0], DType::UInt8, {108, 128, 130, 130, 255, 0}, {6});
}

TEST_CASE("QuantizeLinear per axis to int8", "[cpu][quantize]") {
  OpTest t("QuantizeLinear");
  t.input("x", floats({1.5f, -1, 300, -200, 0.25f, -3}, {2, 3}));
  t.const_input("s", floats({1, 0.5f, 2}, {3})).const_input("z", i8({0, -3, 5}, {3}));
  t.attr(Attribute::make_int("axis", 1));
  expect_ints(t.run()[0], DType::Int8, {2, -5, 127, -128, -3, 3}, {2, 3});
}

TEST_CASE("DequantizeLinear per tensor and per axis", "[cpu][quantize]") {
  OpTest t("DequantizeLinear");
  t.input("x", i8({-128, -3, 0, 127}, {4})).const_input("s", floats({0.5f}, {})).const_input("z", i8({-3}, {}));
  expect_near(t.run()[0], {-62.5f, 0, 1.5f, 65}, {4});
  OpTest a("DequantizeLinear");
  a.input("x", i8({1, 2, 3, 4}, {2, 2})).const_input("s", floats({2, 0.25f}, {2})).attr(Attribute::make_int("axis", 0));
  expect_near(a.run()[0], {2, 4, 0.75f, 1}, {2, 2});
}

TEST_CASE("Quantize/DequantizeLinear reject a per-axis scale of the wrong length and block_size", "[cpu][quantize]") {
  OpTest bad("DequantizeLinear");
  bad.input("x", i8({1, 2, 3, 4, 5, 6}, {2, 3})).const_input("s", floats({1, 2}, {2}));
  REQUIRE_THROWS_WITH(bad.run(), Catch::Contains("DequantizeLinear_node") && Catch::Contains("scale"));
  OpTest blocked("QuantizeLinear");
  blocked.input("x", iota({2, 4})).const_input("s", floats({1, 1}, {2})).attr(Attribute::make_int("block_size", 2));
  REQUIRE_THROWS_WITH(blocked.run(), Catch::Contains("QuantizeLinear_node") && Catch::Contains("block_size"));
}
