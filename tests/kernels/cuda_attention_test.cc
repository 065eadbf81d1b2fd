// CUDA fuseopt.Attention (flash-style) against the CPU kernel
// (kernels/cpu/fused_attention.cc): packed QKV and separate Q/K/V, GQA,
// causal (also with S_kv != S), key-padding masks with -inf and finfo.min
// filters (fully masked rows: NaN vs uniform), float and bool attn_bias with
// several broadcasts, head dims 32/64/128 and a generic one (80), sequence
// lengths that are not multiples of the tiles; fp32 / fp16 / bf16.
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};

struct AttnCase {
  int64_t B, S, Skv, H, Hkv, Dh, Dv;
  bool packed, causal;
  int mask;        // 0 none, 1 int64 padding (batch 0 fully masked), 2 bool padding
  int bias;        // 0 none, 1 float [B,1,1,Skv], 2 float [1,H,S,Skv], 3 bool [B,1,S,Skv], 4 float [S,Skv]
  float fill;      // mask_filter_value (NaN = attribute omitted, default -inf)
  float scale;     // NaN = attribute omitted (1/sqrt(Dh))
};

std::string describe(const AttnCase& c) {
  std::ostringstream os;
  os << "B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " Dv"
     << c.Dv << (c.packed ? " packed" : " separate") << (c.causal ? " causal" : "") << " mask" << c.mask << " bias"
     << c.bias << " fill " << c.fill;
  return os.str();
}

void run_case(const AttnCase& c, DType dt) {
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 5, 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", c.causal));
  if (!std::isnan(c.fill)) op.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (!std::isnan(c.scale)) op.attr(Attribute::make_float("scale", c.scale));
  Tensor q, k, v, mask, bias;
  if (c.packed) {
    q = cuda_check::random_tensor({c.B, c.S, (c.H + 2 * c.Hkv) * c.Dh}, -2.f, 2.f);
  } else {
    q = cuda_check::random_tensor({c.B, c.S, c.H * c.Dh}, -2.f, 2.f);
    k = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dh}, -2.f, 2.f);
    v = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dv});
  }
  if (c.mask) mask = cuda_check::random_padding_mask(c.B, c.Skv, c.mask == 1 ? DType::Int64 : DType::Bool);
  switch (c.bias) {
    case 1: bias = cuda_check::random_tensor({c.B, 1, 1, c.Skv}, -3.f, 3.f); break;
    case 2: bias = cuda_check::random_tensor({1, c.H, c.S, c.Skv}, -3.f, 3.f); break;
    case 3: {
      bias = Tensor(DType::Bool, {c.B, 1, c.S, c.Skv});
      std::bernoulli_distribution keep(0.8);
      for (int64_t i = 0; i < bias.numel(); ++i) bias.data<uint8_t>()[i] = keep(cuda_check::rng());
      break;
    }
    case 4: bias = cuda_check::random_tensor({c.S, c.Skv}, -3.f, 3.f); break;
    default: break;
  }
  op.inputs = {&q, c.packed ? nullptr : &k, c.packed ? nullptr : &v, c.mask ? &mask : nullptr,
               c.bias ? &bias : nullptr};
  auto got = op.run_cuda(dt);
  auto want = op.run_cpu(dt);
  REQUIRE(got[0].dims == want[0].dims);
  const double err = cuda_check::rel_error(got[0], want[0]);
  INFO("relative error " << err);
  CHECK(err < cuda_check::tolerance(dt));
}

// Every case in every dtype; fp16/bf16 once per m-tile variant of the
// tensor-core kernel (1 and 2 m-tiles per warp).
template <size_t N>
void run_all(const AttnCase (&cases)[N]) {
  for (DType dt : kFloatTypes)
    for (int mt = 1; mt <= (dt == DType::Float ? 1 : 2); ++mt) {
      cuda_fused::attention_set_m_tiles(mt, mt);
      INFO("m-tiles per warp " << mt);
      for (const AttnCase& c : cases) run_case(c, dt);
    }
  cuda_fused::attention_set_m_tiles(1, 2);
}

const float kNoAttr = std::numeric_limits<float>::quiet_NaN();
const float kFinfoMin = -3.4028234663852886e38f;

}  // namespace

TEST_CASE("cuda Attention packed QKV, head dims 64/128/32, causal", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const AttnCase cases[] = {
      {2, 77, 77, 4, 4, 64, 64, true, false, 0, 0, kNoAttr, kNoAttr},
      {2, 77, 77, 4, 4, 64, 64, true, true, 0, 0, kNoAttr, kNoAttr},
      {1, 130, 130, 2, 2, 128, 128, true, false, 0, 0, kNoAttr, kNoAttr},
      {1, 130, 130, 2, 2, 128, 128, true, true, 0, 0, kNoAttr, kNoAttr},
      {3, 45, 45, 3, 3, 32, 32, true, false, 0, 0, kNoAttr, 0.3f},
      {2, 200, 200, 6, 2, 64, 64, true, true, 0, 0, kNoAttr, kNoAttr},  // packed GQA
      {1, 5, 5, 2, 2, 80, 80, true, false, 0, 0, kNoAttr, kNoAttr},     // generic head dim
  };
  run_all(cases);
}

