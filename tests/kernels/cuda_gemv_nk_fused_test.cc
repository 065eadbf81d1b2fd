// The decode-row GEMVs that absorb a neighbour (kernels/cuda/gemv_nk_fused.cu), through
// the op kernels as the runtime calls them with weights stored [N, K]: LayerNormLinear
// (norm in the GEMV's prologue: LayerNorm and RMSNorm, beta, bias, skip with its Sum
// output, every activation; RMSNorm without beta streamed through the GEMV, the default: the
// sum of squares beside the dot products) and GatedMatMul (gate in the epilogue, every gate activation,
// with and without bias), against the CPU kernels on the model's [K, N] weights. Fresh
// random inputs, outputs NaN-poisoned by the harness, K off the 2048-element block
// stride (200, 2056) and N off the 4-column block; launch counts say which path ran; the
// switch off (FUSEOPT_GEMV=0) and shapes it refuses take the old path with the same
// results; bit-identical over runs and with W read as a constant before the launch wait.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemv_nk_fused.h"
#include "runtime/kernel.h"
#include "support/cuda_kernel_check.h"
#include "support/decode_gemv_cases.h"

using namespace fuseopt;

namespace {

using cuda_check::OpCase;
using decode_gemv::check_gated;
using decode_gemv::check_layer_norm_linear;
using decode_gemv::LnlCase;

// The fused GEMV's launch counter (which path ran).
long long fused_launches() { return cuda_fused::gemv_nk_fused_launch_count(); }

}  // namespace

TEST_CASE("cuda LayerNormLinear at decode rows: the norm inside the [N, K] GEMV", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(-1);  // the default: M <= 2 with W [N, K]
  cuda_fused::set_gemv_nk_fused(3);   // the norm fusion is opt-in (FUSEOPT_GEMV_FUSED=norm)
  const std::vector<LnlCase> cases = {
      {1, 2048, 3072, true, false, false, true, "none"},  // Llama's QKV: RMSNorm, residual skip + Sum
      {2, 2056, 136, true, false, false, false, "none"},  // K past one 2048-element stride
      {1, 200, 40, false, true, true, false, "gelu"},      // LayerNorm with beta and bias
      {2, 768, 2304, false, true, true, true, "gelu_tanh"},
      {1, 64, 8, false, false, true, true, "relu"},
      {2, 96, 24, true, true, false, false, "tanh"},       // RMSNorm with beta (added, as the CPU kernel does)
      {2, 200, 40, false, true, true, true, "relu2"},      // squared ReLU (Nemotron, Persimmon's up projection)
  };
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const LnlCase& p : cases) check_layer_norm_linear(p, dt, fused_launches, 1);
  cuda_fused::set_gemv_nk_fused(-1);
}

TEST_CASE("cuda LayerNormLinear at decode rows: RMSNorm streamed through the [N, K] GEMV",
          "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(-1);
  cuda_fused::set_gemv_nk_fused(-1);  // the default takes it
  const std::vector<LnlCase> rms = {
      {1, 2048, 3072, true, false, false, true, "none"},  // Llama's QKV after the residual add (Sum out)
      {1, 2048, 3072, true, false, false, false, "none"},  // the first layer's: no skip
      {2, 2056, 136, true, false, true, true, "gelu"},     // K past one 256-chunk stride, 2 rows, bias
      {2, 64, 8, true, false, true, false, "relu"},        // fewer chunks than threads
      {1, 8, 1000, true, false, false, true, "tanh"},      // one chunk
      {2, 200, 40, true, false, true, false, "relu2"},     // squared ReLU
  };
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const LnlCase& p : rms) check_layer_norm_linear(p, dt, fused_launches, 1);
  // Not streamed: LayerNorm, and RMSNorm with beta (the prologue is opt-in: the old path).
  check_layer_norm_linear({1, 256, 64, false, true, true, true, "none"}, DType::Float16, fused_launches, 0);
  check_layer_norm_linear({1, 256, 64, true, true, false, true, "none"}, DType::Float16, fused_launches, 0);
  // Only the prologue asked for: it takes RMSNorm instead.
  cuda_fused::set_gemv_nk_fused(1);
  check_layer_norm_linear(rms[0], DType::Float16, fused_launches, 1);
  cuda_fused::set_gemv_nk_fused(-1);
}

