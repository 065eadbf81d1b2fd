// CUDA fuseopt.Attention with a KV cache (past_key/past_value -> present_key/present_value)
// against the CPU kernel (kernels/cpu/fused_attention.cc) on fresh random inputs, outputs
// NaN-poisoned by the harness first; Y and both presents are compared.
//   - Decode (S_q = 1) through the split-KV kernel (kernels/cuda/fused_attention_decode.cu,
//     forced on with FUSEOPT_FLASH_DECODE=1, its launch counter checked): MHA, GQA 32/8, MQA,
//     head dims 64 and 128, past lengths 1, 127, 2047, 4095 (no multiple of any split chunk),
//     batch 1 and 8, key-padding masks with fully masked rows (-inf: NaN, or 0 with
//     masked_rows_zero; finfo.min: uniform), fp32 / fp16 / bf16, and the scalar fallback
//     (head dims that are not a multiple of 16 bytes).
//   - Prefill over a cache (S_q > 1): every kernel reads the present [B, Hkv, S_kv, D] in place
//     through its head stride (no re-layout copy): the mma.sync kernel, the Hopper kernel
//     (launch counter checked on compute capability 9.0), the generic one (fp32, head dim 80);
//     past lengths that do not divide the 64/128-key tiles, causal bottom-right alignment.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const float kNoAttr = std::numeric_limits<float>::quiet_NaN();
const float kFinfoMin = -3.4028234663852886e38f;

struct KvCase {
  int64_t B, S, Sp, H, Hkv, Dh, Dv;
  bool causal = false;
  int mask = 0;           // 0 none, 1 int64 padding over S_past + S (batch 0 fully masked), 2 bool
  float fill = kNoAttr;   // mask_filter_value (NaN = omitted: -inf)
  bool rows_zero = false; // masked_rows_zero = 1
};

std::string describe(const KvCase& c) {
  std::ostringstream os;
  os << "B" << c.B << " S" << c.S << " S_past" << c.Sp << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " Dv"
     << c.Dv << (c.causal ? " causal" : "") << " mask" << c.mask << " fill " << c.fill
     << (c.rows_zero ? " masked_rows_zero" : "");
  return os.str();
}

// Sets FUSEOPT_FLASH_DECODE for one scope (the host reads it on every call), with the one-launch
// append + attention kernel off: these cases test the two-launch kernels (the one-launch kernel
// has tests/kernels/cuda_attention_decode_append_test.cc).
struct FlashDecode {
  explicit FlashDecode(bool on) {
    setenv("FUSEOPT_FLASH_DECODE", on ? "1" : "0", 1);
    setenv("FUSEOPT_DECODE_APPEND", "0", 1);
  }
  ~FlashDecode() {
    unsetenv("FUSEOPT_FLASH_DECODE");
    unsetenv("FUSEOPT_DECODE_APPEND");
  }
};

