// fuseopt.Attention and fuseopt.LayerNormLinear CPU kernels against naive
// double-precision references written straight from the catalogue's
// definitions (per head: softmax(scale·Q·Kᵀ + bias, masks) · V; norm then GEMM).
// Cases: packed and separate QKV, GQA, causal with S != S_kv, key-padding masks
// with -inf (fully masked row = NaN, as Softmax gives) and finfo.min (uniform
// row), float and bool attn_bias with broadcasts, odd sizes. Outputs are
// NaN-poisoned by eval_node_cpu before the kernel runs.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/fusion_check.h"
#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

struct Case {
  int64_t B, S, Skv, H, Hkv, Dh, Dv;
  bool packed = false, causal = false;
  int mask = 0;  // 0 none, 1 int64 key padding (batch 0 fully masked)
  int bias = 0;  // 0 none, 1 float [B,1,1,Skv], 2 float [1,H,S,Skv], 3 bool [B,1,S,Skv], 4 float [S,Skv]
  float fill = -std::numeric_limits<float>::infinity();
  float scale = 0.37f;
  bool rows_zero = false;  // masked_rows_zero = 1: a row with no score above -inf gives 0
  DType mask_dtype = DType::Int64;  // the dtype the mask is passed in (mask_as)
};

struct Inputs {
  Tensor q, k, v, qkv, mask, bias;
};

Inputs make_inputs(const Case& c) {
  Inputs in;
  in.q = rand_tensor({c.B, c.S, c.H * c.Dh}, 1, -2, 2);
  in.k = rand_tensor({c.B, c.Skv, c.Hkv * c.Dh}, 2, -2, 2);
  in.v = rand_tensor({c.B, c.Skv, c.Hkv * c.Dv}, 3, -2, 2);
  if (c.packed) {  // [Q | K | V] per row
    const int64_t w = (c.H + 2 * c.Hkv) * c.Dh;
    in.qkv = Tensor(DType::Float, {c.B, c.S, w});
    for (int64_t r = 0; r < c.B * c.S; ++r) {
      float* o = in.qkv.data<float>() + r * w;
      for (int64_t j = 0; j < c.H * c.Dh; ++j) o[j] = in.q.data<float>()[r * c.H * c.Dh + j];
      for (int64_t j = 0; j < c.Hkv * c.Dh; ++j) o[c.H * c.Dh + j] = in.k.data<float>()[r * c.Hkv * c.Dh + j];
      for (int64_t j = 0; j < c.Hkv * c.Dh; ++j) o[(c.H + c.Hkv) * c.Dh + j] = in.v.data<float>()[r * c.Hkv * c.Dh + j];
    }
  }
  if (c.mask) {
    in.mask = Tensor(DType::Int64, {c.B, c.Skv});
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < c.Skv; ++j) in.mask.data<int64_t>()[b * c.Skv + j] = b == 0 ? 0 : (j < c.Skv - b ? 1 : 0);
  }
  if (c.bias == 1) in.bias = rand_tensor({c.B, 1, 1, c.Skv}, 4, -3, 3);
  if (c.bias == 2) in.bias = rand_tensor({1, c.H, c.S, c.Skv}, 5, -3, 3);
  if (c.bias == 4) in.bias = rand_tensor({c.S, c.Skv}, 6, -3, 3);
  if (c.bias == 3) {
    in.bias = Tensor(DType::Bool, {c.B, 1, c.S, c.Skv});
    for (int64_t i = 0; i < in.bias.numel(); ++i) in.bias.data<uint8_t>()[i] = (i % 3) != 1;
  }
  return in;
}

// Element of a bias tensor broadcast to [B, H, S, Skv].
double bias_at(const Tensor& t, const Case& c, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t full[4] = {b, h, i, j};
  int64_t off = 0, stride = 1;
  const int r = static_cast<int>(t.dims.size());
  for (int d = r - 1; d >= 0; --d) {
    const int64_t idx = t.dims[d] == 1 ? 0 : full[4 - r + d];
    off += idx * stride;
    stride *= t.dims[d];
  }
  return t.dtype == DType::Bool ? t.data<uint8_t>()[off] : t.data<float>()[off];
}

