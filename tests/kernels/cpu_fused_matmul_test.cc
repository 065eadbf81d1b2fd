// fuseopt.FusedMatMul CPU kernel against numpy-computed values.
// A = [[1,2,3],[-1,0.5,2]], B = [[1,-1],[0.5,2],[-2,1]], bias = [0.25,-3].
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor A() { return floats({1, 2, 3, -1, 0.5f, 2}, {2, 3}); }
Tensor B() { return floats({1, -1, 0.5f, 2, -2, 1}, {3, 2}); }
Tensor Bt() { return floats({1, 0.5f, -2, -1, 2, 1}, {2, 3}); }
Tensor bias() { return floats({0.25f, -3}, {2}); }
OpTest make(const std::string& act, Tensor b, bool trans_b = false, float alpha = 1.0f, bool with_bias = true) {
  OpTest t("FusedMatMul", "fuseopt");
  t.input("A", A()).input("B", std::move(b));
  if (with_bias) t.input("bias", bias());
  t.attr(Attribute::make_string("activation", act)).attr(Attribute::make_int("transB", trans_b ? 1 : 0));
  t.attr(Attribute::make_float("alpha", alpha));
  return t;
}
}  // namespace

TEST_CASE("FusedMatMul: bias, no activation", "[kernels][FusedMatMul]") {
  expect_near(make("none", B()).run()[0], {-3.75f, 3.0f, -4.5f, 1.0f}, {2, 2});
}

TEST_CASE("FusedMatMul: transB gives the same product", "[kernels][FusedMatMul]") {
  expect_near(make("none", Bt(), true).run()[0], {-3.75f, 3.0f, -4.5f, 1.0f}, {2, 2});
}

TEST_CASE("FusedMatMul: erf GELU", "[kernels][FusedMatMul]") {
  expect_near(make("gelu", B()).run()[0], {-0.00033156481f, 2.9959502f, -1.5289528e-05f, 0.84134477f}, {2, 2},
              1e-6f);
}

TEST_CASE("FusedMatMul: tanh GELU", "[kernels][FusedMatMul]") {
  expect_near(make("gelu_tanh", B()).run()[0], {-0.00021925208f, 2.9963627f, -5.1367374e-06f, 0.84119201f}, {2, 2},
              1e-6f);
}

TEST_CASE("FusedMatMul: tanh (BERT pooler), with and without bias", "[kernels][FusedMatMul]") {
  expect_near(make("tanh", B()).run()[0], {-0.998894442f, 0.9950547536f, -0.999753210f, 0.7615941559f}, {2, 2},
              1e-6f);
  // A·B = [[-4, 6], [-4.75, 4]] without the bias
  expect_near(make("tanh", B(), false, 1.0f, false).run()[0],
              {-0.999329299f, 0.9999877116f, -0.999850307f, 0.9993292997f}, {2, 2}, 1e-6f);
}

TEST_CASE("FusedMatMul: alpha and relu", "[kernels][FusedMatMul]") {
  // relu(2 * A·B + bias)
  expect_near(make("relu", B(), false, 2.0f).run()[0], {0, 9, 0, 5}, {2, 2});
}

TEST_CASE("FusedMatMul: QuickGELU (CLIP) and SiLU, with and without bias", "[kernels][FusedMatMul]") {
  // A·B + bias = [[-3.75, 3], [-4.5, 1]] -> x * sigmoid(1.702 x) / x * sigmoid(x) (numpy, float32)
  expect_near(make("quick_gelu", B()).run()[0], {-0.006330134f, 2.9819288f, -0.002122005f, 0.8457958f}, {2, 2}, 1e-6f);
  expect_near(make("silu", B()).run()[0], {-0.08616514f, 2.8577225f, -0.04944124f, 0.7310586f}, {2, 2}, 1e-6f);
  // A·B = [[-4, 6], [-4.75, 4]] without the bias
  expect_near(make("silu", Bt(), true, 1.0f, false).run()[0], {-0.07194484f, 5.9851646f, -0.04074306f, 3.928055f},
              {2, 2}, 1e-6f);
}

TEST_CASE("FusedMatMul: squared ReLU (relu2), with alpha and without bias", "[kernels][FusedMatMul]") {
  // A·B + bias = [[-3.75, 3], [-4.5, 1]] -> max(., 0)^2
  expect_near(make("relu2", B()).run()[0], {0, 9, 0, 1}, {2, 2});
  // 2 * A·B + bias = [[-7.75, 9], [-9.25, 5]]; A·B = [[-4, 6], [-4.75, 4]]
  expect_near(make("relu2", B(), false, 2.0f).run()[0], {0, 81, 0, 25}, {2, 2});
  expect_near(make("relu2", Bt(), true, 1.0f, false).run()[0], {0, 36, 0, 16}, {2, 2});
}

