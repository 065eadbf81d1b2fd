// ConvTranspose; expected values from an independent numpy scatter
// reference: y[n, g*Mg + m, i*stride + k*dil - pad_begin] += x[n, c, i] * w[c, m, k].
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor conv_t(Tensor x, Tensor w, const Tensor* b, std::vector<Attribute> attrs) {
  OpTest t("ConvTranspose");
  t.input("x", std::move(x)).input("w", std::move(w));
  if (b) t.input("b", *b);
  for (Attribute& a : attrs) t.attr(std::move(a));
  return t.run()[0];
}
}  // namespace

TEST_CASE("ConvTranspose 1-D stride 2 with bias", "[cpu][conv_transpose]") {
  Tensor b = floats({0.5f}, {1});
  expect_near(conv_t(floats({1, 2, 3, -1, 0.5f, 2}, {1, 2, 3}), floats({1, -1, 2, 0.5f}, {2, 1, 2}), &b,
                     {Attribute::make_ints("strides", {2})}),
              {-0.5f, -1, 3.5f, -1.25f, 7.5f, -1.5f}, {1, 1, 6});
}

TEST_CASE("ConvTranspose 2-D stride 2, pads 1, output_padding 1, two output channels", "[cpu][conv_transpose]") {
  Tensor b = floats({0, 1}, {2});
  expect_near(conv_t(floats({1, 2, -1, 3}, {1, 1, 2, 2}), iota({1, 2, 3, 3}, 0.25f, -1.75f), &b,
                     {Attribute::make_ints("strides", {2, 2}), Attribute::make_ints("pads", {1, 1, 1, 1}),
                      Attribute::make_ints("output_padding", {1, 1})}),
              {-0.75f, -2.5f, -1.5f, -1, 1.5f, -4.25f, -4.5f, -3.25f, 0.75f, -2.5f, -2.25f, -1.5f, 0, -1, 0, 0.75f,
               2.5f, 5.25f, 4, 4.5f, 2.5f, 8, 7.75f, 9, -0.5f, 3, 5.5f, 6.25f, -1.25f, 4.5f, 7.75f, 8.5f},
              {1, 2, 4, 4});
}

TEST_CASE("ConvTranspose groups and dilation; output_shape sets the pads", "[cpu][conv_transpose]") {
  expect_near(conv_t(iota({1, 2, 4}, 1, -3), floats({1, 2, -1, 0.5f, 0, 3}, {2, 1, 3}), nullptr,
                     {Attribute::make_int("group", 2), Attribute::make_ints("dilations", {2}),
                      Attribute::make_ints("pads", {1, 0})}),
              {-2, -7, -4, 1, 2, 1, 0, 1, 1.5f, 2, 3, 6, 9, 12}, {1, 2, 7});
  // Full output 7, output_shape 6: total padding 1, at the start (ONNX rule for NOTSET).
  expect_near(conv_t(floats({1, -2, 3}, {1, 1, 3}), floats({1, 2, 3}, {1, 1, 3}), nullptr,
                     {Attribute::make_ints("strides", {2}), Attribute::make_ints("output_shape", {6})}),
              {2, 1, -4, -3, 6, 9}, {1, 1, 6});
}

TEST_CASE("ConvTranspose rejects mismatched W, B and group", "[cpu][conv_transpose]") {
  REQUIRE_THROWS_WITH(conv_t(iota({1, 2, 4}), iota({3, 1, 2}), nullptr, {}), Catch::Contains("ConvTranspose_node"));
  Tensor bad_b = floats({0, 0, 0}, {3});
  REQUIRE_THROWS_WITH(conv_t(iota({1, 2, 4}), iota({2, 1, 2}), &bad_b, {}),
                      Catch::Contains("ConvTranspose_node") && Catch::Contains("B"));
  REQUIRE_THROWS_WITH(conv_t(iota({1, 3, 4}), iota({3, 1, 2}), nullptr, {Attribute::make_int("group", 2)}),
                      Catch::Contains("group"));
}