TEST_CASE("cuda LayerNormLinear at decode rows: the old path where the fused GEMV does not apply",
          "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  const LnlCase base{1, 256, 64, true, false, true, true, "none"};
  // The fusions off (the gate only), the GEMV off: norm kernel + GEMM, the same results.
  cuda_fused::set_gemv_nk_fused(2);
  check_layer_norm_linear(base, DType::Float16, fused_launches, 0);
  cuda_fused::set_gemv_nk_fused(3);
  cuda_fused::set_gemm_small_m(0);
  check_layer_norm_linear(base, DType::Float16, fused_launches, 0);
  cuda_fused::set_gemm_small_m(-1);
  // 3 rows (above the default's 2), K not a multiple of 8, rows past the staging's 48 KB (not
  // RMSNorm there: the streamed form has no row limit), fp32.
  check_layer_norm_linear({3, 256, 64, true, false, true, true, "none"}, DType::Float16, fused_launches, 0);
  check_layer_norm_linear({1, 260, 64, false, true, false, false, "none"}, DType::Float16, fused_launches, 0);
  check_layer_norm_linear({2, 6400, 16, false, false, false, true, "none"}, DType::BFloat16, fused_launches, 0);
  check_layer_norm_linear(base, DType::Float, fused_launches, 0);
  cuda_fused::set_gemv_nk_fused(-1);
}

TEST_CASE("cuda GatedMatMul at decode rows: the gate in the [2N, K] GEMV's epilogue", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(-1);
  cuda_fused::set_gemv_nk_fused(-1);  // the default takes the gate fusion
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    check_gated(1, 2048, 8192, false, "silu", dt, fused_launches, 1);  // Llama-1B's gate + up
    for (const char* act : {"silu", "gelu", "gelu_tanh", "relu"})
      check_gated(2, 200, 136, true, act, dt, fused_launches, 1);
    check_gated(1, 2056, 40, true, "silu", dt, fused_launches, 1);
  }
  cuda_fused::set_gemm_small_m(0);  // off: GEMM into P + the gate pass
  check_gated(1, 256, 64, true, "silu", DType::Float16, fused_launches, 0);
  cuda_fused::set_gemm_small_m(-1);
  check_gated(4, 256, 64, true, "silu", DType::Float16, fused_launches, 0);  // rows above the default's 2
  check_gated(1, 256, 36, true, "silu", DType::Float16, fused_launches, 0);  // N not a multiple of 8
}

TEST_CASE("cuda fused decode GEMVs are bit-identical over runs", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(-1);
  cuda_fused::set_gemv_nk_fused(3);
  Tensor x = cuda_check::random_tensor({2, 1, 1024}), gamma = cuda_check::random_tensor({1024}, 0.5f, 1.5f);
  Tensor wt = cuda_check::random_tensor({512, 1024}, -0.2f, 0.2f), skip = cuda_check::random_tensor({2, 1, 1024});
  OpCase c("fuseopt", "LayerNormLinear", 6, 2);
  c.attr(Attribute::make_int("rms", 1));
  c.attr(Attribute::make_int("transB", 1));
  c.inputs = {&x, &gamma, nullptr, &wt, nullptr, &skip};
  auto first = decode_gemv::run_counted(c, DType::Float16, fused_launches, 1);
  for (int rep = 0; rep < 3; ++rep) {
    auto again = decode_gemv::run_counted(c, DType::Float16, fused_launches, 1);
    for (size_t o = 0; o < first.size(); ++o) {
      REQUIRE(again[o].dims == first[o].dims);
      CHECK(std::memcmp(again[o].data<float>(), first[o].data<float>(), first[o].numel() * sizeof(float)) == 0);
    }
  }
  cuda_fused::set_gemv_nk_fused(-1);
}
