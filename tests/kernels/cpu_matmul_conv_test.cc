// MatMul (batch broadcast, 1-D operands), Gemm (transA/transB/alpha/beta/C),
// Conv (groups, pads, strides, dilations, auto_pad), pooling, BatchNorm.
// References from tests/kernels/gen_cpu_math_refs.py (numpy).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu_math_refs.h"
#include "kernels/cpu_math_test_util.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace cpu_math_refs;

TEST_CASE("MatMul broadcasts batch dims", "[cpu][matmul]") {
  OpTest t("MatMul");
  t.input("a", pat({2, 1, 3, 4})).input("b", pat2({3, 4, 5}));
  expect_near(t.run()[0], k_mm_bcast, {2, 3, 3, 5});
}

TEST_CASE("MatMul with 1-D operands drops the promoted dim", "[cpu][matmul]") {
  OpTest l("MatMul");
  l.input("a", pat({4})).input("b", pat2({2, 4, 3}));
  expect_near(l.run()[0], k_mm_vec_left, {2, 3});
  OpTest r("MatMul");
  r.input("a", pat({2, 3, 4})).input("b", pat2({4}));
  expect_near(r.run()[0], k_mm_vec_right, {2, 3});
  OpTest v("MatMul");
  v.input("a", pat({4})).input("b", pat2({4}));
  expect_near(v.run()[0], k_mm_vec_vec, {});
}

TEST_CASE("MatMul inner-dim mismatch is an Error with both shapes", "[cpu][matmul]") {
  OpTest t("MatMul");
  t.input("a", pat({2, 3})).input("b", pat({4, 2}));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("MatMul_node") && Catch::Contains("[2,3]") && Catch::Contains("[4,2]"));
}

TEST_CASE("Gemm with transA, transB, alpha, beta and a broadcast C", "[cpu][gemm]") {
  OpTest t("Gemm");
  t.input("a", pat({4, 3})).input("b", pat2({5, 4})).input("c", pat3({5}));
  t.attr(Attribute::make_int("transA", 1)).attr(Attribute::make_int("transB", 1));
  t.attr(Attribute::make_float("alpha", 0.5f)).attr(Attribute::make_float("beta", 2.0f));
  expect_near(t.run()[0], k_gemm, {3, 5});
}

TEST_CASE("Conv with groups, asymmetric pads, strides and dilations", "[cpu][conv]") {
  OpTest t("Conv");
  t.input("x", pat({1, 4, 5, 6})).input("w", pat2({4, 2, 3, 2})).input("b", pat3({4}));
  t.attr(Attribute::make_int("group", 2)).attr(Attribute::make_ints("strides", {2, 1}));
  t.attr(Attribute::make_ints("pads", {1, 0, 1, 1})).attr(Attribute::make_ints("dilations", {1, 2}));
  expect_near(t.run()[0], k_conv_g2, {1, 4, 3, 5}, 1e-5f, 1e-4f);
}

TEST_CASE("Conv auto_pad SAME_UPPER, no bias", "[cpu][conv]") {
  OpTest t("Conv");
  t.input("x", pat({2, 3, 4, 4})).input("w", pat2({2, 3, 3, 3}));
  t.attr(Attribute::make_string("auto_pad", "SAME_UPPER")).attr(Attribute::make_ints("strides", {2, 2}));
  expect_near(t.run()[0], k_conv_same, {2, 2, 2, 2}, 1e-5f, 1e-4f);
}

TEST_CASE("Conv channel mismatch is an Error", "[cpu][conv]") {
  OpTest t("Conv");
  t.input("x", pat({1, 3, 4, 4})).input("w", pat2({2, 2, 3, 3}));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("Conv_node") && Catch::Contains("channels"));
}

namespace {
// Direct 2-D convolution (every tap, padding read as 0): the reference for pads
// larger than the input.
std::vector<float> naive_conv(const Tensor& x, const Tensor& w, const Tensor& b, int64_t group,
                              std::vector<int64_t> st, std::vector<int64_t> pads, std::vector<int64_t> dil,
                              std::vector<int64_t>& out_dims) {
  const int64_t N = x.dims[0], C = x.dims[1], H = x.dims[2], W = x.dims[3];
  const int64_t OC = w.dims[0], Cg = w.dims[1], KH = w.dims[2], KW = w.dims[3], OCg = OC / group;
  const int64_t OH = (H + pads[0] + pads[2] - (KH - 1) * dil[0] - 1) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - (KW - 1) * dil[1] - 1) / st[1] + 1;
  out_dims = {N, OC, OH, OW};
  std::vector<float> y(static_cast<size_t>(N * OC * OH * OW));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b.data<float>()[oc];
          const int64_t g = oc / OCg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * st[0] - pads[0] + kh * dil[0], iw = ow * st[1] - pads[1] + kw * dil[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += double(x.data<float>()[((n * C + g * Cg + c) * H + ih) * W + iw]) *
                       w.data<float>()[((oc * Cg + c) * KH + kh) * KW + kw];
              }
          y[static_cast<size_t>(((n * OC + oc) * OH + oh) * OW + ow)] = static_cast<float>(acc);
        }
  return y;
}
}  // namespace

