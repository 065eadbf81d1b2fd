// Reshape, Squeeze, Unsqueeze, Flatten, Identity, Dropout, Shape, Size on the
// CPU kernels. Expected values are hand-computed (numpy reshape semantics).
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {
std::vector<float> iota_values(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}
}  // namespace

TEST_CASE("Reshape: 0 copies a dim, -1 is inferred", "[cpu][shape_ops]") {
  OpTest t("Reshape");
  t.input("x", iota({2, 3, 4})).input("shape", ints({0, -1}, {2}));
  expect_near(t.run()[0], iota_values(24), {2, 12});

  OpTest t2("Reshape");
  t2.input("x", iota({2, 3, 4})).input("shape", ints({4, 0, -1}, {3}));
  expect_near(t2.run()[0], iota_values(24), {4, 3, 2});

  OpTest t3("Reshape");
  t3.input("x", ints({1, 2, 3, 4, 5, 6}, {2, 3})).input("shape", ints({-1}, {1}));
  expect_ints(t3.run()[0], DType::Int64, {1, 2, 3, 4, 5, 6}, {6});
}

TEST_CASE("Reshape: allowzero keeps a literal 0 dim", "[cpu][shape_ops]") {
  OpTest t("Reshape");
  t.input("x", Tensor(DType::Float, {0, 3})).input("shape", ints({3, 0}, {2}));
  t.attr(Attribute::make_int("allowzero", 1));
  expect_near(t.run()[0], {}, {3, 0});

  // Without allowzero the 0 copies input dim 1 (3): [3,3] cannot hold 0 elements.
  OpTest t2("Reshape");
  t2.input("x", Tensor(DType::Float, {0, 3})).input("shape", ints({3, 0}, {2}));
  REQUIRE_THROWS_AS(t2.run(), Error);
}

TEST_CASE("Reshape: impossible shapes name the node and shapes", "[cpu][shape_ops]") {
  OpTest t("Reshape");
  t.input("x", iota({2, 3})).input("shape", ints({4, -1}, {2}));
  REQUIRE_THROWS_WITH(t.run(), Contains("Reshape 'Reshape_node'") && Contains("[2,3]") && Contains("[4,-1]"));

  OpTest t2("Reshape");
  t2.input("x", iota({2, 3})).input("shape", ints({-1, -1}, {2}));
  REQUIRE_THROWS_WITH(t2.run(), Contains("more than one -1"));

  OpTest t3("Reshape");
  t3.input("x", iota({2, 3})).input("shape", ints({7}, {1}));
  REQUIRE_THROWS_AS(t3.run(), Error);

  // mutate_models.py seed 11 m200: a target dim near INT64_MAX overflowed the product (UBSan).
  OpTest t4("Reshape");
  t4.input("x", iota({2, 3})).input("shape", ints({4, INT64_MAX, -1}, {3}));
  REQUIRE_THROWS_WITH(t4.run(), Contains("Reshape 'Reshape_node'") && Contains("more elements than 64 bits can count"));
}

TEST_CASE("Squeeze: all unit dims, axes input, axes attribute, negative axes", "[cpu][shape_ops]") {
  OpTest all("Squeeze");
  all.input("x", iota({1, 3, 1, 2}));
  expect_near(all.run()[0], iota_values(6), {3, 2});

  OpTest in13("Squeeze");  // opset >= 13: axes is an input
  in13.input("x", iota({1, 3, 1, 2})).input("axes", ints({-2}, {1}));
  expect_near(in13.run()[0], iota_values(6), {1, 3, 2});

  OpTest attr11("Squeeze");  // opset < 13: axes is an attribute
  attr11.input("x", iota({1, 3, 1, 2})).attr(Attribute::make_ints("axes", {0}));
  expect_near(attr11.run()[0], iota_values(6), {3, 1, 2});

  OpTest empty_axes("Squeeze");  // an empty axes input squeezes every unit dim
  empty_axes.input("x", iota({1, 3, 1, 2})).input("axes", ints({}, {0}));
  expect_near(empty_axes.run()[0], iota_values(6), {3, 2});

  OpTest bad("Squeeze");
  bad.input("x", iota({1, 3, 1, 2})).input("axes", ints({1}, {1}));
  REQUIRE_THROWS_WITH(bad.run(), Contains("Squeeze") && Contains("[1,3,1,2]"));
}

