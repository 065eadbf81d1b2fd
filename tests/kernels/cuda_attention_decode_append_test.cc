// CUDA fuseopt.Attention decode step in ONE launch (kernels/cuda/fused_attention_decode_append.cu:
// the K/V append and split-KV attention together, splits merged through a thread-block cluster)
// against the CPU kernel (kernels/cpu/fused_attention.cc) on fresh random inputs, outputs
// NaN-poisoned by the harness first. Y and both presents are compared (the presents exactly:
// they are copies). Every case checks that the one-launch kernel is what ran (its launch
// counter), or that it declined where it does not apply.
// Sizes: past lengths that divide no pass (32 keys at head dim 64 in fp16) or split, one pass
// with most rows empty (past 1), many passes per split (past 9000), batch 1 / 3 / 8 (the plan
// changes heads per block with the grid), MHA / GQA 32/8 / group 3 (one head per block) /
// group 8 / MQA, head dims 64, 128, 256, fp32 / fp16 / bf16, key-padding masks (int64, bool)
// with a fully masked row (-inf: NaN, or 0 with masked_rows_zero; finfo.min: uniform), and the
// present not requested (one output).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "kernels/cuda/fused_attention_decode.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const float kNoAttr = std::numeric_limits<float>::quiet_NaN();
const float kFinfoMin = -3.4028234663852886e38f;

struct Step {
  int64_t B, Sp, H, Hkv, D;
  int mask = 0;           // 0 none, 1 int64 padding over Sp + 1 (batch 0 fully masked), 2 bool
  float fill = kNoAttr;   // mask_filter_value (NaN = omitted: -inf)
  bool rows_zero = false;
  bool present = true;    // the op declares present_key / present_value
};

std::string describe(const Step& c) {
  std::ostringstream os;
  os << "B" << c.B << " S_past" << c.Sp << " H" << c.H << " Hkv" << c.Hkv << " D" << c.D << " mask" << c.mask
     << " fill " << c.fill << (c.rows_zero ? " masked_rows_zero" : "") << (c.present ? "" : " no present");
  return os.str();
}

// FUSEOPT_DECODE_APPEND for one scope (the host reads it on every call).
struct AppendMode {
  explicit AppendMode(const char* v) { setenv("FUSEOPT_DECODE_APPEND", v, 1); }
  ~AppendMode() { unsetenv("FUSEOPT_DECODE_APPEND"); }
};

OpCase make_op(const Step& c) {
  OpCase op("fuseopt", "Attention", 7, c.present ? 3 : 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", 1));  // one query over the cache: causal keeps every key
  if (!std::isnan(c.fill)) op.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (c.rows_zero) op.attr(Attribute::make_int("masked_rows_zero", 1));
  return op;
}

// Runs the step on the GPU (expecting the one-launch kernel, or not) and on the CPU.
void run_step(const Step& c, DType dt, bool expect_kernel = true) {
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  OpCase op = make_op(c);
  Tensor q = cuda_check::random_tensor({c.B, 1, c.H * c.D}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({c.B, 1, c.Hkv * c.D}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({c.B, 1, c.Hkv * c.D});
  Tensor pk = cuda_check::random_tensor({c.B, c.Hkv, c.Sp, c.D}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({c.B, c.Hkv, c.Sp, c.D});
  Tensor mask;
  if (c.mask) mask = cuda_check::random_padding_mask(c.B, c.Sp + 1, c.mask == 1 ? DType::Int64 : DType::Bool);
  op.inputs = {&q, &k, &v, c.mask ? &mask : nullptr, nullptr, &pk, &pv};
  auto want = op.run_cpu(dt);
  AppendMode on("1");
  const long long before = cuda_fused::decode_append_launch_count();
  auto got = op.run_cuda(dt);
  const long long launched = cuda_fused::decode_append_launch_count() - before;
  if (expect_kernel) CHECK(launched >= 1);
  else CHECK(launched == 0);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    INFO("output " << o);
    REQUIRE(got[o].dims == want[o].dims);
    const double err = cuda_check::rel_error(got[o], want[o]);
    INFO("relative error " << err);
    if (o == 0) CHECK(err < cuda_check::tolerance(dt));
    else CHECK(err == 0.0);  // the presents are copies of the (rounded) inputs
  }
  if (c.rows_zero && c.mask && (std::isnan(c.fill) || std::isinf(c.fill))) {
    // Batch 0 is fully masked with -inf: exactly 0 (rel_error already fails on NaN).
    for (int64_t i = 0; i < c.H * c.D; ++i) REQUIRE(got[0].data<float>()[i] == 0.0f);
  }
}

}  // namespace

TEST_CASE("cuda Attention decode append: heads, head dims, cache lengths, batch", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  struct Heads {
    int64_t H, Hkv;
  };
  for (Heads hd : {Heads{8, 8}, Heads{32, 8}, Heads{12, 4}, Heads{16, 2}, Heads{8, 1}})
    for (int64_t D : {64, 128})
      for (int64_t past : {1, 31, 128, 2047, 9000})
        for (int64_t B : {1, 3, 8}) {
          if (past == 9000 && B == 8 && D == 128) continue;  // the largest case adds time, not coverage
          Step c{B, past, hd.H, hd.Hkv, D};
          if (B > 1) {
            c.mask = past % 2 ? 1 : 2;
            c.rows_zero = D == 64;
          }
          run_step(c, DType::Float16);
        }
}

TEST_CASE("cuda Attention decode append: dtypes, fills, masked rows, head dim 256, no present",
          "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    run_step({4, 300, 32, 8, 64, 1, kNoAttr, false}, dt);      // -inf: batch 0 NaN
    run_step({4, 300, 32, 8, 64, 1, kNoAttr, true}, dt);       // -inf: batch 0 zero
    run_step({4, 300, 32, 8, 128, 2, kFinfoMin, true}, dt);    // finfo.min: uniform
    run_step({3, 1000, 12, 4, 64, 1, -10000.f, false}, dt);    // group 3: one head per block
    // 32 lanes per key row in fp16/bf16; in fp32 a 256-wide row is 64 pieces: declined.
    run_step({2, 517, 4, 4, 256, 2, kNoAttr, true}, dt, dt != DType::Float);
    run_step({2, 129, 32, 8, 64, 1, kNoAttr, false, false}, dt);  // only Y: no present written
  }
}

TEST_CASE("cuda Attention decode append: declines what it does not take", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  // Head dims that are not a multiple of 16 bytes, and Dv != Dh: the two-launch paths.
  run_step({2, 129, 4, 2, 20, 1, kNoAttr, true}, DType::Float16, false);
  {
    OpCase op("fuseopt", "Attention", 7, 3);
    op.attr(Attribute::make_int("num_heads", 4));
    op.attr(Attribute::make_int("kv_num_heads", 4));
    Tensor q = cuda_check::random_tensor({2, 1, 4 * 64}, -2.f, 2.f);
    Tensor k = cuda_check::random_tensor({2, 1, 4 * 64}, -2.f, 2.f);
    Tensor v = cuda_check::random_tensor({2, 1, 4 * 32});
    Tensor pk = cuda_check::random_tensor({2, 4, 40, 64}, -2.f, 2.f);
    Tensor pv = cuda_check::random_tensor({2, 4, 40, 32});
    op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv};
    auto want = op.run_cpu(DType::Float16);
    AppendMode on("1");
    const long long before = cuda_fused::decode_append_launch_count();
    auto got = op.run_cuda(DType::Float16);
    CHECK(cuda_fused::decode_append_launch_count() == before);
    CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(DType::Float16));
  }
  // Switched off: the same step through the two-launch kernels.
  AppendMode off("0");
  const long long before = cuda_fused::decode_append_launch_count();
  Step c{2, 300, 32, 8, 64, 1};
  OpCase op = make_op(c);
  Tensor q = cuda_check::random_tensor({2, 1, 32 * 64}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({2, 1, 8 * 64}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({2, 1, 8 * 64});
  Tensor pk = cuda_check::random_tensor({2, 8, 300, 64}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({2, 8, 300, 64});
  op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv};
  auto want = op.run_cpu(DType::Float16);
  auto got = op.run_cuda(DType::Float16);
  CHECK(cuda_fused::decode_append_launch_count() == before);
  CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(DType::Float16));
}

