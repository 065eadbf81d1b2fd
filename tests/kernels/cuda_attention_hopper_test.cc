// The Hopper (sm_90a, wgmma + TMA) attention kernel against the CPU kernel
// (kernels/cpu/fused_attention.cc) on fresh random inputs, outputs poisoned
// with NaN first (the harness does): sequence lengths that do not divide the
// 128-row / 128-key tiles (1, 17, 130, 257, 1000), S_q != S_kv under causal
// (bottom-right alignment, also rows with no visible key: NaN), GQA 32/8 and
// MQA, key-padding masks (int64 and bool; batch 0 fully masked: NaN with the
// -inf filter, uniform rows with finfo.min; one padding only a batch's last
// keys, so that masked causal diagonal tiles take the plain softmax path;
// int32, float32 and fp16 masks with holes anywhere, the float ones masking
// with +0 and -0; all-ones int64 masks), packed QKV and separate Q/K/V, fp16
// and bf16, head dims 64 and 128, every variant of the kernel (block rows,
// ping-pong, persistent grid, P·V width, 128-, 160- or 176-key tiles, O by TMA
// store or 4-byte stores), and masks that are prefixes (right padding, all ones) through the
// varlen path (the per-batch key counts, poisoned before the runtime kernel fills them) and,
// in two variants, through the key flags. On a device where the kernel applies (compute
// capability 9.0) the test checks that the dispatcher takes it and that every
// run launched it; on other devices the same cases run through the other
// kernels.
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct HopperCase {
  int64_t B, S, Skv, H, Hkv, D;
  bool packed, causal;
  int mask;     // 0 none, 1 int64 padding, 2 bool padding (batch 0 fully masked in both),
                // 3 bool, batch b padding its last 5b keys (most tiles hold no masked key),
                // 4 int32, 5 float32 (masked: +0 and -0; kept: any other value), 6 fp16 (the same)
                // with holes anywhere (batch 0 keeps every key), 7 int64 keeping every key
  float fill;   // mask_filter_value (NaN = attribute omitted: -inf)
  float scale;  // NaN = attribute omitted (1/sqrt(D))
};

const float kNoAttr = std::numeric_limits<float>::quiet_NaN();
const float kFinfoMin = -3.4028234663852886e38f;

std::string describe(const HopperCase& c) {
  std::ostringstream os;
  os << "B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " D" << c.D
     << (c.packed ? " packed" : " separate") << (c.causal ? " causal" : "") << " mask" << c.mask << " fill "
     << c.fill << " scale " << c.scale;
  return os.str();
}

// The arguments the CUDA kernel builds for this case (for the kernel choice only).
cuda_fused::AttentionArgs args_of(const HopperCase& c, DType dt) {
  cuda_fused::AttentionArgs a;
  a.dtype = dt;
  a.B = int(c.B);
  a.H = int(c.H);
  a.Hkv = int(c.Hkv);
  a.Sq = int(c.S);
  a.Skv = int(c.Skv);
  a.Dh = a.Dv = int(c.D);
  alignas(16) static const uint64_t dummy[4] = {};
  a.q = a.k = a.v = dummy;
  a.y = const_cast<uint64_t*>(dummy);
  const int64_t row = c.packed ? (c.H + 2 * c.Hkv) * c.D : c.H * c.D;
  a.q_seq_stride = row;
  a.q_batch_stride = c.S * row;
  a.k_seq_stride = a.v_seq_stride = c.packed ? row : c.Hkv * c.D;
  a.k_batch_stride = a.v_batch_stride = c.packed ? c.S * row : c.Skv * c.Hkv * c.D;
  a.scale = std::isnan(c.scale) ? 1.f / std::sqrt(float(c.D)) : c.scale;
  a.causal = c.causal;
  return a;
}

// Mask kinds 4-7 (HopperCase::mask): holes anywhere (about one key in five masked) in batches
// past the first, which keeps every key; kind 7 keeps every key everywhere. Float masks mask with
// +0 and -0 and keep with values of either sign (the kernel compares bits, not just the raw word).
Tensor holey_mask(int64_t B, int64_t Skv, int kind) {
  const DType dt = kind == 4 ? DType::Int32 : kind == 5 ? DType::Float : kind == 6 ? DType::Float16 : DType::Int64;
  Tensor m(dt, {B, Skv});
  std::uniform_int_distribution<int> pick(0, 9);
  for (int64_t i = 0; i < B * Skv; ++i) {
    const int r = pick(cuda_check::rng());
    const bool keep = kind == 7 || i < Skv || r >= 2;
    const float fv = keep ? (r % 2 ? 0.5f : -3.f) : (r % 2 ? -0.f : 0.f);
    switch (dt) {
      case DType::Int32: m.data<int32_t>()[i] = keep ? r + 1 : 0; break;
      case DType::Float: m.data<float>()[i] = fv; break;
      case DType::Float16: m.data<uint16_t>()[i] = float_to_half(fv); break;
      default: m.data<int64_t>()[i] = keep ? int64_t(r + 1) << 40 : 0; break;  // high bits only: 8-byte reads
    }
  }
  return m;
}

