// fuseopt.LayerNorm / RMSNorm / SkipLayerNorm CPU kernels against numpy values.
// X = [[1,2,3,4],[2,-2,0,8]], gamma = [1,0.5,2,-1], beta = [0,1,0,-1].
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor X() { return floats({1, 2, 3, 4, 2, -2, 0, 8}, {2, 4}); }
Tensor gamma() { return floats({1, 0.5f, 2, -1}, {4}); }
Tensor beta() { return floats({0, 1, 0, -1}, {4}); }
Tensor skip() { return floats({0.5f, 0.5f, -1, 1, 1, 1, 1, 1}, {2, 4}); }
Tensor bias() { return floats({0.1f, 0.2f, 0.3f, 0.4f}, {4}); }
const std::vector<float> kLN{-1.3416355f, 0.77639407f, 0.89442366f, -2.3416355f,
                             0.0f,        0.46547771f, -1.0690446f, -2.6035669f};
const std::vector<float> kRMS{0.36514837f, 0.36514837f, 2.1908901f, -1.4605935f,
                              0.47140449f, -0.23570225f, 0.0f,      -1.885618f};
const std::vector<float> kSum{1.6f, 2.7f, 2.3f, 5.4f, 3.1f, -0.8f, 1.3f, 9.4f};
const std::vector<float> kSkipLN{-0.97189182f, 0.89586878f, -0.97189188f, -2.6661005f,
                                 -0.039374977f, 0.46843815f, -1.0237488f, -2.6143727f};
const std::vector<float> kSkipRMS{0.48078188f, 0.40565971f, 1.3822478f,  -1.6226388f,
                                  0.61907208f, -0.07988026f, 0.51922172f, -1.8771862f};
}  // namespace

TEST_CASE("LayerNorm kernel", "[kernels][LayerNorm]") {
  OpTest t("LayerNorm", "fuseopt");
  t.input("X", X()).input("gamma", gamma()).input("beta", beta()).attr(Attribute::make_float("epsilon", 1e-5f));
  expect_near(t.run()[0], kLN, {2, 4});
}

TEST_CASE("LayerNorm kernel: rows with a large mean stay accurate", "[kernels][LayerNorm]") {
  // 1e4 + [1,2,3,4]: same normalised values as [1,2,3,4] (naive E[x^2]-E[x]^2 loses them).
  OpTest t("LayerNorm", "fuseopt");
  t.input("X", floats({10001, 10002, 10003, 10004}, {1, 4})).input("gamma", gamma()).input("beta", beta());
  t.attr(Attribute::make_float("epsilon", 1e-5f));
  expect_near(t.run()[0], {-1.3416355f, 0.77639407f, 0.89442366f, -2.3416355f}, {1, 4}, 1e-4f);
}

TEST_CASE("RMSNorm kernel", "[kernels][RMSNorm]") {
  OpTest t("RMSNorm", "fuseopt");
  t.input("X", X()).input("gamma", gamma()).attr(Attribute::make_float("epsilon", 1e-6f));
  expect_near(t.run()[0], kRMS, {2, 4});
}

TEST_CASE("SkipLayerNorm kernel: bias and Sum output", "[kernels][SkipLayerNorm]") {
  OpTest t("SkipLayerNorm", "fuseopt");
  t.input("X", X()).input("skip", skip()).input("gamma", gamma()).input("beta", beta()).input("bias", bias());
  t.attr(Attribute::make_float("epsilon", 1e-5f)).attr(Attribute::make_int("rms", 0)).num_outputs(2);
  auto out = t.run();
  expect_near(out[0], kSkipLN, {2, 4});
  expect_near(out[1], kSum, {2, 4});
}

TEST_CASE("SkipLayerNorm kernel: rms, no beta, one output", "[kernels][SkipLayerNorm]") {
  OpTest t("SkipLayerNorm", "fuseopt");
  t.input("X", X()).input("skip", skip()).input("gamma", gamma()).omitted_input().input("bias", bias());
  t.attr(Attribute::make_float("epsilon", 1e-6f)).attr(Attribute::make_int("rms", 1));
  expect_near(t.run()[0], kSkipRMS, {2, 4});
}

TEST_CASE("SkipLayerNorm kernel: skip broadcast over the batch", "[kernels][SkipLayerNorm]") {
  // skip [1, 4] = ones added to every row.
  OpTest t("SkipLayerNorm", "fuseopt");
  t.input("X", X()).input("skip", floats({1, 1, 1, 1}, {1, 4})).input("gamma", gamma()).input("beta", beta());
  t.attr(Attribute::make_float("epsilon", 1e-5f)).num_outputs(2);
  auto out = t.run();
  expect_near(out[1], {2, 3, 4, 5, 3, -1, 1, 9}, {2, 4});
  expect_near(out[0], kLN, {2, 4}, 1e-5f, 1e-4f);  // LayerNorm is shift-invariant per row
}

TEST_CASE("LayerNorm kernels reject a gamma of the wrong size", "[kernels][LayerNorm]") {
  OpTest t("LayerNorm", "fuseopt");
  t.input("X", X()).input("gamma", floats({1, 2, 3}, {3}));
  CHECK_THROWS_AS(t.run(), Error);
}
