// fuseopt.AddRelu CPU kernel against hand-computed values.
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("AddRelu: same shapes", "[kernels][AddRelu]") {
  OpTest t("AddRelu", "fuseopt");
  t.input("A", floats({1, -2, 3, -4, 0.5f, -0.5f}, {2, 3}));
  t.input("B", floats({-2, 1, -3, 5, 0, 0.25f}, {2, 3}));
  expect_near(t.run()[0], {0, 0, 0, 1, 0.5f, 0}, {2, 3});
}

TEST_CASE("AddRelu: broadcast of a row", "[kernels][AddRelu]") {
  OpTest t("AddRelu", "fuseopt");
  t.input("A", floats({1, -2, 3, -4, 0.5f, -0.5f}, {2, 3}));
  t.input("B", floats({1, 1, -3}, {3}));
  expect_near(t.run()[0], {2, 0, 0, 0, 1.5f, 0}, {2, 3});
}

TEST_CASE("AddRelu: incompatible shapes are an error", "[kernels][AddRelu]") {
  OpTest t("AddRelu", "fuseopt");
  t.input("A", floats({1, 2, 3}, {3}));
  t.input("B", floats({1, 2}, {2}));
  CHECK_THROWS_AS(t.run(), Error);
}