void run_case(const HopperCase& c, DType dt) {
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  if (cuda_check::device_is_hopper()) {
    // The kernel under test must be the one the dispatcher takes here.
    REQUIRE(cuda_fused::hopper_attention_applies(args_of(c, dt)));
    REQUIRE(std::string(cuda_fused::attention_kernel_name(args_of(c, dt))) == "hopper");
  }
  OpCase op("fuseopt", "Attention", 5, 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", c.causal));
  if (!std::isnan(c.fill)) op.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (!std::isnan(c.scale)) op.attr(Attribute::make_float("scale", c.scale));
  Tensor q, k, v, mask;
  if (c.packed) {
    q = cuda_check::random_tensor({c.B, c.S, (c.H + 2 * c.Hkv) * c.D}, -2.f, 2.f);
  } else {
    q = cuda_check::random_tensor({c.B, c.S, c.H * c.D}, -2.f, 2.f);
    k = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.D}, -2.f, 2.f);
    v = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.D});
  }
  if (c.mask == 3) {
    // Under causal the diagonal tiles of such a mask take the plain softmax path (their keys
    // are all kept), the last tiles the general one.
    mask = Tensor(DType::Bool, {c.B, c.Skv});
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < c.Skv; ++j) mask.data<uint8_t>()[b * c.Skv + j] = j < c.Skv - 5 * b;
  } else if (c.mask >= 4) {
    mask = holey_mask(c.B, c.Skv, c.mask);
  } else if (c.mask) {
    mask = cuda_check::random_padding_mask(c.B, c.Skv, c.mask == 1 ? DType::Int64 : DType::Bool);
  }
  op.inputs = {&q, c.packed ? nullptr : &k, c.packed ? nullptr : &v, c.mask ? &mask : nullptr, nullptr};
  auto want = op.run_cpu(dt);
  // Every variant of the kernel on the same inputs: 128-row blocks (two
  // consumer warpgroups) with and without ping-pong, persistent or one block
  // per item, P·V as m64n128 or 2 x m64n64 (head dim 128); 64-row and
  // 192-row blocks (head dim 64).
  // (persistent with max_blocks 3: every block walks several items, so the
  // K/V ring, its phases and the Q buffer carry over between items.)
  // (causal_persistent: causal calls on the persistent grid, snake order of the items — the
  // default — or, false, one block per item.)
  // (key_tile, head dim 128: 0 = by shape — 160 keys (O through the TMA store) without a mask —
  // else 128, 160 or 176 forced; 160 and 176 under causal too, so diagonal tiles of that
  // width run; with a mask the kernel keeps 128.)
  // (direct_store, head dim 64: O written by 4-byte stores from the registers instead of the
  // default staging buffer and TMA store.)
  struct Variant {
    int rows;
    bool pingpong, persistent, wide;
    int max_blocks;
    bool causal_persistent = false;
    int key_tile = 0;
    bool direct_store = false;
    bool flags_only = false;  // no varlen path: prefix masks too through the producer's key flags
  };
  const Variant variants[] = {{128, true, true, true, 0},  {128, false, false, true, 0}, {128, true, true, false, 0},
                              {128, true, true, true, 3},  {128, false, true, true, 2},  {64, true, true, true, 0},
                              {64, true, false, true, 0},  {64, true, true, true, 3},   {192, true, true, true, 0},
                              {192, false, false, true, 0}, {192, true, true, true, 3},
                              {128, true, true, true, 0, true}, {64, true, true, true, 0, true},
                              {64, true, true, true, 5, true},
                              {128, true, true, true, 0, false, 128}, {128, true, true, true, 0, false, 176},
                              {128, false, false, true, 0, false, 176}, {128, true, true, true, 3, false, 176},
                              {128, true, true, true, 4, true, 176},
                              {128, true, true, true, 0, false, 160}, {128, true, true, true, 3, true, 160},
                              {64, true, true, true, 3, true, 0, true}, {192, true, true, true, 0, false, 0, true},
                              {128, true, true, true, 0, false, 0, false, true},
                              {64, true, true, true, 3, true, 0, false, true}};
  for (const Variant& var : variants) {
    if (var.rows != 128 && c.D != 64) continue;
    if (!var.wide && c.D != 128) continue;
    if (var.key_tile && c.D != 128) continue;
    if (var.direct_store && c.D != 64) continue;
    INFO("block rows " << var.rows << (var.pingpong ? " ping-pong" : "") << (var.persistent ? " persistent" : "")
                       << (var.wide ? "" : " narrow P·V") << " max blocks " << var.max_blocks
                       << (var.causal_persistent ? " causal persistent" : "") << " key tile " << var.key_tile
                       << (var.direct_store ? " direct stores" : "") << (var.flags_only ? " flags only" : ""));
    cuda_fused::attention_hopper_set_blocks(var.rows);
    cuda_fused::attention_hopper_set_pingpong(var.pingpong);
    cuda_fused::attention_hopper_set_persistent(var.persistent, var.max_blocks);
    cuda_fused::attention_hopper_set_wide_pv(var.wide);
    cuda_fused::attention_hopper_set_causal_persistent(var.causal_persistent);
    cuda_fused::attention_hopper_set_key_tile(var.key_tile);
    cuda_fused::attention_hopper_set_tma_store(!var.direct_store);
    cuda_fused::attention_hopper_set_mask_prefix(var.flags_only ? 0 : -1);
    const long long launches = cuda_fused::attention_hopper_launch_count();
    auto got = op.run_cuda(dt);
    // It really ran (with the case's mask too: a mask the kernel refused would fall back silently).
    if (cuda_check::device_is_hopper()) CHECK(cuda_fused::attention_hopper_launch_count() > launches);
    cuda_fused::attention_hopper_set_tma_store(true);
    cuda_fused::attention_hopper_set_mask_prefix(-1);
    cuda_fused::attention_hopper_set_key_tile(0);
    cuda_fused::attention_hopper_set_causal_persistent(true);
    cuda_fused::attention_hopper_set_blocks(0);
    cuda_fused::attention_hopper_set_pingpong(true);
    cuda_fused::attention_hopper_set_persistent(true);
    cuda_fused::attention_hopper_set_wide_pv(true);
    REQUIRE(got[0].dims == want[0].dims);
    const double err = cuda_check::rel_error(got[0], want[0]);
    // Element-wise too: a norm-wise error can hide a few wrong rows of a long sequence.
    double max_abs = 0;
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      const float o = got[0].data<float>()[i], r = want[0].data<float>()[i];
      if (std::isnan(r) || std::isnan(o)) continue;  // NaN placement is rel_error's check
      max_abs = std::max(max_abs, double(std::fabs(o - r)));
    }
    INFO("relative error " << err << ", max abs error " << max_abs);
    CHECK(err < cuda_check::tolerance(dt));
    CHECK(max_abs < (dt == DType::BFloat16 ? 6e-2 : 1.5e-2));
  }
}

