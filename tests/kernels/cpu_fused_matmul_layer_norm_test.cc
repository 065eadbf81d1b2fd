// fuseopt.FusedMatMulLayerNorm CPU kernel: hand-checked values (numpy, float64),
// random shapes against a float64 reference written here and against the
// unfused FusedMatMul + LayerNormalization graph on the CPU session (outputs
// poisoned first by OpTest), every optional input and attribute, bad inputs.
// With skip: the unfused FusedMatMul + SkipLayerNorm graph to the bit, the GEMM
// in either summand.
#include <cmath>
#include <cstring>

#include "support/fusion_check.h"
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

struct Case {
  std::vector<int64_t> a;  // A's shape, [..., K]
  int64_t n;
  bool trans_b, bias, beta;
  float alpha;
  std::string act;
};

Tensor A() { return floats({1, 2, 3, -1, 0.5f, 2}, {2, 3}); }
Tensor W() { return floats({1, -1, 0.5f, 2, 0.5f, 2, -2, 1, -2, 1, 1.5f, -0.5f}, {3, 4}); }
Tensor bias4() { return floats({0.25f, -3, 0.5f, 1}, {4}); }
Tensor gamma4() { return floats({1, 0.5f, 2, -1}, {4}); }
Tensor beta4() { return floats({0, 0.25f, -0.5f, 1}, {4}); }

OpTest make(const std::string& act) {
  OpTest t("FusedMatMulLayerNorm", "fuseopt");
  t.input("A", A()).input("W", W()).input("bias", bias4()).input("gamma", gamma4()).input("beta", beta4());
  t.attr(Attribute::make_string("activation", act)).attr(Attribute::make_float("epsilon", 1e-5f));
  return t;
}

// float64: h = act(alpha · A·op(W) + bias), y = (h − mean) / sqrt(var + eps) · gamma + beta.
std::vector<double> reference(const Case& c, const Tensor& a, const Tensor& w, const Tensor& b, const Tensor& g,
                              const Tensor& bt, float eps) {
  const int64_t K = c.a.back(), N = c.n;
  int64_t lead = 1;  // rows of Y
  for (size_t i = 0; i + 1 < c.a.size(); ++i) lead *= c.a[i];
  std::vector<double> y(static_cast<size_t>(lead * N)), h(static_cast<size_t>(N));
  for (int64_t r = 0; r < lead; ++r) {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += double(a.data<float>()[r * K + k]) * w.data<float>()[c.trans_b ? j * K + k : k * N + j];
      s = c.alpha * s + (c.bias ? b.data<float>()[j] : 0.0);
      h[j] = c.act == "gelu" ? 0.5 * s * (1 + std::erf(s / std::sqrt(2.0)))
                             : 0.5 * s * (1 + std::tanh(std::sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
    }
    double mean = 0, var = 0;
    for (double v : h) mean += v;
    mean /= N;
    for (double v : h) var += (v - mean) * (v - mean);
    var /= N;
    for (int64_t j = 0; j < N; ++j)
      y[r * N + j] = (h[j] - mean) / std::sqrt(var + eps) * g.data<float>()[j] + (c.beta ? bt.data<float>()[j] : 0.0);
  }
  return y;
}

const Case kCases[] = {
    {{5, 7}, 13, false, true, true, 1.0f, "gelu"},
    {{2, 3, 17}, 80, true, true, true, 0.5f, "gelu_tanh"},
    {{9}, 33, false, false, true, 1.0f, "gelu"},          // 1-D A: Y [N]
    {{3, 1, 24}, 1000, false, true, false, 1.0f, "gelu"},  // hidden 1000, no beta
    {{4, 64}, 768, true, false, false, 2.0f, "gelu_tanh"},
    {{2, 3, 0}, 5, false, true, true, 1.0f, "gelu"},      // K = 0: every row is norm(act(bias))
};

}  // namespace

TEST_CASE("FusedMatMulLayerNorm: erf GELU then LayerNorm, hand-checked", "[kernels][FusedMatMulLayerNorm]") {
  // numpy float64 of LayerNorm(gelu(A·W + b)) · gamma + beta, h = [[-3.75, 3, 1.5, 3.5], [-4.5, 1, 2, -1.5]].
  expect_near(make("gelu").run()[0],
              {-1.43223417f, 0.620868921f, -1.33273470f, -0.106863700f, -0.817034245f, 0.351498961f, 2.60508752f,
               1.93850744f},
              {2, 4}, 1e-5f);
}

TEST_CASE("FusedMatMulLayerNorm: tanh GELU then LayerNorm, hand-checked", "[kernels][FusedMatMulLayerNorm]") {
  expect_near(make("gelu_tanh").run()[0],
              {-1.43212616f, 0.620942116f, -1.33316493f, -0.106824458f, -0.816863954f, 0.351436347f, 2.60518551f,
               1.93860149f},
              {2, 4}, 1e-5f);
}

