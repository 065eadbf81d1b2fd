// fuseopt.GatedMatMul CPU kernel against numpy-computed values (float64 numpy,
// SiLU as g / (1 + exp(-g)), GELU with math.erf, tanh-GELU with sqrt(2/pi)).
// A = [[1,2,3],[-1,0.5,2]]; W = [Wg | Wu] with Wg = [[1,-1],[0.5,2],[-2,1]],
// Wu = [[0.5,1],[-1,0.25],[1.5,-0.5]]; bias = [0.25,-3 | 0.5,1]. Outputs are NaN-poisoned first (OpTest).
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor A() { return floats({1, 2, 3, -1, 0.5f, 2}, {2, 3}); }
Tensor W() { return floats({1, -1, 0.5f, 1, 0.5f, 2, -1, 0.25f, -2, 1, 1.5f, -0.5f}, {3, 4}); }
Tensor bias() { return floats({0.25f, -3, 0.5f, 1}, {4}); }
OpTest make(const std::string& act, bool with_bias, Tensor a = A()) {
  OpTest t("GatedMatMul", "fuseopt");
  t.input("A", std::move(a)).input("W", W());
  if (with_bias) t.input("bias", bias());
  t.attr(Attribute::make_string("activation", act));
  return t;
}
}  // namespace

TEST_CASE("GatedMatMul: silu with bias", "[kernels][GatedMatMul]") {
  expect_near(make("silu", true).run()[0], {-0.30157798f, 2.85772238f, -0.123603105f, -0.639676256f}, {2, 2}, 1e-6f);
}

TEST_CASE("GatedMatMul: silu without bias", "[kernels][GatedMatMul]") {
  expect_near(make("silu", false).run()[0], {-0.21583452f, 0.0f, -0.0814861114f, -7.36510343f}, {2, 2}, 1e-6f);
}

TEST_CASE("GatedMatMul: erf GELU", "[kernels][GatedMatMul]") {
  expect_near(make("gelu", true).run()[0], {-0.00116047687f, 2.99595031f, -3.82238227e-05f, -0.736176653f}, {2, 2},
              1e-6f);
  expect_near(make("gelu", false).run()[0], {-0.000380054902f, 0.0f, -9.6622908e-06f, -7.49976247f}, {2, 2}, 1e-6f);
}

TEST_CASE("GatedMatMul: tanh GELU", "[kernels][GatedMatMul]") {
  expect_near(make("gelu_tanh", true).run()[0], {-0.000767382254f, 2.99636261f, -1.28418435e-05f, -0.736042992f},
              {2, 2}, 1e-6f);
  expect_near(make("gelu_tanh", false).run()[0], {-0.000210737845f, 0.0f, -2.31560116e-06f, -7.49986829f}, {2, 2},
              1e-6f);
}

TEST_CASE("GatedMatMul: relu", "[kernels][GatedMatMul]") {
  expect_near(make("relu", true).run()[0], {0, 3, 0, -0.875f}, {2, 2});
  expect_near(make("relu", false).run()[0], {0, 0, 0, -7.5f}, {2, 2});
}

TEST_CASE("GatedMatMul: leading dims of A are kept", "[kernels][GatedMatMul]") {
  Tensor a3 = floats({1, 2, 3, -1, 0.5f, 2, 2, 4, 6, -2, 1, 4}, {2, 2, 3});
  expect_near(make("silu", true, a3).run()[0],
              {-0.30157798f, 2.85772238f, -0.123603105f, -0.639676256f, -0.021689313f, 8.99888945f, -0.00400026305f,
               -13.6579733f},
              {2, 2, 2}, 1e-5f);
}

TEST_CASE("GatedMatMul: bad shapes and a bad activation are errors", "[kernels][GatedMatMul]") {
  CHECK_THROWS_AS(make("swish", true).run(), Error);
  CHECK_THROWS_AS(make("silu", true, floats({1, 2, 3, 4}, {2, 2})).run(), Error);  // K = 2 vs W's 3
  OpTest odd("GatedMatMul", "fuseopt");  // W [3, 3]: no even split into gate and up
  odd.input("A", A()).input("W", floats({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}));
  odd.attr(Attribute::make_string("activation", "silu"));
  CHECK_THROWS_AS(odd.run(), Error);
  OpTest badbias("GatedMatMul", "fuseopt");
  badbias.input("A", A()).input("W", W()).input("bias", floats({1, 2}, {2}));
  badbias.attr(Attribute::make_string("activation", "silu"));
  CHECK_THROWS_AS(badbias.run(), Error);
}