std::vector<double> reference(const Case& c, const Inputs& in) {
  std::vector<double> y(static_cast<size_t>(c.B * c.S * c.H * c.Dv));
  const int64_t group = c.H / c.Hkv;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.S; ++i) {
        std::vector<double> s(c.Skv);
        const int64_t hk = h / group;
        for (int64_t j = 0; j < c.Skv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < c.Dh; ++d)
            dot += double(in.q.data<float>()[(b * c.S + i) * c.H * c.Dh + h * c.Dh + d]) *
                   in.k.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dh + hk * c.Dh + d];
          double v = dot * c.scale;
          if (c.bias == 3) {
            if (!bias_at(in.bias, c, b, h, i, j)) v = c.fill;
          } else if (c.bias) {
            v += bias_at(in.bias, c, b, h, i, j);
          }
          if (c.mask && !in.mask.data<int64_t>()[b * c.Skv + j]) v = c.fill;
          if (c.causal && j > i + (c.Skv - c.S)) v = -INFINITY;
          s[j] = v;
        }
        double mx = -INFINITY;
        for (double v : s) mx = std::max(mx, v);
        if (c.rows_zero && mx == -INFINITY) {
          for (int64_t d = 0; d < c.Dv; ++d) y[(b * c.S + i) * c.H * c.Dv + h * c.Dv + d] = 0.0;
          continue;
        }
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t d = 0; d < c.Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < c.Skv; ++j)
            acc += s[j] / sum * in.v.data<float>()[(b * c.Skv + j) * c.Hkv * c.Dv + hk * c.Dv + d];
          y[(b * c.S + i) * c.H * c.Dv + h * c.Dv + d] = acc;
        }
      }
  return y;
}

// The int64 0/1 mask in another dtype. fp16 / bf16 mask with +0 and -0 and keep with 1 and NaN
// (a nonzero value: the standard function body's Cast to bool keeps it).
Tensor mask_as(const Tensor& m, DType dt) {
  if (dt == DType::Int64) return m;
  Tensor r(dt, m.dims);
  for (int64_t i = 0; i < m.numel(); ++i) {
    const bool keep = m.data<int64_t>()[i] != 0;
    switch (dt) {
      case DType::Float16: r.data<uint16_t>()[i] = keep ? (i % 2 ? 0x7e00 : 0x3c00) : (i % 2 ? 0x8000 : 0); break;
      case DType::BFloat16: r.data<uint16_t>()[i] = keep ? (i % 2 ? 0x7fc0 : 0x3f80) : (i % 2 ? 0x8000 : 0); break;
      case DType::Float: r.data<float>()[i] = keep ? (i % 2 ? -2.f : 1.f) : (i % 2 ? -0.f : 0.f); break;
      case DType::Int32: r.data<int32_t>()[i] = keep ? 7 : 0; break;
      default: r.data<uint8_t>()[i] = keep; break;
    }
  }
  return r;
}

void run_case(const Case& c) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " Dv"
           << c.Dv << (c.packed ? " packed" : "") << (c.causal ? " causal" : "") << " mask" << c.mask << " bias"
           << c.bias << " fill " << c.fill << (c.rows_zero ? " masked_rows_zero" : ""));
  Inputs in = make_inputs(c);
  OpTest t("Attention", "fuseopt");
  if (c.packed) {
    t.input("qkv", in.qkv).omitted_input().omitted_input();
  } else {
    t.input("q", in.q).input("k", in.k).input("v", in.v);
  }
  if (c.mask) t.input("mask", mask_as(in.mask, c.mask_dtype));
  else if (c.bias) t.omitted_input();
  if (c.bias) t.input("bias", in.bias);
  t.attr(Attribute::make_int("num_heads", c.H)).attr(Attribute::make_int("kv_num_heads", c.Hkv));
  t.attr(Attribute::make_float("scale", c.scale)).attr(Attribute::make_int("causal", c.causal));
  t.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (c.rows_zero) t.attr(Attribute::make_int("masked_rows_zero", 1));
  Tensor got = t.run()[0];
  REQUIRE(shape_str(got.dims) == shape_str({c.B, c.S, c.H * c.Dv}));
  std::vector<double> want = reference(c, in);
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got.data<float>()[i];
    INFO("element " << i << " got " << g << " want " << want[i]);
    if (std::isnan(want[i])) {
      REQUIRE(std::isnan(g));
    } else {
      REQUIRE(!std::isnan(g));
      REQUIRE(std::fabs(g - want[i]) <= 1e-5 * std::max(1.0, std::fabs(want[i])));
    }
  }
}

}  // namespace

TEST_CASE("Attention kernel: separate and packed QKV", "[kernels][Attention]") {
  run_case({2, 5, 5, 3, 3, 4, 4});
  run_case({2, 5, 5, 3, 3, 4, 4, true});
  run_case({1, 1, 1, 1, 1, 1, 1});
  run_case({3, 7, 7, 2, 2, 5, 5, true});
}

TEST_CASE("Attention kernel: grouped kv heads and a different value head dim", "[kernels][Attention]") {
  run_case({2, 6, 6, 4, 2, 8, 8, true});
  run_case({2, 6, 9, 6, 2, 3, 5});  // S_kv != S, Dv != Dh
  run_case({1, 4, 4, 4, 1, 2, 2, true});
}

