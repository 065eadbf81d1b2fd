// fuseopt.Attention's sinks (input 7, [H]; GPT-OSS) on the CPU against a naive
// double-precision reference written from docs/fused_ops.md: each row's softmax takes one
// more logit, sink_h, whose probability is dropped:
//   p_ij = exp(s_ij - m) / (sum_j exp(s_ij - m) + exp(sink_h - m)),  m = max(max_j s_ij, sink_h).
// Cases: GQA, causal, key padding (finfo.min and -inf fills), sliding windows, a KV cache,
// rows with no visible key (all mass on the sink: 0, not NaN), and malformed sinks refused
// with the node named. Outputs are NaN-poisoned by the OpTest harness before the kernel runs.
#include <cmath>
#include <limits>
#include <vector>

#include "support/fusion_check.h"
#include "support/op_test.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

struct SinkCase {
  int64_t B, S, Skv, H, Hkv, Dh;
  bool causal = false, mask = false;
  int64_t window = 0;
  float fill = -std::numeric_limits<float>::max();
  int64_t past = 0;  // Skv of them come from past_key / past_value
};

void run_sink_case(const SinkCase& c) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh
           << (c.causal ? " causal" : "") << (c.mask ? " mask" : "") << " window " << c.window << " fill " << c.fill
           << " past " << c.past);
  const int64_t Snew = c.Skv - c.past;
  Tensor q = rand_tensor({c.B, c.S, c.H * c.Dh}, 51, -2, 2);
  Tensor k = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 52, -2, 2);  // every key, [B, S_kv, Hkv·Dh]
  Tensor v = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 53, -1, 1);
  Tensor sinks = rand_tensor({c.H}, 54, -2, 2);
  sinks.data<float>()[0] = 3.0f;  // a sink above most scores
  Tensor mask(DType::Int64, {c.B, c.Skv});
  for (int64_t b = 0; b < c.B; ++b)  // batch b pads its last 2b keys; the last batch pads every key
    for (int64_t j = 0; j < c.Skv; ++j)
      mask.data<int64_t>()[b * c.Skv + j] = b == c.B - 1 && c.B > 1 ? 0 : j < c.Skv - 2 * b;
  // The new keys as inputs 1, 2 and the past as [B, Hkv, S_past, D] inputs 5, 6.
  auto part = [&](const Tensor& t, int64_t from, int64_t n) {
    Tensor r(DType::Float, {c.B, n, c.Hkv * c.Dh});
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t x = 0; x < c.Hkv * c.Dh; ++x)
          r.data<float>()[(b * n + j) * c.Hkv * c.Dh + x] = t.data<float>()[(b * c.Skv + from + j) * c.Hkv * c.Dh + x];
    return r;
  };
  auto past_of = [&](const Tensor& t) {
    Tensor r(DType::Float, {c.B, c.Hkv, c.past, c.Dh});
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.Hkv; ++h)
        for (int64_t j = 0; j < c.past; ++j)
          for (int64_t d = 0; d < c.Dh; ++d)
            r.data<float>()[((b * c.Hkv + h) * c.past + j) * c.Dh + d] =
                t.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + h * c.Dh + d];
    return r;
  };
  OpTest t("Attention", "fuseopt");
  t.input("q", q).input("k", part(k, c.past, Snew)).input("v", part(v, c.past, Snew));
  if (c.mask) t.input("mask", mask); else t.omitted_input();
  t.omitted_input();  // attn_bias
  if (c.past) t.input("past_k", past_of(k)).input("past_v", past_of(v)); else t.omitted_input().omitted_input();
  t.input("sinks", sinks);
  t.attr(Attribute::make_int("num_heads", c.H)).attr(Attribute::make_int("kv_num_heads", c.Hkv));
  t.attr(Attribute::make_int("causal", c.causal)).attr(Attribute::make_float("mask_filter_value", c.fill));
  if (c.window) t.attr(Attribute::make_int("window", c.window));
  Tensor got = t.run()[0];
  REQUIRE(shape_str(got.dims) == shape_str({c.B, c.S, c.H * c.Dh}));
  const int64_t group = c.H / c.Hkv;
  const double scale = 1.0 / std::sqrt(double(c.Dh));
  int empty_rows = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.S; ++i) {
        std::vector<double> s(c.Skv);
        const int64_t hk = h / group, q_pos = i + c.Skv - c.S;
        bool any = false;
        for (int64_t j = 0; j < c.Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dh; ++d)
            dot += double(q.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d]) *
                   k.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          double x = dot * scale;
          if (c.mask && !mask.data<int64_t>()[b * c.Skv + j]) x = c.fill;
          if ((c.causal && j > q_pos) || (c.window && q_pos - j >= c.window)) x = -INFINITY;
          any |= x > -1e30;
          s[j] = x;
        }
        empty_rows += !any;
        const double sink = sinks.data<float>()[h];
        double mx = sink, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        sum += std::exp(sink - mx);
        for (int64_t d = 0; d < c.Dh; ++d) {
          double want = 0;
          for (int64_t j = 0; j < c.Skv; ++j) want += s[j] / sum * v.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          const float g = got.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d];
          INFO("b" << b << " h" << h << " i" << i << " d" << d << " got " << g << " want " << want);
          REQUIRE(!std::isnan(g));
          REQUIRE(std::fabs(g - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
        }
      }
  if (c.mask && c.B > 1) CHECK(empty_rows > 0);  // the fully padded batch: every row is the sink's (0)
}

}  // namespace

