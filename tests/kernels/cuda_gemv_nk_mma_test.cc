// The tensor-core [N, K] GEMV for 3-8 rows (kernels/cuda/gemv_nk_mma.cu), through the op
// kernels as the runtime calls them with weights stored [N, K]: FusedMatMul (every
// activation, alpha, with and without bias), LayerNormLinear with RMSNorm streamed through
// the product (skip and its Sum output, bias, activation) and GatedMatMul (every gate), against
// the CPU kernels on fresh random inputs with the outputs NaN-poisoned by the harness, with the
// small-M kernels switched on for every row count (FUSEOPT_GEMV=1), and the default routing
// (rows 3-8 here for weights up to 8 Mi elements, never the gated form). Rows 3,
// 5 and 8 (the B operand's 8 columns, partly empty); K off the 32-wide chunk and the 8 warps'
// split (8, 200, 1000, 2056) and long (8192); N off the 16-row tile (24, 40, 136, 1000). The
// launch counter proves the tensor-core kernel ran (and did not with FUSEOPT_GEMV_MMA off, where
// the CUDA-core kernels give results within the same tolerance, nor where the default routing
// leaves the rows to cuBLASLt); bit-identical over reruns and
// with W read as a constant before the launch wait. Each case runs twice: with the default
// grid and with 5 blocks, so every block walks several tiles (the persistent loop, its
// tile-to-tile reduction buffers and the next tile's early loads) at any N.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemv_nk_fused.h"
#include "kernels/cuda/gemv_nk_mma.h"
#include "support/cuda_kernel_check.h"
#include "support/decode_gemv_cases.h"

using namespace fuseopt;

namespace {

using cuda_check::OpCase;

long long mma_launches() { return cuda_fused::gemv_nk_mma_launch_count(); }

// FusedMatMul with W [N, K] (transB 1) on CUDA against the CPU with the same attributes.
void check_fused_matmul(int64_t rows, int64_t K, int64_t N, const char* act, float alpha, bool with_bias, DType dt,
                        int launches) {
  Tensor a = cuda_check::random_tensor({rows, 1, K}, -2.f, 2.f);
  Tensor w = cuda_check::random_tensor({N, K}, -0.2f, 0.2f);
  Tensor bias = cuda_check::random_tensor({N});
  OpCase c("fuseopt", "FusedMatMul", 3, 1);
  c.attr(Attribute::make_string("activation", act));
  c.attr(Attribute::make_int("transB", 1));
  c.attr(Attribute::make_float("alpha", alpha));
  c.inputs = {&a, &w, with_bias ? &bias : nullptr};
  auto got = decode_gemv::run_counted(c, dt, mma_launches, launches);
  auto want = c.run_cpu(dt);
  c.constant_inputs = {1};  // W as the runtime's constant: the same bits
  auto early = decode_gemv::run_counted(c, dt, mma_launches, launches);
  auto again = decode_gemv::run_counted(c, dt, mma_launches, launches);
  INFO("FusedMatMul rows " << rows << " K " << K << " N " << N << " " << act << " alpha " << alpha << " bias "
                           << with_bias << " " << cuda_check::short_name(dt));
  CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
  CHECK(decode_gemv::same_bits(early, got));
  CHECK(decode_gemv::same_bits(again, got));
}

}  // namespace

TEST_CASE("cuda tensor-core GEMV: FusedMatMul at 3-8 rows", "[cuda][gemm_small_m][gemv_mma]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(1);  // rows 3-8 (the default leaves them to cuBLASLt)
  cuda_fused::set_gemv_mma(-1);
  struct Shape { int64_t K, N; };
  // Llama-1B's QKV and down-proj; one chunk (K 8); K past the chunk and the warps' split; N off the tile.
  const Shape shapes[] = {{2048, 3072}, {8192, 2048}, {8, 24}, {200, 136}, {1000, 1000}, {2056, 40}};
  for (int blocks : {0, 5}) {
    cuda_fused::set_gemv_mma_max_blocks(blocks);
    INFO("at most " << blocks << " blocks (0: two an SM)");
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (int64_t rows : {3, 5, 8})
        for (const Shape& s : shapes) check_fused_matmul(rows, s.K, s.N, "none", 1.f, true, dt, 1);
    for (const char* act : {"relu", "gelu", "gelu_tanh", "tanh"})
      check_fused_matmul(8, 200, 136, act, 0.5f, true, DType::Float16, 1);
    check_fused_matmul(4, 256, 64, "none", 1.f, false, DType::BFloat16, 1);
  }
  cuda_fused::set_gemv_mma_max_blocks(0);
  // Off: the CUDA-core kernel takes the rows.
  cuda_fused::set_gemv_mma(0);
  check_fused_matmul(8, 1000, 1000, "gelu", 1.f, true, DType::Float16, 0);
  cuda_fused::set_gemv_mma(-1);
  // The default routing (FUSEOPT_GEMV unset): rows 3-8 here up to 8 Mi weight elements
  // (o-proj / QKV-sized), cuBLASLt above (one column past it), and cuBLASLt with this kernel off.
  cuda_fused::set_gemm_small_m(-1);
  check_fused_matmul(5, 200, 136, "none", 1.f, true, DType::Float16, 1);
  check_fused_matmul(8, 2048, 4096, "none", 1.f, true, DType::BFloat16, 1);  // exactly 8 Mi
  check_fused_matmul(8, 2048, 4104, "none", 1.f, true, DType::Float16, 0);
  cuda_fused::set_gemv_mma(0);
  check_fused_matmul(5, 200, 136, "none", 1.f, true, DType::Float16, 0);
  cuda_fused::set_gemv_mma(-1);
}

