// Trilu; expected values from np.triu / np.tril on np.arange(12).reshape(3, 4).
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor trilu(int upper, const int64_t* k, Tensor x = iota({3, 4})) {
  OpTest t("Trilu");
  t.input("x", std::move(x));
  if (k) t.input("k", ints({*k}, {}));
  if (upper != 1) t.attr(Attribute::make_int("upper", upper));
  return t.run()[0];
}
}  // namespace

TEST_CASE("Trilu upper with k = 0 (default), 1, -1, -5", "[cpu][trilu]") {
  expect_near(trilu(1, nullptr), {0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11}, {3, 4});
  const int64_t one = 1, minus_one = -1, minus_five = -5;
  expect_near(trilu(1, &one), {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11}, {3, 4});
  expect_near(trilu(1, &minus_one), {0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11}, {3, 4});
  expect_near(trilu(1, &minus_five), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
}

TEST_CASE("Trilu lower with k = 0, -1, 5", "[cpu][trilu]") {
  const int64_t zero = 0, minus_one = -1, five = 5;
  expect_near(trilu(0, &zero), {0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0}, {3, 4});
  expect_near(trilu(0, &minus_one), {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}, {3, 4});
  expect_near(trilu(0, &five), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
}

TEST_CASE("Trilu over a batch, on int64 and bool; rank 1 is an error", "[cpu][trilu]") {
  expect_near(trilu(1, nullptr, iota({2, 3, 4})),
              {0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11, 12, 13, 14, 15, 0, 17, 18, 19, 0, 0, 22, 23}, {2, 3, 4});
  expect_ints(trilu(0, nullptr, ints({1, 2, 3, 4}, {2, 2})), DType::Int64, {1, 0, 3, 4}, {2, 2});
  // The causal-mask idiom: tril of an all-true bool matrix.
  expect_ints(trilu(0, nullptr, bools({1, 1, 1, 1, 1, 1, 1, 1, 1}, {3, 3})), DType::Bool,
              {1, 0, 0, 1, 1, 0, 1, 1, 1}, {3, 3});
  REQUIRE_THROWS_AS(trilu(1, nullptr, iota({4})), Error);
}