// Runs the case on the GPU and the CPU and compares Y, present_key and present_value.
void run_case(const KvCase& c, DType dt) {
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 7, 3);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", c.causal));
  if (!std::isnan(c.fill)) op.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (c.rows_zero) op.attr(Attribute::make_int("masked_rows_zero", 1));
  Tensor q = cuda_check::random_tensor({c.B, c.S, c.H * c.Dh}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({c.B, c.S, c.Hkv * c.Dh}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({c.B, c.S, c.Hkv * c.Dv});
  Tensor pk = cuda_check::random_tensor({c.B, c.Hkv, c.Sp, c.Dh}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({c.B, c.Hkv, c.Sp, c.Dv});
  Tensor mask;
  if (c.mask) mask = cuda_check::random_padding_mask(c.B, c.Sp + c.S, c.mask == 1 ? DType::Int64 : DType::Bool);
  op.inputs = {&q, &k, &v, c.mask ? &mask : nullptr, nullptr, &pk, &pv};
  auto want = op.run_cpu(dt);
  auto got = op.run_cuda(dt);
  REQUIRE(got.size() == 3);
  for (int o = 0; o < 3; ++o) {
    INFO("output " << o);
    REQUIRE(got[o].dims == want[o].dims);
    const double err = cuda_check::rel_error(got[o], want[o]);
    INFO("relative error " << err);
    if (o == 0) {
      CHECK(err < cuda_check::tolerance(dt));
    } else {
      CHECK(err == 0.0);  // the presents are copies of the (rounded) inputs
    }
  }
  if (c.rows_zero && c.mask && (std::isnan(c.fill) || std::isinf(c.fill))) {
    // Batch 0 is fully masked with -inf: exactly 0 (rel_error already fails on NaN).
    for (int64_t i = 0; i < c.S * c.H * c.Dv; ++i) REQUIRE(got[0].data<float>()[i] == 0.0f);
  }
}

// Sets FUSEOPT_DECODE_FUSED=0 (the two-pass split/merge kernels) for one scope.
struct TwoPassDecode {
  TwoPassDecode() { setenv("FUSEOPT_DECODE_FUSED", "0", 1); }
  ~TwoPassDecode() { unsetenv("FUSEOPT_DECODE_FUSED"); }
};

enum class Path { Any, Fused, TwoPass };

// A decode case through the split-KV kernels, which must have been the ones that ran: the
// one-launch kernel (Fused) or the two-pass ones, where the case says which.
void run_decode(const KvCase& c, DType dt, Path path = Path::Any) {
  FlashDecode on(true);
  const long long before = cuda_fused::flash_decode_launch_count();
  const long long fused_before = cuda_fused::flash_decode_fused_launch_count();
  run_case(c, dt);
  CHECK(cuda_fused::flash_decode_launch_count() == before + 1);
  const long long fused = cuda_fused::flash_decode_fused_launch_count() - fused_before;
  if (path == Path::Fused) CHECK(fused == 1);
  if (path == Path::TwoPass) CHECK(fused == 0);
}

}  // namespace

TEST_CASE("cuda Attention flash decode: MHA/GQA/MQA, head dims 64/128, past 1..4095, batch 1 and 8",
          "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  struct Heads {
    int64_t H, Hkv;
  };
  for (Heads hd : {Heads{8, 8}, Heads{32, 8}, Heads{8, 1}})
    for (int64_t D : {64, 128})
      for (int64_t past : {1, 127, 2047, 4095})
        for (int64_t B : {1, 8}) {
          KvCase c{B, 1, past, hd.H, hd.Hkv, D, D};
          // Batch 8: a padding mask over the past + the new token, batch 0 fully masked
          // (-inf; masked_rows_zero on every other case), batch 1: no mask.
          if (B == 8) {
            c.mask = past % 2 ? 1 : 2;
            c.rows_zero = D == 64;
          }
          // Batch 1 up to 2048 keys fits the one-launch kernel's grid; bigger grids may go either way.
          run_decode(c, DType::Float16, B == 1 && past <= 2047 ? Path::Fused : Path::Any);
        }
}

TEST_CASE("cuda Attention flash decode: the two-pass kernels (forced, Dv != Dh, a cache past 256 chunks)",
          "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  {
    TwoPassDecode two_pass;
    run_decode({1, 1, 2047, 32, 8, 64, 64}, DType::Float16, Path::TwoPass);
    run_decode({8, 1, 127, 8, 1, 128, 128, false, 1, kNoAttr, true}, DType::Float16, Path::TwoPass);
    run_decode({4, 1, 300, 32, 8, 64, 64, false, 2, kFinfoMin, false}, DType::BFloat16, Path::TwoPass);
  }
  run_decode({2, 1, 517, 16, 16, 128, 64, false, 0, kNoAttr, false}, DType::Float16, Path::TwoPass);
  // 17000 keys at head dim 64: 266 chunks of 64, past the one-launch kernel's 256.
  run_decode({1, 1, 16999, 8, 2, 64, 64, false, 1, kNoAttr, false}, DType::Float16, Path::TwoPass);
  run_decode({1, 1, 16000, 8, 2, 64, 64, false, 1, kNoAttr, false}, DType::Float16, Path::Fused);
}

