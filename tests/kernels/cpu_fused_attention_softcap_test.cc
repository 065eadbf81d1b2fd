// fuseopt.Attention's softcap (Gemma-2 logit soft-capping, ONNX Attention-23's softcap) on
// the CPU against a naive double-precision reference written from docs/fused_ops.md:
//   s = scale·q·k; s = softcap·tanh(s / softcap); s += attn_bias; masked keys -> fill;
//   causal exclusions -> -inf; softmax; ·V.
// The cap must come before the bias and the masks: a masked key keeps its fill (capping
// it would give -softcap, a finite score that leaks probability). Outputs are NaN-poisoned
// by the OpTest harness before the kernel runs.
#include <cmath>
#include <limits>
#include <vector>

#include "support/fusion_check.h"
#include "support/op_test.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

struct CapCase {
  int64_t B, S, Skv, H, Hkv, Dh;
  float scale, softcap;
  bool causal = false, mask = false, bias = false;
};

void run_cap_case(const CapCase& c) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " cap "
           << c.softcap << (c.causal ? " causal" : "") << (c.mask ? " mask" : "") << (c.bias ? " bias" : ""));
  // Scores up to ~|4·Dh·scale| so that the cap (a few units) bends them well away from linear.
  Tensor q = rand_tensor({c.B, c.S, c.H * c.Dh}, 21, -2, 2);
  Tensor k = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 22, -2, 2);
  Tensor v = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 23, -2, 2);
  Tensor mask(DType::Int64, {c.B, c.Skv});
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t j = 0; j < c.Skv; ++j) mask.data<int64_t>()[b * c.Skv + j] = j < c.Skv - b;
  Tensor bias = rand_tensor({1, c.H, c.S, c.Skv}, 24, -3, 3);
  const float fill = -std::numeric_limits<float>::max();
  OpTest t("Attention", "fuseopt");
  t.input("q", q).input("k", k).input("v", v);
  if (c.mask) t.input("mask", mask);
  else if (c.bias) t.omitted_input();
  if (c.bias) t.input("bias", bias);
  t.attr(Attribute::make_int("num_heads", c.H)).attr(Attribute::make_int("kv_num_heads", c.Hkv));
  t.attr(Attribute::make_float("scale", c.scale)).attr(Attribute::make_int("causal", c.causal));
  t.attr(Attribute::make_float("mask_filter_value", fill)).attr(Attribute::make_float("softcap", c.softcap));
  Tensor got = t.run()[0];
  REQUIRE(shape_str(got.dims) == shape_str({c.B, c.S, c.H * c.Dh}));
  const int64_t group = c.H / c.Hkv;
  int capped = 0;  // scores the cap changed by more than 1%: the test must exercise it
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.S; ++i) {
        std::vector<double> s(c.Skv);
        const int64_t hk = h / group;
        for (int64_t j = 0; j < c.Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dh; ++d)
            dot += double(q.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d]) *
                   k.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          const double raw = dot * c.scale;
          double x = c.softcap * std::tanh(raw / c.softcap);
          capped += std::fabs(x - raw) > 0.01 * std::fabs(raw);
          if (c.bias) x += bias.data<float>()[(h * c.S + i) * c.Skv + j];
          if (c.mask && !mask.data<int64_t>()[b * c.Skv + j]) x = fill;
          if (c.causal && j > i + (c.Skv - c.S)) x = -INFINITY;
          s[j] = x;
        }
        double mx = -INFINITY, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t d = 0; d < c.Dh; ++d) {
          double want = 0;
          for (int64_t j = 0; j < c.Skv; ++j) want += s[j] / sum * v.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          const float g = got.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d];
          INFO("b" << b << " h" << h << " i" << i << " d" << d << " got " << g << " want " << want);
          REQUIRE(!std::isnan(g));
          REQUIRE(std::fabs(g - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
        }
      }
  if (c.softcap < 10) CHECK(capped > 0);
}

}  // namespace

TEST_CASE("Attention kernel: softcap bends the scaled scores before bias and masks", "[kernels][Attention]") {
  run_cap_case({2, 5, 5, 2, 2, 8, 0.5f, 1.5f});
  run_cap_case({2, 5, 5, 4, 2, 8, 0.5f, 2.0f, true, true});   // GQA, causal, key padding (finfo.min fill)
  run_cap_case({2, 3, 7, 2, 1, 6, 0.7f, 3.0f, true, false, true});  // MQA, S_kv > S, float bias after the cap
  run_cap_case({1, 4, 4, 2, 2, 4, 1.0f, 50.0f, false, true, true});  // Gemma-2's cap: nearly linear
}

TEST_CASE("Attention kernel: a negative softcap is refused", "[kernels][Attention]") {
  OpTest t("Attention", "fuseopt");
  t.input("q", rand_tensor({1, 2, 4}, 1)).input("k", rand_tensor({1, 2, 4}, 2)).input("v", rand_tensor({1, 2, 4}, 3));
  t.attr(Attribute::make_int("num_heads", 1)).attr(Attribute::make_float("softcap", -1.0f));
  CHECK_THROWS_WITH(t.run(), Catch::Matchers::Contains("softcap"));
}