TEST_CASE("cuda Attention masks: padding, fully masked rows, -inf and finfo.min", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const AttnCase cases[] = {
      {3, 70, 70, 4, 4, 64, 64, true, false, 1, 0, kNoAttr, kNoAttr},     // -inf fill: batch 0 NaN
      {3, 70, 70, 4, 4, 64, 64, true, false, 1, 0, kFinfoMin, kNoAttr},   // finfo.min: uniform rows
      {3, 70, 70, 4, 4, 128, 128, true, true, 2, 0, kFinfoMin, kNoAttr},  // bool mask + causal
      {2, 33, 33, 2, 2, 64, 64, true, false, 1, 0, -10000.f, kNoAttr},
  };
  run_all(cases);
}

TEST_CASE("cuda Attention separate Q/K/V, GQA, S_kv != S, bias forms", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const AttnCase cases[] = {
      {2, 33, 70, 8, 2, 64, 64, false, false, 0, 0, kNoAttr, kNoAttr},
      {2, 33, 70, 8, 2, 64, 64, false, true, 0, 0, kNoAttr, kNoAttr},     // causal offset S_kv - S
      {2, 33, 70, 8, 8, 64, 32, false, false, 0, 0, kNoAttr, kNoAttr},    // Dv != Dh
      {2, 40, 40, 4, 4, 128, 128, false, false, 0, 1, kNoAttr, kNoAttr},  // bias [B,1,1,Skv]
      {2, 40, 40, 4, 4, 64, 64, false, false, 1, 2, kFinfoMin, kNoAttr},  // bias [1,H,S,Skv] + mask
      {2, 40, 40, 4, 4, 64, 64, false, false, 0, 3, kFinfoMin, kNoAttr},  // bool bias
      {2, 40, 40, 4, 1, 32, 32, false, true, 0, 4, kNoAttr, kNoAttr},     // bias [S,Skv], MQA
      {1, 70, 33, 2, 2, 64, 64, false, true, 0, 0, kNoAttr, kNoAttr},     // S > S_kv causal: NaN rows
      // Several key tiles: the bias read one tile ahead, the per-tile mask flags;
      // odd S_kv (bias read element-wise) and even S_kv (read in pairs).
      {2, 33, 131, 4, 4, 64, 64, false, false, 1, 2, kFinfoMin, kNoAttr},
      {2, 70, 130, 4, 4, 64, 64, false, false, 1, 1, kFinfoMin, kNoAttr},
      {3, 130, 130, 4, 4, 64, 64, true, true, 2, 2, kFinfoMin, kNoAttr},
  };
  run_all(cases);
}

TEST_CASE("cuda Attention kernel choice", "[cuda][attention]") {
  cuda_fused::AttentionArgs a;
  a.H = a.Hkv = 12;
  a.Dh = a.Dv = 64;
  a.dtype = DType::Float;
  CHECK(std::string(cuda_fused::attention_kernel_name(a)) == "generic");
  a.Dh = a.Dv = 80;
  a.dtype = DType::Float16;
  CHECK(std::string(cuda_fused::attention_kernel_name(a)) == "generic");
}

// A model exported in fp32 masks with finfo(float32).min added to the scores (the bias input);
// run in fp16 that constant is clamped to -65504 (bf16: its own lowest finite value). A fully
// masked row must then come out uniform, as the fp32 model gives (s + finfo.min == finfo.min),
// not softmax(s) (what s - 65504 in fp32 would give). Reference: the CPU kernel in fp32 on the
// fp32 bias; device: the same bias with finfo.min replaced by the half type's lowest value.
TEST_CASE("cuda Attention half bias at the type's lowest value masks like finfo.min", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int64_t D : {64, 32}) {  // 64: the tensor-core kernel (bias read in T); 32: the generic one
      const int64_t B = 2, S = 37, Skv = 70, H = 4;
      INFO(cuda_check::short_name(dt) << " head dim " << D);
      OpCase op("fuseopt", "Attention", 5, 1);
      op.attr(Attribute::make_int("num_heads", H));
      op.attr(Attribute::make_int("kv_num_heads", H));
      Tensor q = cuda_check::random_tensor({B, S, H * D}, -2.f, 2.f);
      Tensor k = cuda_check::random_tensor({B, Skv, H * D}, -2.f, 2.f);
      Tensor v = cuda_check::random_tensor({B, Skv, H * D});
      // [B,1,1,Skv]: batch 0 fully masked; batch 1 masks its last 20 keys.
      Tensor bias(DType::Float, {B, 1, 1, Skv});
      for (int64_t j = 0; j < Skv; ++j) {
        bias.data<float>()[j] = kFinfoMin;
        bias.data<float>()[Skv + j] = j < Skv - 20 ? 0.f : kFinfoMin;
      }
      const float lowest = dt == DType::Float16 ? -65504.f : -3.38953139e38f;
      Tensor clamped = bias;
      for (int64_t i = 0; i < clamped.numel(); ++i)
        if (clamped.data<float>()[i] == kFinfoMin) clamped.data<float>()[i] = lowest;
      op.inputs = {&q, &k, &v, nullptr, &bias};
      auto want = op.run_cpu();
      op.inputs[4] = &clamped;
      auto got = op.run_cuda(dt);
      REQUIRE(got[0].dims == want[0].dims);
      const double err = cuda_check::rel_error(got[0], want[0]);
      INFO("relative error " << err);
      CHECK(err < cuda_check::tolerance(dt));
    }
}