TEST_CASE("FusedMatMul: batched A, no bias", "[kernels][FusedMatMul]") {
  OpTest t("FusedMatMul", "fuseopt");
  t.input("A", floats({1, 2, 3, -1, 0.5f, 2, 2, 4, 6, -2, 1, 4}, {2, 2, 3})).input("B", B());
  expect_near(t.run()[0], {-4, 6, -4.75f, 4, -8, 12, -9.5f, 8}, {2, 2, 2});
}

TEST_CASE("FusedMatMul: mismatched inner dims and a bad activation are errors", "[kernels][FusedMatMul]") {
  CHECK_THROWS_AS(make("none", Bt()).run(), Error);  // [2,3]·[2,3]
  CHECK_THROWS_AS(make("swish", B()).run(), Error);
}

TEST_CASE("FusedMatMul: batched B broadcasts over A's batch of 1", "[kernels][FusedMatMul]") {
  // B2 = stack(B, 1 - B); A [1, 2, 3]
  OpTest t("FusedMatMul", "fuseopt");
  t.input("A", floats({1, 2, 3, -1, 0.5f, 2}, {1, 2, 3}));
  t.input("B", floats({1, -1, 0.5f, 2, -2, 1, 0, 2, 0.5f, -1, 3, 0}, {2, 3, 2}));
  expect_near(t.run()[0], {-4, 6, -4.75f, 4, 10, 0, 6.25f, -2.5f}, {2, 2, 2});
}

TEST_CASE("FusedMatMul: 1-D A drops the M dim", "[kernels][FusedMatMul]") {
  OpTest t("FusedMatMul", "fuseopt");
  t.input("A", floats({1, 2, 3}, {3})).input("B", B());
  expect_near(t.run()[0], {-4, 6}, {2});
}

// Input 3 (ResidualMatMul): Y = act(alpha·A·op(B) + bias) + residual, the residual read
// row-major as Y's shape (any shape with Y's element count), added after the activation.
TEST_CASE("FusedMatMul: residual added after the activation", "[kernels][FusedMatMul][residual]") {
  // A·B + bias = [[-3.75, 3], [-4.5, 1]]
  OpTest t = make("none", B());
  t.input("residual", floats({1, 2, 3, 4}, {2, 2}));
  expect_near(t.run()[0], {-2.75f, 5.0f, -1.5f, 5.0f}, {2, 2});
  // relu(2·A·B + bias) = [[0, 9], [0, 5]] + residual
  OpTest r = make("relu", B(), false, 2.0f);
  r.input("residual", floats({1, 2, 3, 4}, {2, 2}));
  expect_near(r.run()[0], {1, 11, 3, 9}, {2, 2});
  // erf GELU then the residual
  OpTest g = make("gelu", B());
  g.input("residual", floats({0.5f, -0.5f, 1, 0}, {2, 2}));
  expect_near(g.run()[0], {0.5f - 0.00033156481f, -0.5f + 2.9959502f, 1 - 1.5289528e-05f, 0.84134477f}, {2, 2}, 1e-6f);
}

TEST_CASE("FusedMatMul: residual without bias (an omitted bias keeps its slot)", "[kernels][FusedMatMul][residual]") {
  // A·B = [[-4, 6], [-4.75, 4]]
  OpTest t = make("none", B(), false, 1.0f, false);
  t.omitted_input().input("residual", floats({1, 1, 1, 1}, {2, 2}));
  expect_near(t.run()[0], {-3, 7, -3.75f, 5}, {2, 2});
}

TEST_CASE("FusedMatMul: a residual of another shape with Y's element count is read row-major",
          "[kernels][FusedMatMul][residual]") {
  // Y [2, 2] (a GEMM on the 2-D view) with a [1, 2, 2] or [4] residual: the same bytes.
  for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 2, 2}, std::vector<int64_t>{4}}) {
    OpTest t = make("none", B());
    t.input("residual", floats({1, 2, 3, 4}, dims));
    expect_near(t.run()[0], {-2.75f, 5.0f, -1.5f, 5.0f}, {2, 2});
  }
  // Batched A [2, 2, 3] (Y [2, 2, 2]) with a [4, 2] residual.
  OpTest t("FusedMatMul", "fuseopt");
  t.input("A", floats({1, 2, 3, -1, 0.5f, 2, 2, 4, 6, -2, 1, 4}, {2, 2, 3})).input("B", B());
  t.omitted_input().input("residual", floats({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}));
  expect_near(t.run()[0], {-3, 8, -1.75f, 8, -3, 18, -2.5f, 16}, {2, 2, 2});
}

TEST_CASE("FusedMatMul: a residual of the wrong element count or dtype is an error",
          "[kernels][FusedMatMul][residual]") {
  OpTest t = make("none", B());
  t.input("residual", floats({1, 2, 3}, {3}));
  CHECK_THROWS_WITH(t.run(), Catch::Matchers::Contains("residual [3] has 3 elements, Y [2,2] has 4"));
  OpTest d = make("none", B());
  Tensor r(DType::Double, {2, 2});
  d.input("residual", r);
  CHECK_THROWS_WITH(d.run(), Catch::Matchers::Contains("residual is float64"));
}