TEST_CASE("FusedMatMulLayerNorm: random shapes against a float64 reference", "[kernels][FusedMatMulLayerNorm]") {
  uint32_t seed = 11;
  for (const Case& c : kCases) {
    const int64_t K = c.a.back();
    Tensor a = rand_tensor(c.a, seed++, -2, 2);
    Tensor w = rand_tensor(c.trans_b ? std::vector<int64_t>{c.n, K} : std::vector<int64_t>{K, c.n}, seed++, -0.5f, 0.5f);
    Tensor b = rand_tensor({c.n}, seed++), g = rand_tensor({c.n}, seed++, 0.5f, 1.5f), bt = rand_tensor({c.n}, seed++);
    OpTest t("FusedMatMulLayerNorm", "fuseopt");
    t.input("A", a).input("W", w);
    if (c.bias) t.input("bias", b);
    else t.omitted_input();
    t.input("gamma", g);
    if (c.beta) t.input("beta", bt);
    t.attr(Attribute::make_string("activation", c.act)).attr(Attribute::make_float("epsilon", 1e-5f));
    t.attr(Attribute::make_int("transB", c.trans_b)).attr(Attribute::make_float("alpha", c.alpha));
    Tensor y = t.run()[0];
    std::vector<int64_t> ydims = c.a;
    ydims.back() = c.n;
    INFO("A " << shape_str(c.a) << " N " << c.n << " " << c.act);
    REQUIRE(y.dims == ydims);
    const std::vector<double> want = reference(c, a, w, b, g, bt, 1e-5f);
    for (int64_t i = 0; i < y.numel(); ++i) {
      INFO("element " << i);
      REQUIRE(std::fabs(y.data<float>()[i] - want[i]) <= 2e-5 * std::max(1.0, std::fabs(want[i])));
    }
  }
}

// The fused op's purpose is to reproduce FusedMatMul followed by LayerNormalization.
TEST_CASE("FusedMatMulLayerNorm: equals the unfused FusedMatMul + LayerNormalization graph",
          "[kernels][FusedMatMulLayerNorm]") {
  for (const Case& c : kCases) {
    const int64_t K = c.a.back();
    auto build = [&](bool fused) {
      GraphBuilder b(17);
      Value* a = b.input("a", DType::Float, c.a);
      Value* w = b.constant("W", rand_tensor(c.trans_b ? std::vector<int64_t>{c.n, K} : std::vector<int64_t>{K, c.n}, 3));
      Value* bias = c.bias ? b.constant("bias", rand_tensor({c.n}, 4)) : nullptr;
      Value* g = b.constant("gamma", rand_tensor({c.n}, 5, 0.5f, 1.5f));
      Value* bt = c.beta ? b.constant("beta", rand_tensor({c.n}, 6)) : nullptr;
      std::vector<Attribute> mm = {Attribute::make_int("transB", c.trans_b), Attribute::make_float("alpha", c.alpha),
                                   Attribute::make_string("activation", c.act)};
      if (fused) {
        mm.push_back(Attribute::make_float("epsilon", 1e-5f));
        std::vector<Value*> in = {a, w, bias, g};
        if (bt) in.push_back(bt);
        b.output(b.op("FusedMatMulLayerNorm", in, mm, "f", "fuseopt"));
      } else {
        std::vector<Value*> in = {a, w};
        if (bias) in.push_back(bias);
        Value* h = b.op("FusedMatMul", in, mm, "mm", "fuseopt");
        std::vector<Value*> lin = {h, g};
        if (bt) lin.push_back(bt);
        b.output(b.op("LayerNormalization", lin, {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}));
      }
      return b.release();
    };
    INFO("A " << shape_str(c.a) << " N " << c.n << " " << c.act);
    auto unfused = build(false);
    auto fused = build(true);
    require_same_outputs(*unfused, *fused, {{"a", rand_tensor(c.a, 9, -2, 2)}}, 1e-6f);
  }
}

