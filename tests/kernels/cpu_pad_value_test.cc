// Pad's opset < 11 `value` attribute on bool and integer data: the float is
// cast with Cast's rules (bool = value != 0, integers truncate toward zero,
// NaN -> 0) by dm::float_attr_bytes, which the CPU and CUDA Pad share.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "kernels/common/op_params.h"
#include "support/op_test.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

template <class T> T as(const std::vector<uint8_t>& bytes) {
  REQUIRE(bytes.size() == sizeof(T));
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));
  return v;
}

}  // namespace

TEST_CASE("float attribute cast to a data dtype follows Cast's rules", "[cpu][pad]") {
  Node n;
  n.op_type = "Pad";
  n.name = "p";
  CHECK(as<int64_t>(dm::float_attr_bytes(2.7f, DType::Int64, n)) == 2);
  CHECK(as<int64_t>(dm::float_attr_bytes(-2.7f, DType::Int64, n)) == -2);
  CHECK(as<int32_t>(dm::float_attr_bytes(-3.9f, DType::Int32, n)) == -3);
  CHECK(as<int8_t>(dm::float_attr_bytes(-1.5f, DType::Int8, n)) == -1);
  CHECK(as<int64_t>(dm::float_attr_bytes(std::nanf(""), DType::Int64, n)) == 0);
  // bool: any non-zero value is true, stored as byte 1 (not truncated to 0, not 2).
  CHECK(as<uint8_t>(dm::float_attr_bytes(0.5f, DType::Bool, n)) == 1);
  CHECK(as<uint8_t>(dm::float_attr_bytes(2.0f, DType::Bool, n)) == 1);
  CHECK(as<uint8_t>(dm::float_attr_bytes(-0.25f, DType::Bool, n)) == 1);
  CHECK(as<uint8_t>(dm::float_attr_bytes(0.0f, DType::Bool, n)) == 0);
  CHECK(as<float>(dm::float_attr_bytes(2.7f, DType::Float, n)) == 2.7f);
  CHECK(as<double>(dm::float_attr_bytes(2.5f, DType::Double, n)) == 2.5);
  CHECK(as<uint16_t>(dm::float_attr_bytes(1.0f, DType::Float16, n)) == 0x3C00);
}

TEST_CASE("Pad opset < 11 with a non-integral value on int64, int32 and bool data", "[cpu][pad]") {
  OpTest i64("Pad");
  i64.input("x", Tensor::from_ints({1, 2, 3, 4}, {2, 2}));
  i64.attr(Attribute::make_ints("pads", {1, 0, 0, 1})).attr(Attribute::make_float("value", -2.7f));
  Tensor y = i64.run()[0];
  REQUIRE(y.dims == std::vector<int64_t>{3, 3});
  const std::vector<int64_t> want64 = {-2, -2, -2, 1, 2, -2, 3, 4, -2};
  for (int64_t k = 0; k < 9; ++k) CHECK(y.as_int(k) == want64[k]);

  OpTest i32("Pad");
  i32.input("x", int32s({5, 6}, {2}));
  i32.attr(Attribute::make_ints("pads", {2, 1})).attr(Attribute::make_float("value", 3.9f));
  y = i32.run()[0];
  REQUIRE(y.dtype == DType::Int32);
  const std::vector<int64_t> want32 = {3, 3, 5, 6, 3};
  for (int64_t k = 0; k < 5; ++k) CHECK(y.as_int(k) == want32[k]);

  OpTest b("Pad");
  b.input("x", bools({0, 1, 0}, {3}));
  b.attr(Attribute::make_ints("pads", {1, 1})).attr(Attribute::make_float("value", 0.5f));
  y = b.run()[0];
  REQUIRE(y.dtype == DType::Bool);
  const std::vector<uint8_t> wantb = {1, 0, 1, 0, 1};
  CHECK(y.bytes == wantb);
}