TEST_CASE("Attention kernel: causal, also with a longer key sequence", "[kernels][Attention]") {
  Case c{2, 5, 5, 2, 2, 4, 4, true, true};
  run_case(c);
  Case d{2, 3, 7, 2, 1, 4, 4, false, true};
  run_case(d);
}

TEST_CASE("Attention kernel: key-padding mask, fully masked rows", "[kernels][Attention]") {
  Case nan_rows{3, 4, 4, 2, 2, 4, 4};
  nan_rows.mask = 1;  // batch 0 fully masked with -inf: NaN, exactly as Softmax over -inf gives
  run_case(nan_rows);
  Case min_rows = nan_rows;
  min_rows.fill = -std::numeric_limits<float>::max();  // HF finfo.min: a uniform row
  run_case(min_rows);
  // The mask in every dtype it may come in: nonzero keeps (fp16/bf16 -0 masks, NaN keeps).
  for (DType dt : {DType::Bool, DType::Int32, DType::Float, DType::Float16, DType::BFloat16}) {
    INFO("mask dtype " << dtype_name(dt));
    Case typed = min_rows;
    typed.mask_dtype = dt;
    run_case(typed);
  }
}

TEST_CASE("Attention kernel: masked_rows_zero gives 0 for rows with no visible key", "[kernels][Attention]") {
  Case pad{3, 4, 4, 2, 2, 4, 4};
  pad.mask = 1;  // batch 0 fully masked with -inf: 0 instead of NaN; the other rows unchanged
  pad.rows_zero = true;
  run_case(pad);
  pad.packed = true;
  run_case(pad);
  Case early{2, 6, 4, 4, 2, 3, 3, false, true};  // causal, S > S_kv: rows 0 and 1 see no key
  early.rows_zero = true;
  run_case(early);
  Case bias_rows{2, 5, 5, 2, 2, 4, 4};  // a bool attn_bias (false at every third element) and the padding mask
  bias_rows.bias = 3;
  bias_rows.mask = 1;
  bias_rows.rows_zero = true;
  run_case(bias_rows);
  Case min_rows = pad;  // finfo.min fill: no row is empty (uniform), the attribute changes nothing
  min_rows.fill = -std::numeric_limits<float>::max();
  run_case(min_rows);
}

TEST_CASE("Attention kernel: float and bool attn_bias with broadcasts", "[kernels][Attention]") {
  for (int bias : {1, 2, 3, 4}) {
    Case c{2, 5, 5, 3, 3, 4, 4, bias % 2 == 0};
    c.bias = bias;
    c.fill = -std::numeric_limits<float>::max();
    run_case(c);
  }
  Case all{2, 5, 5, 2, 2, 3, 3, true, true, 1, 1, -std::numeric_limits<float>::max()};
  run_case(all);  // causal + mask + bias together
}

TEST_CASE("Attention kernel: bad inputs give an error naming the node", "[kernels][Attention]") {
  OpTest t("Attention", "fuseopt");
  t.input("qkv", rand_tensor({1, 2, 10}, 1)).attr(Attribute::make_int("num_heads", 3));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("Attention") && Catch::Contains("packed QKV width"));
}

// ---- LayerNormLinear -----------------------------------------------------------