TEST_CASE("cuda Attention flash decode: one launch is deterministic and replays under a CUDA graph",
          "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  // Same inputs twice (the harness runs eager, then a replayed graph where it checks graphs):
  // the last block's merge sums the splits in a fixed order, so both runs agree bit for bit.
  OpCase op("fuseopt", "Attention", 7, 3);
  op.attr(Attribute::make_int("num_heads", 32));
  op.attr(Attribute::make_int("kv_num_heads", 8));
  // Batch 1, 3001 keys: 47 chunks x 8 head groups = 376 blocks, within the one-launch kernel's
  // grid limit (batch 2 went to the two-pass kernels: session 8's call 4 failed this check there).
  Tensor q = cuda_check::random_tensor({1, 1, 32 * 64}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({1, 1, 8 * 64}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({1, 1, 8 * 64});
  Tensor pk = cuda_check::random_tensor({1, 8, 3000, 64}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({1, 8, 3000, 64});
  op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv};
  FlashDecode on(true);
  const long long fused_before = cuda_fused::flash_decode_fused_launch_count();
  auto first = op.run_cuda(DType::Float16);
  auto second = op.run_cuda(DType::Float16);
  CHECK(cuda_fused::flash_decode_fused_launch_count() >= fused_before + 2);
  REQUIRE(first[0].dims == second[0].dims);
  CHECK(cuda_check::rel_error(first[0], second[0]) == 0.0);
  REQUIRE(first[0].bytes.size() == second[0].bytes.size());
  CHECK(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), first[0].bytes.size()) == 0);
}

TEST_CASE("cuda Attention flash decode: dtypes, fills, masked rows, the scalar fallback", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    run_decode({4, 1, 300, 32, 8, 64, 64, false, 1, kNoAttr, false}, dt);     // -inf: batch 0 NaN
    run_decode({4, 1, 300, 32, 8, 64, 64, false, 1, kNoAttr, true}, dt);      // -inf: batch 0 zero
    run_decode({4, 1, 300, 32, 8, 128, 128, false, 2, kFinfoMin, true}, dt);  // finfo.min: uniform
    run_decode({3, 1, 1000, 12, 4, 64, 64, true, 1, -10000.f, false}, dt);    // group 3: 1 head/block
    run_decode({2, 1, 517, 16, 16, 128, 64, false, 0, kNoAttr, false}, dt);   // Dv != Dh
  }
  // Head sizes the 16-byte path does not take: one element per load.
  REQUIRE_FALSE(cuda_fused::flash_decode_vector_path(DType::Float16, 20, 20));
  REQUIRE_FALSE(cuda_fused::flash_decode_vector_path(DType::Float, 256, 256));
  REQUIRE(cuda_fused::flash_decode_vector_path(DType::Float16, 256, 256));
  run_decode({3, 1, 129, 4, 2, 20, 20, false, 1, kNoAttr, true}, DType::Float16);
  run_decode({2, 1, 300, 4, 1, 256, 256, false, 1, kFinfoMin, false}, DType::Float);
  run_decode({2, 1, 300, 4, 4, 256, 256, false, 2, kNoAttr, true}, DType::BFloat16);
  // Off: the same decode step through the prefill kernels (present read in place).
  FlashDecode off(false);
  const long long before = cuda_fused::flash_decode_launch_count();
  run_case({4, 1, 300, 32, 8, 64, 64, true, 1, kNoAttr, true}, DType::Float16);
  CHECK(cuda_fused::flash_decode_launch_count() == before);
}