TEST_CASE("cuda tensor-core GEMV: LayerNormLinear with RMSNorm streamed, at 3-8 rows",
          "[cuda][gemm_small_m][gemv_mma]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(1);
  cuda_fused::set_gemv_nk_fused(-1);
  cuda_fused::set_gemv_mma(-1);
  using decode_gemv::LnlCase;
  const std::vector<LnlCase> cases = {
      {8, 2048, 3072, true, false, false, true, "none"},  // Llama's QKV after the residual add (Sum out)
      {3, 2048, 3072, true, false, false, false, "none"},  // the first layer's: no skip
      {5, 2056, 136, true, false, true, true, "gelu"},     // K past the chunk, bias, activation
      {8, 8, 1000, true, false, false, true, "tanh"},      // one chunk
      {4, 200, 24, true, false, true, false, "relu"},
  };
  for (int blocks : {0, 5}) {
    cuda_fused::set_gemv_mma_max_blocks(blocks);
    INFO("at most " << blocks << " blocks (0: two an SM)");
    for (DType dt : {DType::Float16, DType::BFloat16})
      for (const LnlCase& p : cases) decode_gemv::check_layer_norm_linear(p, dt, mma_launches, 1);
  }
  cuda_fused::set_gemv_mma_max_blocks(0);
  // LayerNorm (not RMSNorm) is not this kernel's: the norm kernel, then the GEMM through it.
  decode_gemv::check_layer_norm_linear({8, 256, 64, false, true, true, true, "none"}, DType::Float16, mma_launches, 1);
  cuda_fused::set_gemv_mma(0);
  decode_gemv::check_layer_norm_linear(cases[0], DType::Float16, mma_launches, 0);
  cuda_fused::set_gemv_mma(-1);
  // The default routing takes the streamed RMSNorm at rows 3-8 too (Llama's QKV), and LayerNorm
  // through the norm kernel and then this kernel's plain form.
  cuda_fused::set_gemm_small_m(-1);
  decode_gemv::check_layer_norm_linear(cases[0], DType::Float16, mma_launches, 1);
  decode_gemv::check_layer_norm_linear({8, 256, 64, false, true, true, true, "none"}, DType::Float16, mma_launches, 1);
}

TEST_CASE("cuda tensor-core GEMV: GatedMatMul at 3-8 rows", "[cuda][gemm_small_m][gemv_mma]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(1);
  cuda_fused::set_gemv_nk_fused(-1);
  cuda_fused::set_gemv_mma(-1);
  for (int blocks : {0, 5}) {
    cuda_fused::set_gemv_mma_max_blocks(blocks);
    INFO("at most " << blocks << " blocks (0: two an SM)");
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      decode_gemv::check_gated(8, 2048, 8192, false, "silu", dt, mma_launches, 1);  // Llama-1B's gate + up
      for (const char* act : {"silu", "gelu", "gelu_tanh", "relu"})
        decode_gemv::check_gated(5, 200, 136, true, act, dt, mma_launches, 1);
      decode_gemv::check_gated(3, 2056, 40, true, "silu", dt, mma_launches, 1);
    }
  }
  cuda_fused::set_gemv_mma_max_blocks(0);
  cuda_fused::set_gemv_mma(0);
  decode_gemv::check_gated(8, 256, 64, true, "silu", DType::Float16, mma_launches, 0);
  cuda_fused::set_gemv_mma(-1);
  // The default routing never takes the gated form: a small [2N, K] weight goes through this
  // kernel's plain form into P and then the gate pass; Llama-1B's gate + up (32 Mi elements) to
  // cuBLASLt + the gate pass (faster there).
  cuda_fused::set_gemm_small_m(-1);
  decode_gemv::check_gated(8, 256, 64, true, "silu", DType::Float16, mma_launches, 1);
  decode_gemv::check_gated(8, 2048, 8192, false, "silu", DType::Float16, mma_launches, 0);
}