namespace {

struct LnlCase {
  int64_t M, K, N;
  bool rms = false, beta = true, bias = true, skip = false, sum = false, transB = false;
  std::string act = "none";
};

void run_lnl(const LnlCase& c) {
  INFO("M" << c.M << " K" << c.K << " N" << c.N << " rms" << c.rms << " skip" << c.skip << " transB" << c.transB
           << " act " << c.act);
  Tensor x = rand_tensor({c.M, c.K}, 11, -3, 3), g = rand_tensor({c.K}, 12), be = rand_tensor({c.K}, 13);
  Tensor w = rand_tensor(c.transB ? std::vector<int64_t>{c.N, c.K} : std::vector<int64_t>{c.K, c.N}, 14);
  Tensor bi = rand_tensor({c.N}, 15), sk = rand_tensor({c.M, c.K}, 16);
  OpTest t("LayerNormLinear", "fuseopt");
  t.input("X", x).input("gamma", g);
  if (c.beta) t.input("beta", be); else t.omitted_input();
  t.input("W", w);
  if (c.bias) t.input("bias", bi); else if (c.skip) t.omitted_input();
  if (c.skip) t.input("skip", sk);
  if (c.sum) t.num_outputs(2);
  t.attr(Attribute::make_float("epsilon", 1e-5f)).attr(Attribute::make_int("rms", c.rms));
  t.attr(Attribute::make_int("transB", c.transB)).attr(Attribute::make_string("activation", c.act));
  std::vector<Tensor> out = t.run();
  for (int64_t r = 0; r < c.M; ++r) {
    std::vector<double> z(c.K);
    for (int64_t k = 0; k < c.K; ++k) z[k] = double(x.data<float>()[r * c.K + k]) + (c.skip ? sk.data<float>()[r * c.K + k] : 0.0);
    if (c.sum)
      for (int64_t k = 0; k < c.K; ++k) REQUIRE(std::fabs(out[1].data<float>()[r * c.K + k] - z[k]) < 1e-5);
    double mean = 0, var = 0;
    if (!c.rms) {
      for (double v : z) mean += v;
      mean /= c.K;
    }
    for (double v : z) var += (v - mean) * (v - mean);
    var /= c.K;
    for (int64_t k = 0; k < c.K; ++k)
      z[k] = (z[k] - mean) / std::sqrt(var + 1e-5) * g.data<float>()[k] + (c.beta ? be.data<float>()[k] : 0.0);
    for (int64_t n = 0; n < c.N; ++n) {
      double a = c.bias ? bi.data<float>()[n] : 0.0;
      for (int64_t k = 0; k < c.K; ++k) a += z[k] * w.data<float>()[c.transB ? n * c.K + k : k * c.N + n];
      if (c.act == "relu") a = std::max(a, 0.0);
      if (c.act == "gelu") a = 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
      if (c.act == "gelu_tanh") a = 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
      if (c.act == "tanh") a = std::tanh(a);
      if (c.act == "relu2") a = a > 0 ? a * a : 0.0;
      const float got = out[0].data<float>()[r * c.N + n];
      INFO("row " << r << " col " << n << " got " << got << " want " << a);
      REQUIRE(!std::isnan(got));
      REQUIRE(std::fabs(got - a) <= 1e-4 * std::max(1.0, std::fabs(a)));
    }
  }
}

}  // namespace

TEST_CASE("LayerNormLinear kernel: LayerNorm and RMS variants", "[kernels][LayerNormLinear]") {
  run_lnl({3, 8, 5});
  run_lnl({1, 1, 1});
  run_lnl({7, 13, 9, true, false, false});
  run_lnl({4, 6, 3, false, true, true, false, false, true});
  run_lnl({5, 16, 7, false, false, true});
}

TEST_CASE("LayerNormLinear kernel: skip with the Sum output, activations", "[kernels][LayerNormLinear]") {
  for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "tanh", "relu2"}) {
    LnlCase c{6, 10, 4, false, true, true, true, true};
    c.act = act;
    run_lnl(c);
  }
  run_lnl({3, 8, 5, true, false, true, true, false, true, "gelu"});
}

TEST_CASE("LayerNormLinear kernel: a weight that does not match K is an error", "[kernels][LayerNormLinear]") {
  OpTest t("LayerNormLinear", "fuseopt");
  t.input("X", rand_tensor({2, 4}, 1)).input("gamma", rand_tensor({4}, 2)).omitted_input();
  t.input("W", rand_tensor({5, 3}, 3));
  REQUIRE_THROWS_WITH(t.run(), Catch::Contains("LayerNormLinear") && Catch::Contains("does not match K"));
}

TEST_CASE("LayerNormLinear kernel: a broadcast skip (position table) equals the expanded skip",
          "[kernels][LayerNormLinear]") {
  Tensor x = rand_tensor({2, 3, 4}, 21, -2, 2), g = rand_tensor({4}, 22), w = rand_tensor({4, 5}, 23);
  Tensor sk = rand_tensor({3, 4}, 24);
  Tensor full(DType::Float, {2, 3, 4});
  for (int64_t i = 0; i < full.numel(); ++i) full.data<float>()[i] = sk.data<float>()[i % 12];
  auto run = [&](const Tensor& skip) {
    OpTest t("LayerNormLinear", "fuseopt");
    t.input("X", x).input("gamma", g).omitted_input().input("W", w).omitted_input().input("skip", skip).num_outputs(2);
    t.attr(Attribute::make_float("epsilon", 1e-5f));
    return t.run();
  };
  std::vector<Tensor> a = run(sk), b = run(full);
  REQUIRE(shape_str(a[0].dims) == "[2,3,5]");
  REQUIRE(shape_str(a[1].dims) == "[2,3,4]");
  for (int o = 0; o < 2; ++o)
    for (int64_t i = 0; i < b[o].numel(); ++i) {
      REQUIRE(!std::isnan(a[o].data<float>()[i]));
      REQUIRE(a[o].data<float>()[i] == b[o].data<float>()[i]);
    }
}