TEST_CASE("cuda Attention prefill over a KV cache reads the present in place (mma, Hopper, generic)",
          "[cuda][attention][kv_cache]") {
  if (!cuda_check::gpu_ready()) return;
  FlashDecode off(false);
  const KvCase cases[] = {
      {2, 37, 100, 8, 2, 64, 64, true, 0},                   // past + new = 137: no tile multiple
      {2, 37, 100, 8, 2, 128, 128, true, 1, kNoAttr, true},  // padding, batch 0 fully masked -> 0
      {1, 130, 257, 4, 4, 64, 64, true, 2, kFinfoMin},       // MHA, several key tiles
      {3, 3, 5, 4, 1, 64, 64, true, 1},                      // MQA, tiny (-inf: batch 0 NaN)
      {2, 65, 1, 4, 2, 128, 128, false, 0},                  // one cached key
  };
  // mma.sync (Hopper kernel off), then the Hopper kernel (forced on).
  for (int hopper : {0, 1}) {
    INFO("hopper " << hopper);
    cuda_fused::attention_set_hopper(hopper);
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (const KvCase& c : cases) {
        const long long before = cuda_fused::attention_hopper_launch_count();
        run_case(c, dt);
        if (hopper && cuda_check::device_is_hopper()) CHECK(cuda_fused::attention_hopper_launch_count() == before + 1);
        if (!hopper) CHECK(cuda_fused::attention_hopper_launch_count() == before);
      }
  }
  cuda_fused::attention_set_hopper(-1);
  // The generic kernel: fp32, and a head dim the tensor-core kernels do not take.
  for (const KvCase& c : cases) run_case(c, DType::Float);
  run_case({2, 9, 70, 4, 2, 80, 80, true, 1, kNoAttr, true}, DType::Float16);
}

TEST_CASE("cuda Attention masked_rows_zero on every kernel path", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  // Rows with no visible key two ways: batch 0 of the padding mask (-inf fill) and, under
  // causal with S_q > S_kv, the first S_q - S_kv query rows. Both must be 0, never NaN.
  auto run = [](int64_t B, int64_t S, int64_t Skv, int64_t H, int64_t Hkv, int64_t D, bool causal, DType dt) {
    INFO("B" << B << " S" << S << " Skv" << Skv << " H" << H << " Hkv" << Hkv << " D" << D
             << (causal ? " causal" : "") << " " << cuda_check::short_name(dt));
    OpCase op("fuseopt", "Attention", 5, 1);
    op.attr(Attribute::make_int("num_heads", H));
    op.attr(Attribute::make_int("kv_num_heads", Hkv));
    op.attr(Attribute::make_int("causal", causal));
    op.attr(Attribute::make_int("masked_rows_zero", 1));
    Tensor q = cuda_check::random_tensor({B, S, H * D}, -2.f, 2.f);
    Tensor k = cuda_check::random_tensor({B, Skv, Hkv * D}, -2.f, 2.f);
    Tensor v = cuda_check::random_tensor({B, Skv, Hkv * D});
    Tensor mask = cuda_check::random_padding_mask(B, Skv, DType::Int64);
    op.inputs = {&q, &k, &v, &mask, nullptr};
    auto want = op.run_cpu(dt);
    const long long before = cuda_fused::attention_hopper_launch_count();
    auto got = op.run_cuda(dt);
    const long long hopper_runs = cuda_fused::attention_hopper_launch_count() - before;
    const double err = cuda_check::rel_error(got[0], want[0]);
    INFO("relative error " << err << ", Hopper kernel launches " << hopper_runs);
    CHECK(err < cuda_check::tolerance(dt));
    for (int64_t i = 0; i < S * H * D; ++i) REQUIRE(got[0].data<float>()[i] == 0.0f);  // batch 0
    return hopper_runs;
  };
  for (int hopper : {0, 1}) {  // mma.sync, then the Hopper kernel where the device has it
    cuda_fused::attention_set_hopper(hopper);
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (int64_t D : {64, 128}) {
        const long long n = run(3, 130, 130, 4, 2, D, false, dt) + run(2, 200, 70, 4, 4, D, true, dt);
        // rows 0..129 of the second see no key; the kernel under test must be the one that ran
        if (hopper && cuda_check::device_is_hopper()) CHECK(n == 2);
        if (!hopper) CHECK(n == 0);
      }
  }
  cuda_fused::attention_set_hopper(-1);
  run(3, 70, 70, 4, 4, 64, false, DType::Float);    // generic
  run(2, 90, 33, 2, 2, 80, true, DType::Float16);   // generic head dim
}
