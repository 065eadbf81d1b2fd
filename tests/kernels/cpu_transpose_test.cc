// Transpose; expected values from numpy x.transpose(...) on arange data.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("Transpose default perm reverses dims", "[cpu][transpose]") {
  OpTest t("Transpose");
  t.input("x", iota({2, 3, 4}));
  expect_near(t.run()[0], {0, 12, 4, 16, 8, 20, 1, 13, 5, 17, 9, 21, 2, 14, 6, 18, 10, 22, 3, 15, 7, 19, 11, 23},
              {4, 3, 2});
}

TEST_CASE("Transpose with explicit perms", "[cpu][transpose]") {
  OpTest t("Transpose");
  t.input("x", iota({2, 3, 4})).attr(Attribute::make_ints("perm", {0, 2, 1}));
  expect_near(t.run()[0], {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 12, 16, 20, 13, 17, 21, 14, 18, 22, 15, 19, 23},
              {2, 4, 3});

  OpTest u("Transpose");
  u.input("x", iota({2, 3, 4})).attr(Attribute::make_ints("perm", {2, 0, 1}));
  expect_near(u.run()[0], {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23},
              {4, 2, 3});
}

TEST_CASE("Transpose of int64 and float16 data", "[cpu][transpose]") {
  OpTest t("Transpose");
  t.input("x", ints({1, 2, 3, 4, 5, 6}, {2, 3}));
  expect_ints(t.run()[0], DType::Int64, {1, 4, 2, 5, 3, 6}, {3, 2});

  Tensor h(DType::Float16, {2, 2});
  const uint16_t bits[] = {0x3C00, 0x4000, 0x4200, 0x4400};  // 1, 2, 3, 4
  for (int i = 0; i < 4; ++i) h.data<uint16_t>()[i] = bits[i];
  OpTest f("Transpose");
  f.input("x", h);
  Tensor out = f.run()[0];
  REQUIRE(out.dtype == DType::Float16);
  CHECK(out.data<uint16_t>()[0] == 0x3C00);
  CHECK(out.data<uint16_t>()[1] == 0x4200);
  CHECK(out.data<uint16_t>()[2] == 0x4000);
  CHECK(out.data<uint16_t>()[3] == 0x4400);
}

TEST_CASE("Transpose rejects a perm that is not a permutation", "[cpu][transpose]") {
  OpTest t("Transpose");
  t.input("x", iota({2, 3, 4})).attr(Attribute::make_ints("perm", {0, 0, 1}));
  REQUIRE_THROWS_AS(t.run(), Error);
  OpTest r("Transpose");
  r.input("x", iota({2, 3, 4})).attr(Attribute::make_ints("perm", {1, 0}));
  REQUIRE_THROWS_AS(r.run(), Error);
}