TEST_CASE("Unsqueeze: axes input and attribute, negative axes count in the output rank",
          "[cpu][shape_ops]") {
  OpTest in13("Unsqueeze");
  in13.input("x", iota({3, 4})).input("axes", ints({0, -1}, {2}));
  expect_near(in13.run()[0], iota_values(12), {1, 3, 4, 1});

  OpTest attr11("Unsqueeze");
  attr11.input("x", iota({3, 4})).attr(Attribute::make_ints("axes", {1}));
  expect_near(attr11.run()[0], iota_values(12), {3, 1, 4});

  OpTest scalar("Unsqueeze");
  scalar.input("x", ints({5}, {})).input("axes", ints({0}, {1}));
  expect_ints(scalar.run()[0], DType::Int64, {5}, {1});

  OpTest dup("Unsqueeze");
  dup.input("x", iota({3})).input("axes", ints({0, -3}, {2}));  // both are axis 0 of rank 3
  REQUIRE_THROWS_AS(dup.run(), Error);
}

TEST_CASE("Flatten: default, 0, negative and rank axis", "[cpu][shape_ops]") {
  struct Case { int64_t axis; std::vector<int64_t> dims; };
  for (const Case& c : {Case{1, {2, 12}}, Case{0, {1, 24}}, Case{-1, {6, 4}}, Case{3, {24, 1}}}) {
    OpTest t("Flatten");
    t.input("x", iota({2, 3, 4}));
    if (c.axis != 1) t.attr(Attribute::make_int("axis", c.axis));
    expect_near(t.run()[0], iota_values(24), c.dims);
  }
  OpTest bad("Flatten");
  bad.input("x", iota({2, 3})).attr(Attribute::make_int("axis", 3));
  REQUIRE_THROWS_AS(bad.run(), Error);
}

TEST_CASE("Identity and Dropout pass data through; Dropout's mask is all true", "[cpu][shape_ops]") {
  OpTest id("Identity");
  id.input("x", ints({4, -5, 6}, {3}));
  expect_ints(id.run()[0], DType::Int64, {4, -5, 6}, {3});

  OpTest d("Dropout");
  d.input("x", floats({1.5f, -2.f, 3.f, 0.f}, {2, 2})).num_outputs(2);
  auto out = d.run();
  expect_near(out[0], {1.5f, -2.f, 3.f, 0.f}, {2, 2});
  expect_ints(out[1], DType::Bool, {1, 1, 1, 1}, {2, 2});

  OpTest d1("Dropout");  // ratio input given, no mask output
  d1.input("x", floats({7.f}, {1})).input("ratio", Tensor::scalar_float(0.5f));
  auto out1 = d1.run();
  REQUIRE(out1.size() == 1);
  expect_near(out1[0], {7.f}, {1});
}

TEST_CASE("Shape with start/end (opset 15) and Size", "[cpu][shape_ops]") {
  auto shape_of = [](std::vector<Attribute> attrs) {
    OpTest t("Shape");
    t.input("x", Tensor(DType::Float, {2, 3, 4, 5}));
    for (auto& a : attrs) t.attr(a);
    return t.run()[0];
  };
  expect_ints(shape_of({}), DType::Int64, {2, 3, 4, 5}, {4});
  expect_ints(shape_of({Attribute::make_int("start", 1)}), DType::Int64, {3, 4, 5}, {3});
  expect_ints(shape_of({Attribute::make_int("start", -2)}), DType::Int64, {4, 5}, {2});
  expect_ints(shape_of({Attribute::make_int("start", 1), Attribute::make_int("end", -1)}), DType::Int64,
              {3, 4}, {2});
  expect_ints(shape_of({Attribute::make_int("end", 10)}), DType::Int64, {2, 3, 4, 5}, {4});
  expect_ints(shape_of({Attribute::make_int("start", 3), Attribute::make_int("end", 1)}), DType::Int64,
              {}, {0});

  OpTest scalar("Shape");
  scalar.input("x", Tensor::scalar_float(1.f));
  expect_ints(scalar.run()[0], DType::Int64, {}, {0});

  OpTest size("Size");
  size.input("x", Tensor(DType::Float, {2, 3, 4}));
  expect_ints(size.run()[0], DType::Int64, {24}, {});
  OpTest empty("Size");
  empty.input("x", Tensor(DType::Int64, {3, 0}));
  expect_ints(empty.run()[0], DType::Int64, {0}, {});
}
