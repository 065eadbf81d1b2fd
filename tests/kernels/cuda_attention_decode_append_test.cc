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
// with a fully masked row (-inf: NaN, or 0 with masked_rows_zero; finfo.min: uniform), the mask
// compared where it is loaded or a pass later (FUSEOPT_DECODE_MASK_DEFER), and the present not
// requested (one output). Every case runs with FUSEOPT_DECODE_MMA=0: the tensor-core kernel,
// which takes fp16/bf16 steps first by default, has its own file (cuda_attention_decode_mma_test.cc).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/fused_attention_decode.h"
#include "support/cuda_kernel_check.h"
#include "support/decode_attention_cases.h"

using namespace fuseopt;
using cuda_check::OpCase;
using namespace decode_attention;

TEST_CASE("cuda Attention decode append: heads, head dims, cache lengths, batch", "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
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

TEST_CASE("cuda Attention decode append: the mask compared where it is used (FUSEOPT_DECODE_MASK_DEFER)",
          "[cuda][attention][decode]") {
  if (!cuda_check::gpu_ready()) return;
  MmaMode registers("0");  // the register kernel (the tensor-core one: cuda_attention_decode_mma_test.cc)
  // The mask element loaded with its K/V rows and compared a pass later, or compared where it is
  // loaded: both against the reference on int64 and bool masks (batch 0 fully masked), in the
  // register form (long caches at batch 8, where the model's step runs it) and the staged one.
  for (const char* defer : {"1", "0"}) {
    setenv("FUSEOPT_DECODE_MASK_DEFER", defer, 1);
    INFO("FUSEOPT_DECODE_MASK_DEFER=" << defer);
    for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
      run_step({8, 2047, 32, 8, 64, 1, kNoAttr, true}, dt);
      run_step({4, 300, 32, 8, 128, 2, kFinfoMin, false}, dt);
      run_step({3, 1000, 12, 4, 64, 1, -10000.f, false}, dt);
      run_step({2, 31, 8, 1, 64, 2, kNoAttr, true}, dt);
    }
    run_step({8, 4095, 32, 8, 64}, DType::Float16);  // no mask
    setenv("FUSEOPT_DECODE_STAGED", "1", 1);
    run_step({1, 2047, 32, 8, 64, 1, kNoAttr, false}, DType::Float16);
    unsetenv("FUSEOPT_DECODE_STAGED");
  }
  unsetenv("FUSEOPT_DECODE_MASK_DEFER");
}

