// Cast / CastLike between numeric types and bool. fp16 and bf16 bit patterns
// are the IEEE/bfloat16 encodings (np.float16(x).view(np.uint16)).
#include <catch2/catch.hpp>

#include <limits>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor cast(Tensor x, DType to) {
  OpTest t("Cast");
  t.input("x", std::move(x)).attr(Attribute::make_int("to", static_cast<int64_t>(to)));
  return t.run()[0];
}
std::vector<uint16_t> bits16(const Tensor& t) {
  return std::vector<uint16_t>(t.data<uint16_t>(), t.data<uint16_t>() + t.numel());
}
}  // namespace

TEST_CASE("Cast float to integers truncates toward zero; to bool is != 0", "[cpu][cast]") {
  const Tensor x = floats({-1.7f, 0.f, 2.5f, 3.99f}, {4});
  expect_ints(cast(x, DType::Int32), DType::Int32, {-1, 0, 2, 3}, {4});
  expect_ints(cast(x, DType::Int64), DType::Int64, {-1, 0, 2, 3}, {4});
  expect_ints(cast(x, DType::Bool), DType::Bool, {1, 0, 1, 1}, {4});
  expect_ints(cast(floats({0, 255}, {2}), DType::UInt8), DType::UInt8, {0, 255}, {2});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_ints(cast(floats({nan}, {1}), DType::Int32), DType::Int32, {0}, {1});
  // Out of range (undefined in C++): signed targets saturate, as on CUDA; -inf is T5's log(0).
  const float inf = std::numeric_limits<float>::infinity();
  expect_ints(cast(floats({-inf, inf, 3e9f, -3e9f}, {4}), DType::Int32), DType::Int32,
              {INT32_MIN, INT32_MAX, INT32_MAX, INT32_MIN}, {4});
  expect_ints(cast(floats({-inf, inf, 1e19f}, {3}), DType::Int64), DType::Int64, {INT64_MIN, INT64_MAX, INT64_MAX},
              {3});
  expect_ints(cast(floats({300, -200}, {2}), DType::Int8), DType::Int8, {127, -128}, {2});
  // Unsigned: in-range negatives wrap (-1 -> 255, as before).
  expect_ints(cast(floats({-1}, {1}), DType::UInt8), DType::UInt8, {255}, {1});
}

TEST_CASE("Cast bool and integers to float", "[cpu][cast]") {
  expect_near(cast(bools({1, 0}, {2}), DType::Float), {1, 0}, {2});
  expect_near(cast(ints({-3, 1 << 20}, {2}), DType::Float), {-3, 1 << 20}, {2});
  expect_ints(cast(ints({0, 7}, {2}), DType::Bool), DType::Bool, {0, 1}, {2});
  expect_ints(cast(int32s({-5, 9}, {2}), DType::Int64), DType::Int64, {-5, 9}, {2});
}

TEST_CASE("Cast to and from float16 and bfloat16", "[cpu][cast]") {
  Tensor h = cast(floats({1.0f, 0.5f, -2.0f, 65504.0f}, {2, 2}), DType::Float16);
  REQUIRE(h.dtype == DType::Float16);
  CHECK(bits16(h) == std::vector<uint16_t>{0x3C00, 0x3800, 0xC000, 0x7BFF});
  expect_near(cast(h, DType::Float), {1.0f, 0.5f, -2.0f, 65504.0f}, {2, 2});

  Tensor b = cast(ints({3, -1}, {2}), DType::BFloat16);
  REQUIRE(b.dtype == DType::BFloat16);
  CHECK(bits16(b) == std::vector<uint16_t>{0x4040, 0xBF80});
  expect_ints(cast(b, DType::Int32), DType::Int32, {3, -1}, {2});
  // fp16 -> bf16 goes through float.
  Tensor hb = cast(h, DType::BFloat16);
  CHECK(bits16(hb)[0] == 0x3F80);
}

TEST_CASE("Cast double <-> float, same-type copy, CastLike", "[cpu][cast]") {
  Tensor d(DType::Double, {2});
  d.data<double>()[0] = 0.1;
  d.data<double>()[1] = -1e10;
  expect_near(cast(d, DType::Float), {0.1f, -1e10f}, {2});
  Tensor back = cast(floats({0.5f}, {1}), DType::Double);
  REQUIRE(back.dtype == DType::Double);
  CHECK(back.data<double>()[0] == 0.5);
  expect_near(cast(floats({2.5f}, {1}), DType::Float), {2.5f}, {1});

  OpTest like("CastLike");
  like.input("x", floats({1.5f, -0.5f}, {2})).input("like", ints({0}, {1}));
  expect_ints(like.run()[0], DType::Int64, {1, 0}, {2});

  OpTest none("Cast");
  none.input("x", iota({2}));
  REQUIRE_THROWS_AS(none.run(), Error);
}