TEST_CASE("cuda Attention decode append: deterministic across runs", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  // The cluster merge sums the splits in rank order: two runs agree bit for bit.
  Step c{1, 3000, 32, 8, 64};
  OpCase op = make_op(c);
  Tensor q = cuda_check::random_tensor({1, 1, 32 * 64}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({1, 1, 8 * 64}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({1, 1, 8 * 64});
  Tensor pk = cuda_check::random_tensor({1, 8, 3000, 64}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({1, 8, 3000, 64});
  op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv};
  AppendMode on("1");
  const long long before = cuda_fused::decode_append_launch_count();
  auto first = op.run_cuda(DType::Float16);
  auto second = op.run_cuda(DType::Float16);
  CHECK(cuda_fused::decode_append_launch_count() >= before + 2);
  REQUIRE(first[0].bytes.size() == second[0].bytes.size());
  CHECK(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), first[0].bytes.size()) == 0);
}

TEST_CASE("cuda Attention decode append: the staged and register forms", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  // The plan stages a split's rows in shared memory where they fit (batch 1 over a long cache);
  // FUSEOPT_DECODE_STAGED=0 keeps them in registers. Both against the reference on the same shapes.
  for (const char* staged : {"0", "1"}) {
    setenv("FUSEOPT_DECODE_STAGED", staged, 1);
    INFO("FUSEOPT_DECODE_STAGED=" << staged);
    run_step({1, 2047, 32, 8, 64}, DType::Float16);
    run_step({1, 1500, 8, 1, 128, 2, kFinfoMin, false}, DType::BFloat16);
    run_step({3, 1000, 12, 4, 64, 1, kNoAttr, true}, DType::Float16);
    run_step({2, 700, 16, 2, 64, 1, -10000.f, false}, DType::Float);
  }
  unsetenv("FUSEOPT_DECODE_STAGED");
}

TEST_CASE("cuda Attention decode append: 128, 256 and 512 threads a block", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  // The plan takes more threads per block for long caches on small grids; FUSEOPT_DECODE_THREADS
  // forces a size (the largest that fits the heads per block: four query heads never get 512).
  // Each size against the reference, on caches that divide no pass of any size.
  for (const char* threads : {"128", "256", "512"}) {
    setenv("FUSEOPT_DECODE_THREADS", threads, 1);
    INFO("FUSEOPT_DECODE_THREADS=" << threads);
    run_step({1, 2047, 32, 8, 64}, DType::Float16);
    run_step({8, 2047, 32, 8, 64, 1, kNoAttr, true}, DType::Float16);
    run_step({1, 3001, 8, 1, 128, 2, kFinfoMin, false}, DType::BFloat16);
    run_step({3, 1000, 12, 4, 64, 1, kNoAttr, true}, DType::Float16);
    run_step({2, 700, 16, 2, 64, 1, -10000.f, false}, DType::Float);
    run_step({1, 5, 32, 8, 64}, DType::Float16);
  }
  unsetenv("FUSEOPT_DECODE_THREADS");
}
