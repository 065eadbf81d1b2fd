// The tensor-core decode step of fuseopt.Attention (kernels/cuda/fused_attention_decode_mma.cu)
// through the op, against the CPU kernel on fresh random inputs with NaN-poisoned outputs (the
// harness in support/decode_attention_cases.h: Y within the type's tolerance, the presents
// exactly). Every case checks the tensor-core kernel's launch counter: it ran, or it declined
// and the register kernel took the step.
// Sizes: caches that end mid-tile (16 keys) and mid-split (past 1, 15, 31, 2047, 9000), batch 1
// / 3 / 8 (splits change with the grid), query heads a kv head 1 (MHA), 3, 4, 7, 8, 16 (the
// MMA's 16 rows full) and MQA, head dims 64 and 128, fp16 / bf16, int64 and bool key-padding
// masks with a fully masked row (-inf: NaN, or 0 with masked_rows_zero; finfo.min; -10000),
// the present not requested.
#include <catch2/catch.hpp>

#include <cstring>

#include "kernels/cuda/fused_attention_decode.h"
#include "support/cuda_kernel_check.h"
#include "support/decode_attention_cases.h"

using namespace fuseopt;
using cuda_check::OpCase;
using namespace decode_attention;

namespace {

// run_step, and the tensor-core kernel's launches in it (expected: ran or not).
void run_mma(const Step& c, DType dt, bool expect_mma = true) {
  const long long before = cuda_fused::decode_mma_launch_count();
  run_step(c, dt);
  const long long launched = cuda_fused::decode_mma_launch_count() - before;
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  if (expect_mma) CHECK(launched >= 1);
  else CHECK(launched == 0);
}

}  // namespace

TEST_CASE("cuda Attention decode on tensor cores: heads, head dims, cache lengths, batch",
          "[cuda][attention][decode][decode_mma]") {
  if (!cuda_check::gpu_ready()) return;
  MmaMode on("1");
  struct Heads {
    int64_t H, Hkv;
  };
  for (Heads hd : {Heads{8, 8}, Heads{32, 8}, Heads{12, 4}, Heads{28, 4}, Heads{16, 2}, Heads{16, 1}, Heads{8, 1}})
    for (int64_t D : {64, 128})
      for (int64_t past : {1, 15, 31, 2047, 9000})
        for (int64_t B : {1, 3, 8}) {
          if (past == 9000 && B == 8) continue;  // the largest cases add time, not coverage
          Step c{B, past, hd.H, hd.Hkv, D};
          if (B > 1) {
            c.mask = past % 2 ? 1 : 2;
            c.rows_zero = D == 64;
          }
          run_mma(c, DType::Float16);
        }
}

TEST_CASE("cuda Attention decode on tensor cores: bf16, fills, masked rows, no present, declines",
          "[cuda][attention][decode][decode_mma]") {
  if (!cuda_check::gpu_ready()) return;
  MmaMode on("1");
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    run_mma({4, 300, 32, 8, 64, 1, kNoAttr, false}, dt);      // -inf: batch 0 NaN
    run_mma({4, 300, 32, 8, 64, 1, kNoAttr, true}, dt);       // -inf: batch 0 zero
    run_mma({4, 300, 32, 8, 128, 2, kFinfoMin, true}, dt);    // finfo.min: uniform
    run_mma({3, 1000, 12, 4, 64, 1, -10000.f, false}, dt);
    run_mma({8, 2047, 32, 8, 64, 1, kNoAttr, false}, dt);     // Llama-1B's step at 8 x 2048
    run_mma({2, 129, 32, 8, 64, 1, kNoAttr, false, false}, dt);  // only Y: no present written
    // The mask a graph input: read before the programmatic-launch wait (DecodeAppend::mask_stable).
    run_mma({4, 300, 32, 8, 64, 1, kNoAttr, true, true, true}, dt);
    run_mma({3, 2047, 32, 8, 128, 2, kFinfoMin, false, true, true}, dt);
    run_mma({1, 4000, 16, 2, 64, 1, kNoAttr, false, true, true}, dt);
  }
  // Not this kernel's: float32, head dim 256, more than 16 query heads a kv head. The register
  // kernel takes them (run_step checks that one launch kernel ran and the result).
  run_mma({2, 300, 32, 8, 64, 1}, DType::Float, false);
  run_mma({2, 517, 4, 4, 256, 2, kNoAttr, true}, DType::Float16, false);
  run_mma({2, 300, 32, 1, 64, 1}, DType::Float16, false);
  // Switched off.
  MmaMode off("0");
  run_mma({2, 300, 32, 8, 64, 1}, DType::Float16, false);
}

TEST_CASE("cuda Attention decode on tensor cores: deterministic across runs", "[cuda][attention][decode][decode_mma]") {
  if (!cuda_check::gpu_ready()) return;
  // Warps, then the cluster's splits, merged in a fixed order: two runs agree bit for bit.
  MmaMode on("1");
  Step c{2, 3000, 32, 8, 64};
  OpCase op = make_op(c);
  Tensor q = cuda_check::random_tensor({2, 1, 32 * 64}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({2, 1, 8 * 64}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({2, 1, 8 * 64});
  Tensor pk = cuda_check::random_tensor({2, 8, 3000, 64}, -2.f, 2.f);
  Tensor pv = cuda_check::random_tensor({2, 8, 3000, 64});
  op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv};
  AppendMode append("1");
  const long long before = cuda_fused::decode_mma_launch_count();
  auto first = op.run_cuda(DType::Float16);
  auto second = op.run_cuda(DType::Float16);
  CHECK(cuda_fused::decode_mma_launch_count() >= before + 2);
  REQUIRE(first[0].bytes.size() == second[0].bytes.size());
  CHECK(std::memcmp(first[0].bytes.data(), second[0].bytes.data(), first[0].bytes.size()) == 0);
}
