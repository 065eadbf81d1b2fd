// ScatterND and ScatterElements (ONNX spec examples plus reductions).
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("ScatterND writes single elements (spec example 1)", "[cpu][scatter]") {
  OpTest t("ScatterND");
  t.input("data", floats({1, 2, 3, 4, 5, 6, 7, 8}, {8}))
      .input("idx", ints({4, 3, 1, 7}, {4, 1}))
      .input("upd", floats({9, 10, 11, 12}, {4}));
  expect_near(t.run()[0], {1, 11, 3, 10, 9, 6, 7, 12}, {8});
}

TEST_CASE("ScatterND writes whole rows; negative indices", "[cpu][scatter]") {
  OpTest t("ScatterND");
  t.input("data", iota({2, 3})).input("idx", ints({-1}, {1, 1})).input("upd", floats({7, 8, 9}, {1, 3}));
  expect_near(t.run()[0], {0, 1, 2, 7, 8, 9}, {2, 3});

  OpTest i("ScatterND");
  i.input("data", ints({0, 0, 0, 0}, {2, 2})).input("idx", ints({0, 1, 1, 0}, {2, 2}))
      .input("upd", ints({5, 6}, {2}));
  expect_ints(i.run()[0], DType::Int64, {0, 5, 6, 0}, {2, 2});
}

TEST_CASE("ScatterND reductions add/mul/max/min", "[cpu][scatter]") {
  auto run = [](const char* red, std::vector<float> data, std::vector<int64_t> idx, std::vector<float> upd) {
    OpTest t("ScatterND");
    const int64_t n = static_cast<int64_t>(upd.size());
    t.input("data", floats(data, {static_cast<int64_t>(data.size())}))
        .input("idx", ints(idx, {n, 1}))
        .input("upd", floats(upd, {n}));
    t.attr(Attribute::make_string("reduction", red));
    return t.run()[0];
  };
  expect_near(run("add", {0, 0, 0, 0}, {1, 1, -1}, {1, 2, 5}), {0, 3, 0, 5}, {4});
  expect_near(run("mul", {1, 2, 3, 4}, {0, 2, 0}, {5, 1, 2}), {10, 2, 3, 4}, {4});
  expect_near(run("max", {1, 2, 3, 4}, {0, 2}, {5, 1}), {5, 2, 3, 4}, {4});
  expect_near(run("min", {1, 2, 3, 4}, {0, 2}, {5, 1}), {1, 2, 1, 4}, {4});
}

TEST_CASE("ScatterND rejects mismatched updates and bad indices", "[cpu][scatter]") {
  OpTest t("ScatterND");
  t.input("data", iota({2, 3})).input("idx", ints({1}, {1, 1})).input("upd", floats({7, 8}, {1, 2}));
  REQUIRE_THROWS_AS(t.run(), Error);
  OpTest r("ScatterND");
  r.input("data", iota({2, 3})).input("idx", ints({2}, {1, 1})).input("upd", floats({7, 8, 9}, {1, 3}));
  REQUIRE_THROWS_AS(r.run(), Error);
}

TEST_CASE("ScatterElements (spec example)", "[cpu][scatter]") {
  OpTest t("ScatterElements");
  t.input("data", floats({0, 0, 0, 0, 0, 0, 0, 0, 0}, {3, 3}))
      .input("idx", ints({1, 0, 2, 0, 2, 1}, {2, 3}))
      .input("upd", floats({1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f}, {2, 3}));
  expect_near(t.run()[0], {2.0f, 1.1f, 0.0f, 1.0f, 0.0f, 2.2f, 0.0f, 2.1f, 1.2f}, {3, 3});

  OpTest a("ScatterElements");
  a.input("data", floats({1, 2, 3, 4, 5}, {1, 5})).input("idx", ints({1, -2}, {1, 2}))
      .input("upd", floats({1.1f, 2.1f}, {1, 2}));
  a.attr(Attribute::make_int("axis", -1));
  expect_near(a.run()[0], {1, 1.1f, 3, 2.1f, 5}, {1, 5});
}