template <size_t N>
void run_all(const HopperCase (&cases)[N]) {
  cuda_fused::attention_set_hopper(1);
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const HopperCase& c : cases) run_case(c, dt);
  cuda_fused::attention_set_hopper(-1);
}

}  // namespace

TEST_CASE("cuda Attention Hopper kernel: tile remainders, causal alignment, GQA/MQA", "[cuda][attention][hopper]") {
  if (!cuda_check::gpu_ready()) return;
  for (int64_t D : {64, 128}) {
    INFO("head dim " << D);
    const HopperCase cases[] = {
        {1, 1, 1, 4, 4, D, true, false, 0, kNoAttr, kNoAttr},
        {2, 1, 1, 4, 4, D, true, true, 0, kNoAttr, kNoAttr},
        {2, 17, 17, 4, 4, D, true, false, 0, kNoAttr, kNoAttr},
        {2, 17, 17, 4, 4, D, true, true, 0, kNoAttr, kNoAttr},
        {1, 130, 130, 32, 8, D, false, true, 0, kNoAttr, kNoAttr},     // GQA 32/8
        {2, 130, 130, 32, 8, D, true, false, 0, kNoAttr, kNoAttr},     // packed GQA
        {2, 257, 257, 4, 1, D, false, false, 0, kNoAttr, kNoAttr},     // MQA
        {1, 257, 257, 8, 1, D, true, true, 0, kNoAttr, 0.3f},          // packed MQA, explicit scale
        {1, 1000, 1000, 2, 2, D, true, false, 0, kNoAttr, kNoAttr},
        {1, 1000, 1000, 2, 1, D, false, true, 0, kNoAttr, kNoAttr},
        {2, 100, 257, 4, 2, D, false, true, 0, kNoAttr, kNoAttr},      // S_q < S_kv: offset 157
        {1, 17, 1000, 4, 4, D, false, true, 0, kNoAttr, kNoAttr},      // one query tile, 8 key tiles
        {1, 257, 130, 4, 4, D, false, true, 0, kNoAttr, kNoAttr},      // S_q > S_kv: first rows see nothing (NaN)
        {2, 300, 17, 4, 2, D, false, false, 0, kNoAttr, kNoAttr},
        // Sharp softmaxes: later key tiles' maxima jump far past the running max (scale 2:
        // by more than 2^8, scale 8: by more than 2^126), so O and l are rescaled by factors
        // that underflow to 0.
        {1, 1000, 1000, 2, 2, D, false, false, 0, kNoAttr, 2.f},
        {2, 300, 700, 2, 1, D, false, true, 0, kNoAttr, 8.f},
        // Head dim 128's 160- and 176-key tiles (the default and a variant) ending 1, 128 and 130
        // keys into the last tile; one with a sharp softmax (scale 4).
        {2, 70, 161, 4, 2, D, false, false, 0, kNoAttr, kNoAttr},
        {1, 200, 288, 4, 4, D, false, false, 0, kNoAttr, 4.f},
        {1, 130, 290, 2, 1, D, false, false, 0, kNoAttr, kNoAttr},
        {1, 64, 304, 2, 2, D, false, false, 0, kNoAttr, kNoAttr},
        {1, 64, 177, 2, 2, D, false, false, 0, kNoAttr, kNoAttr},
    };
    run_all(cases);
  }
}