TEST_CASE("Conv with pads larger than the input computes only the windows that reach it", "[cpu][conv]") {
  // mutate_models.py seed 8 m534: pads [1, 1, 1, 65536] on a 32-wide input ran im2col and
  // GEMM over 65567 output columns (past the 120 s timeout under ASan); the windows that
  // are all padding give the bias.
  struct Case { int64_t group; std::vector<int64_t> st, pads, dil; };
  for (const Case& c : {Case{1, {1, 1}, {1, 1, 1, 40}, {1, 1}}, Case{2, {2, 3}, {7, 9, 5, 11}, {1, 2}},
                        Case{1, {3, 1}, {0, 6, 8, 0}, {2, 1}}, Case{2, {1, 2}, {4, 4, 4, 4}, {3, 3}}}) {
    Tensor x = pat({2, 4, 5, 6}), w = pat2({4, 4 / c.group, 3, 2}), b = pat3({4});
    OpTest t("Conv");
    t.input("x", x).input("w", w).input("b", b);
    t.attr(Attribute::make_int("group", c.group)).attr(Attribute::make_ints("strides", c.st));
    t.attr(Attribute::make_ints("pads", c.pads)).attr(Attribute::make_ints("dilations", c.dil));
    std::vector<int64_t> dims;
    std::vector<float> want = naive_conv(x, w, b, c.group, c.st, c.pads, c.dil, dims);
    expect_near(t.run()[0], want, dims, 1e-5f, 1e-4f);
  }
  // The seed-8 geometry: 32 x 32 input, pads [1, 1, 1, 65536]: quick, and the far columns are the bias.
  OpTest big("Conv");
  big.input("x", pat({1, 2, 32, 32})).input("w", pat2({3, 2, 3, 3})).input("b", pat3({3}));
  big.attr(Attribute::make_ints("pads", {1, 1, 1, 65536}));
  Tensor y = big.run()[0];
  REQUIRE(y.dims == std::vector<int64_t>{1, 3, 32, 65567});
  const Tensor bias = pat3({3});
  for (int64_t oc = 0; oc < 3; ++oc)
    for (int64_t ow : {int64_t{34}, int64_t{1000}, int64_t{65566}})
      CHECK(y.data<float>()[(oc * 32 + 7) * 65567 + ow] == bias.data<float>()[oc]);
  std::vector<int64_t> dims;
  std::vector<float> near = naive_conv(pat({1, 2, 32, 32}), pat2({3, 2, 3, 3}), bias, 1, {1, 1}, {1, 1, 1, 3}, {1, 1}, dims);
  for (int64_t oc = 0; oc < 3; ++oc)
    for (int64_t oh = 0; oh < 32; ++oh)
      for (int64_t ow = 0; ow < dims[3]; ++ow)
        CHECK(std::fabs(y.data<float>()[(oc * 32 + oh) * 65567 + ow] - near[((oc * 32 + oh) * dims[3]) + ow]) < 1e-4f);
}

TEST_CASE("MaxPool and AveragePool with pads; count_include_pad; ceil_mode", "[cpu][pool]") {
  auto pool = [](const char* op, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> pads) {
    OpTest t(op);
    t.input("x", pat({1, 2, 5, 5})).attr(Attribute::make_ints("kernel_shape", k)).attr(Attribute::make_ints("strides", s));
    t.attr(Attribute::make_ints("pads", pads));
    return t;
  };
  expect_near(pool("MaxPool", {3, 3}, {2, 2}, {1, 1, 1, 1}).run()[0], k_maxpool, {1, 2, 3, 3});
  expect_near(pool("AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}).run()[0], k_avgpool_excl, {1, 2, 3, 3});
  OpTest inc = pool("AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1});
  inc.attr(Attribute::make_int("count_include_pad", 1));
  expect_near(inc.run()[0], k_avgpool_incl, {1, 2, 3, 3});
  OpTest ceil = pool("MaxPool", {2, 2}, {2, 2}, {0, 0, 0, 0});
  ceil.attr(Attribute::make_int("ceil_mode", 1));
  expect_near(ceil.run()[0], k_maxpool_ceil, {1, 2, 3, 3});
}

TEST_CASE("GlobalAveragePool keeps spatial dims as 1", "[cpu][pool]") {
  OpTest t("GlobalAveragePool");
  t.input("x", floats({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 2, 2}));
  expect_near(t.run()[0], {2.5f, 25}, {1, 2, 1, 1});
}

TEST_CASE("BatchNormalization inference", "[cpu][batchnorm]") {
  OpTest t("BatchNormalization");
  t.input("x", floats({1, 2, 3, 4}, {1, 2, 2, 1}));
  t.input("scale", floats({1, 2}, {2})).input("b", floats({0, 1}, {2}));
  t.input("mean", floats({1, 3}, {2})).input("var", floats({4, 1}, {2}));
  t.attr(Attribute::make_float("epsilon", 0));
  // c0: (x-1)/2; c1: (x-3)*2+1
  expect_near(t.run()[0], {0, 0.5f, 1, 3}, {1, 2, 2, 1});
}