TEST_CASE("Attention kernel: sinks join each row's softmax and take no value", "[kernels][Attention]") {
  run_sink_case({1, 6, 6, 2, 2, 8});                                                  // plain
  run_sink_case({2, 7, 7, 4, 2, 8, true});                                            // GQA, causal
  run_sink_case({3, 5, 5, 4, 1, 4, true, true});                                      // MQA, padding, finfo.min fill
  run_sink_case({3, 5, 5, 2, 2, 4, false, true, 0, -std::numeric_limits<float>::infinity()});  // -inf fill: 0, not NaN
  run_sink_case({2, 9, 9, 4, 2, 8, true, true, 3});                                   // GPT-OSS's sliding layers
  run_sink_case({2, 1, 12, 4, 2, 8, true, true, 4, -std::numeric_limits<float>::max(), 11});  // a decode step over a cache
  run_sink_case({2, 3, 10, 2, 1, 6, true, false, 0, -std::numeric_limits<float>::max(), 7});  // S_kv > S: bottom-right
}

TEST_CASE("Attention kernel: a row with no visible key and a sink is 0", "[kernels][Attention]") {
  // S > S_kv with causal: the first S - S_kv rows see no key; with a sink they are 0, without NaN.
  Tensor q = rand_tensor({1, 4, 8}, 61), k = rand_tensor({1, 2, 8}, 62), v = rand_tensor({1, 2, 8}, 63);
  OpTest t("Attention", "fuseopt");
  t.input("q", q).input("k", k).input("v", v).omitted_input().omitted_input().omitted_input().omitted_input();
  t.input("sinks", Tensor::from_floats({0.5f, -4.0f}, {2}));
  t.attr(Attribute::make_int("num_heads", 2)).attr(Attribute::make_int("causal", 1));
  Tensor y = t.run()[0];
  for (int64_t i = 0; i < 2 * 8; ++i) CHECK(y.data<float>()[i] == 0.0f);    // rows 0, 1: all mass on the sink
  for (int64_t i = 2 * 8; i < 4 * 8; ++i) CHECK(!std::isnan(y.data<float>()[i]));
}

TEST_CASE("Attention kernel: malformed sinks are refused naming the node", "[kernels][Attention]") {
  auto run = [](Tensor sinks) {
    OpTest t("Attention", "fuseopt");
    t.input("q", rand_tensor({1, 2, 8}, 1)).input("k", rand_tensor({1, 2, 8}, 2)).input("v", rand_tensor({1, 2, 8}, 3));
    t.omitted_input().omitted_input().omitted_input().omitted_input().input("sinks", std::move(sinks));
    t.attr(Attribute::make_int("num_heads", 2));
    return t.run();
  };
  CHECK_THROWS_WITH(run(Tensor::from_floats({1, 2, 3}, {3})), Catch::Matchers::Contains("sinks must be [num_heads] = [2]"));
  CHECK_THROWS_WITH(run(Tensor::from_floats({1, 2}, {1, 2})), Catch::Matchers::Contains("sinks must be [num_heads]"));
  CHECK_THROWS_WITH(run(Tensor::from_ints({1, 2}, {2})), Catch::Matchers::Contains("sinks must be"));
}