TEST_CASE("cuda Attention Hopper kernel: key-padding masks and fully masked rows", "[cuda][attention][hopper]") {
  if (!cuda_check::gpu_ready()) return;
  for (int64_t D : {64, 128}) {
    INFO("head dim " << D);
    const HopperCase cases[] = {
        {3, 130, 130, 4, 4, D, true, false, 1, kNoAttr, kNoAttr},     // -inf fill: batch 0 NaN
        {3, 130, 130, 4, 4, D, true, false, 1, kFinfoMin, kNoAttr},   // finfo.min: uniform rows
        {3, 257, 257, 4, 2, D, false, true, 2, kFinfoMin, kNoAttr},   // bool mask + causal
        {3, 257, 257, 4, 2, D, false, true, 2, kNoAttr, kNoAttr},
        {2, 17, 300, 4, 4, D, false, false, 1, -10000.f, kNoAttr},
        {2, 1000, 1000, 2, 1, D, false, true, 1, kFinfoMin, kNoAttr},
        {2, 1, 257, 4, 4, D, false, false, 2, kNoAttr, kNoAttr},
        {3, 300, 300, 4, 2, D, false, true, 3, kNoAttr, kNoAttr},    // causal, diagonal tiles unmasked
        {2, 100, 300, 4, 4, D, false, true, 3, kFinfoMin, kNoAttr},  // the same with S_q < S_kv
        // Mask dtypes (the producer reads each element's raw bits, mask_load_raw / mask_raw_keep:
        // floats keep any value but +0 and -0; the int64 values set high bits only), holes at any
        // key, and all-ones masks (only a tile reaching past S_kv takes the general softmax path).
        {3, 130, 257, 4, 2, D, false, false, 4, kFinfoMin, kNoAttr},  // int32 holes
        {3, 257, 257, 4, 4, D, false, true, 5, kFinfoMin, kNoAttr},   // float32 +-0 holes, causal
        {2, 200, 391, 4, 4, D, false, false, 6, -10000.f, kNoAttr},   // fp16 holes
        {3, 300, 300, 4, 2, D, false, true, 7, kNoAttr, kNoAttr},     // int64 all ones, causal
        {2, 17, 1000, 4, 4, D, false, false, 7, kFinfoMin, kNoAttr},  // all ones, 8 key tiles
    };
    run_all(cases);
  }
}

TEST_CASE("cuda Attention Hopper kernel: where it does not apply", "[cuda][attention][hopper]") {
  cuda_fused::AttentionArgs a = args_of({2, 64, 64, 4, 4, 64, true, false, 0, kNoAttr, kNoAttr}, DType::Float16);
  cuda_fused::AttentionArgs b = a;
  b.dtype = DType::Float;
  CHECK_FALSE(cuda_fused::hopper_attention_applies(b));
  b = a;
  b.Dh = b.Dv = 80;
  CHECK_FALSE(cuda_fused::hopper_attention_applies(b));
  b = a;
  static const float bias[1] = {};
  b.bias = bias;
  CHECK_FALSE(cuda_fused::hopper_attention_applies(b));
  b = a;
  b.q = reinterpret_cast<const char*>(a.q) + 2;  // rows not 16-byte aligned
  CHECK_FALSE(cuda_fused::hopper_attention_applies(b));
  cuda_fused::attention_set_hopper(0);
  CHECK_FALSE(cuda_fused::hopper_attention_applies(a));
  cuda_fused::attention_set_hopper(-1);
}