// The skip form's purpose is to reproduce FusedMatMul(activation none) followed by
// SkipLayerNorm, bit for bit in fp32 (rows and N not multiples of 8).
TEST_CASE("FusedMatMulLayerNorm: with skip equals the unfused FusedMatMul + SkipLayerNorm graph to the bit",
          "[kernels][FusedMatMulLayerNorm][skip]") {
  struct SkipCase {
    std::vector<int64_t> a;
    int64_t n;
    bool trans_b, bias, beta, gemm_first;
    float alpha;
  };
  const SkipCase cases[] = {
      {{37, 80}, 96, false, true, true, true, 1.0f},
      {{37, 80}, 96, true, true, false, false, 1.0f},
      {{1, 37, 80}, 96, false, false, true, false, 0.5f},
      {{3, 7, 13}, 33, true, false, false, true, 2.0f},
      {{5, 0}, 11, false, true, true, true, 1.0f},  // K = 0: every row is norm(bias + skip)
  };
  uint32_t seed = 40;
  for (const SkipCase& c : cases) {
    const int64_t K = c.a.back();
    std::vector<int64_t> ydims = c.a;
    ydims.back() = c.n;
    const Tensor w = rand_tensor(c.trans_b ? std::vector<int64_t>{c.n, K} : std::vector<int64_t>{K, c.n}, seed++,
                                 -0.5f, 0.5f);
    const Tensor bias = rand_tensor({c.n}, seed++), g = rand_tensor({c.n}, seed++, 0.5f, 1.5f),
                 bt = rand_tensor({c.n}, seed++);
    auto build = [&](bool fused) {
      GraphBuilder b(17);
      Value* a = b.input("a", DType::Float, c.a);
      Value* res = b.input("res", DType::Float, ydims);
      Value* wv = b.constant("W", w);
      Value* bv = c.bias ? b.constant("bias", bias) : nullptr;
      Value* gv = b.constant("gamma", g);
      Value* btv = c.beta ? b.constant("beta", bt) : nullptr;
      std::vector<Attribute> mm = {Attribute::make_int("transB", c.trans_b), Attribute::make_float("alpha", c.alpha),
                                   Attribute::make_string("activation", "none")};
      if (fused) {
        mm.push_back(Attribute::make_float("epsilon", 1e-12f));
        b.output(b.op("FusedMatMulLayerNorm", {a, wv, bv, gv, btv, res}, mm, "f", "fuseopt"));
      } else {
        std::vector<Value*> in = {a, wv};
        if (bv) in.push_back(bv);
        Value* h = b.op("FusedMatMul", in, mm, "mm", "fuseopt");
        std::vector<Value*> sin = {c.gemm_first ? h : res, c.gemm_first ? res : h, gv};
        if (btv) sin.push_back(btv);
        b.output(b.op("SkipLayerNorm", sin, {Attribute::make_float("epsilon", 1e-12f)}, "sln", "fuseopt"));
      }
      return b.release();
    };
    INFO("A " << shape_str(c.a) << " N " << c.n << " transB " << c.trans_b << " bias " << c.bias << " beta "
              << c.beta << " GEMM into " << (c.gemm_first ? "X" : "skip"));
    const std::map<std::string, Tensor> feeds{{"a", rand_tensor(c.a, seed++, -2, 2)},
                                              {"res", rand_tensor(ydims, seed++, -2, 2)}};
    const std::vector<Tensor> want = run_cpu(*build(false), feeds);
    const std::vector<Tensor> got = run_cpu(*build(true), feeds);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].dims == want[0].dims);
    REQUIRE(got[0].dims == ydims);
    CHECK(std::memcmp(got[0].data<float>(), want[0].data<float>(), static_cast<size_t>(got[0].numel()) * 4) == 0);
  }
}

TEST_CASE("FusedMatMulLayerNorm: bad inputs are one-line errors", "[kernels][FusedMatMulLayerNorm]") {
  CHECK_THROWS_AS(make("relu").run(), Error);  // not a GELU
  CHECK_THROWS_WITH(make("none").run(), Catch::Contains("none only with skip"));
  {
    OpTest t = make("gelu");  // skip with a GELU
    t.input("skip", floats(std::vector<float>(8, 1.0f), {2, 4}));
    CHECK_THROWS_WITH(t.run(), Catch::Contains("with skip the activation must be none"));
  }
  {
    OpTest t = make("none");  // skip [1, 4] would broadcast over Y [2, 4]
    t.input("skip", floats({1, 2, 3, 4}, {1, 4}));
    CHECK_THROWS_WITH(t.run(), Catch::Contains("no broadcast"));
  }
  {
    OpTest t("FusedMatMulLayerNorm", "fuseopt");
    t.input("A", A()).input("W", floats({1, 2, 3, 4, 5, 6}, {2, 3})).input("bias", floats({0, 0, 0}, {3}));
    t.input("gamma", floats({1, 1, 1}, {3})).attr(Attribute::make_string("activation", "gelu"));
    CHECK_THROWS_AS(t.run(), Error);  // K = 3 against W's 2 rows
  }
  {
    OpTest t("FusedMatMulLayerNorm", "fuseopt");
    t.input("A", A()).input("W", W()).input("bias", bias4()).input("gamma", floats({1, 1, 1}, {3}));
    t.attr(Attribute::make_string("activation", "gelu"));
    CHECK_THROWS_AS(t.run(), Error);  // gamma [3] for N = 4
  }
  {
    OpTest t("FusedMatMulLayerNorm", "fuseopt");
    t.input("A", A()).input("W", floats(std::vector<float>(24, 1.0f), {2, 3, 4})).omitted_input();
    t.input("gamma", gamma4()).attr(Attribute::make_string("activation", "gelu"));
    CHECK_THROWS_AS(t.run(), Error);  // batched W
  }
}
