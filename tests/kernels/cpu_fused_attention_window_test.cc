// fuseopt.Attention's sliding window (Mistral, Gemma-2/3, StarCoder2: transformers'
// kv_idx > q_idx - W) on the CPU against a naive double-precision reference written from
// docs/fused_ops.md: key j is hidden (-inf, as causal hides it) from query i when
// q_pos - j >= window, q_pos = i + S_kv - S (bottom-right, as causal aligns it).
// Every case is sized so the window hides keys (the test counts them); outputs are
// NaN-poisoned by the OpTest harness before the kernel runs.
#include <cmath>
#include <limits>
#include <vector>

#include "support/fusion_check.h"
#include "support/op_test.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

struct WindowCase {
  int64_t B, S, Skv, H, Hkv, Dh, window;
  bool causal = true, mask = false;
};

void run_window_case(const WindowCase& c) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " window "
           << c.window << (c.causal ? " causal" : "") << (c.mask ? " mask" : ""));
  Tensor q = rand_tensor({c.B, c.S, c.H * c.Dh}, 31, -1, 1);
  Tensor k = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 32, -1, 1);
  Tensor v = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 33, -1, 1);
  Tensor mask(DType::Int64, {c.B, c.Skv});
  for (int64_t b = 0; b < c.B; ++b)  // batch b pads its last b keys (right padding)
    for (int64_t j = 0; j < c.Skv; ++j) mask.data<int64_t>()[b * c.Skv + j] = j < c.Skv - b;
  const float fill = -std::numeric_limits<float>::max();
  OpTest t("Attention", "fuseopt");
  t.input("q", q).input("k", k).input("v", v);
  if (c.mask) t.input("mask", mask);
  t.attr(Attribute::make_int("num_heads", c.H)).attr(Attribute::make_int("kv_num_heads", c.Hkv));
  t.attr(Attribute::make_int("causal", c.causal)).attr(Attribute::make_int("window", c.window));
  t.attr(Attribute::make_float("mask_filter_value", fill));
  Tensor got = t.run()[0];
  REQUIRE(shape_str(got.dims) == shape_str({c.B, c.S, c.H * c.Dh}));
  const int64_t group = c.H / c.Hkv;
  const double scale = 1.0 / std::sqrt(double(c.Dh));
  int hidden = 0;  // keys the window (alone) hid: the case must exercise it
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.S; ++i) {
        std::vector<double> s(c.Skv);
        const int64_t hk = h / group, q_pos = i + c.Skv - c.S;
        for (int64_t j = 0; j < c.Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dh; ++d)
            dot += double(q.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d]) *
                   k.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          double x = dot * scale;
          if (c.mask && !mask.data<int64_t>()[b * c.Skv + j]) x = fill;
          if (c.causal && j > q_pos) x = -INFINITY;
          if (q_pos - j >= c.window) {
            hidden += !(c.causal && j > q_pos);
            x = -INFINITY;
          }
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
  CHECK(hidden > 0);
}

}  // namespace

TEST_CASE("Attention kernel: a sliding window hides keys at q_pos - j >= window", "[kernels][Attention]") {
  run_window_case({2, 9, 9, 2, 2, 8, 3});                       // causal + window
  run_window_case({2, 9, 9, 4, 2, 8, 4, true, true});          // GQA, key padding (finfo.min fill)
  run_window_case({2, 3, 11, 2, 1, 6, 5, true, true});         // MQA, S_kv > S: bottom-right, as a cache step
  run_window_case({1, 1, 13, 2, 2, 4, 6});                     // one query over 13 keys (a decode step)
  run_window_case({2, 7, 7, 2, 2, 4, 2, false, true});         // no causal: later keys stay visible
  run_window_case({1, 6, 6, 2, 2, 4, 1});                      // window 1: the diagonal only
}

TEST_CASE("Attention kernel: a window of at least S_kv keys changes nothing", "[kernels][Attention]") {
  Tensor q = rand_tensor({1, 5, 8}, 41), k = rand_tensor({1, 5, 8}, 42), v = rand_tensor({1, 5, 8}, 43);
  auto run = [&](int64_t window) {
    OpTest t("Attention", "fuseopt");
    t.input("q", q).input("k", k).input("v", v);
    t.attr(Attribute::make_int("num_heads", 2)).attr(Attribute::make_int("causal", 1));
    if (window) t.attr(Attribute::make_int("window", window));
    return t.run()[0];
  };
  const Tensor plain = run(0);
  for (int64_t w : {5, 6, 4096}) {
    INFO("window " << w);
    CHECK(run(w).bytes == plain.bytes);
  }
  CHECK_FALSE(run(4).bytes == plain.bytes);  // one key fewer for the last query: the check can fail
}

TEST_CASE("Attention kernel: a negative window is refused", "[kernels][Attention]") {
  OpTest t("Attention", "fuseopt");
  t.input("q", rand_tensor({1, 2, 4}, 1)).input("k", rand_tensor({1, 2, 4}, 2)).input("v", rand_tensor({1, 2, 4}, 3));
  t.attr(Attribute::make_int("num_heads", 1)).attr(Attribute::make_int("window", -1));
  CHECK_THROWS_WITH(t.run(), Catch::Matchers::Contains("window"));
}
