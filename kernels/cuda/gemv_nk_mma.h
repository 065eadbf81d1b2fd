// The [N, K] weight-streaming GEMV on tensor cores, for 3 to 8 rows (a decode step at
// batch 3-8): the CUDA-core kernels of gemm_small_m.cu / gemv_nk_fused.cu do M · 8 FMAs
// per 16-byte weight load, which at M = 8 makes them instruction-bound and slower than
// cuBLASLt (session 8: Llama-1B's QKV 10.3 µs against 7.5). Here the weights are the A
// operand of mma.sync m16n8k16 (16 weight rows) and the up-to-8 rows of X its B operand
// (n = 8), so the arithmetic is two MMAs per 16-byte load and the kernel streams weights.
// Three forms, as the CUDA-core kernels they stand in for: a plain GEMV (bias, alpha, an
// activation), GatedMatMul's gate in the epilogue (W [2N, K]), and LayerNormLinear's
// RMSNorm streamed through the product (no beta; optional residual skip and its Sum).
// Called by those kernels' entry points, which check the switch, type, sizes and
// alignment first (gemm_small_m.h). Measured on the H200 at M = 8 (bench_kernels
// "[gemm_small_m]"): 1.3-2.2x faster than the CUDA-core kernels; once persistent, faster than
// cuBLASLt on weights up to QKV's size and tied or slower above, so the default route takes rows
// 3-8 for weights of at most 8 Mi elements, not the gated form (gemm_small_m.cu). Includable
// from .cc files (no nvcc needed).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_small_m.h"

namespace fuseopt::cuda_fused {

enum class GemvMmaForm { Plain, Gated, Rms };

struct GemvMmaArgs {
  const void* x = nullptr;     // [M, K]
  const void* w = nullptr;     // [N, K] (Gated: [2N, K], the gate rows first)
  const void* bias = nullptr;  // [N] (Gated: [2N]) or null
  void* y = nullptr;           // [M, N]
  int M = 0, N = 0, K = 0;     // N: output columns
  GemvAct act = GemvAct::None;  // Plain and Rms
  float alpha = 1.f;            // Plain
  const void* residual = nullptr;  // Plain: [M, N] added after the activation, or null
  GateActivation gate = GateActivation::Silu;  // Gated
  // Rms: y = act(rstd · (x (+ skip)) ∘ gamma · Wᵀ + bias), rstd = 1 / sqrt(mean((x + skip)²) + eps).
  const void* skip = nullptr;  // [skip_rows, K], row m % skip_rows added to row m
  int skip_rows = 1;
  const void* gamma = nullptr;  // [K]
  void* sum = nullptr;          // [M, K]: x + skip, rounded (block 0 writes it), or null
  float eps = 0.f;
  bool w_const = false;  // W may be read before the programmatic-launch wait
};

// Rows this kernel takes: 3..8 (1-2 stay on the CUDA-core GEMVs, which read X once per
// weight row and measured at bandwidth there).
constexpr int64_t kGemvMmaMinM = 3;

// FUSEOPT_GEMV_MMA: "0" off (rows 3-8 then go to cuBLASLt by default, to the CUDA-core kernels
// under FUSEOPT_GEMV=1); unset or "1" runs them here where the small-M switch takes them
// (gemm_small_m.h: by default weights of at most 8 Mi elements, not the gated form; session 18,
// NOTES-perf.md v23). set_gemv_mma(0 / 1) forces, (-1) back to the environment (tests, benchmarks).
bool gemv_mma_enabled();
void set_gemv_mma(int mode);
// Tests: at most `blocks` blocks a launch (0: the default, two an SM), so every block walks
// several tiles (the persistent loop) at any N.
void set_gemv_mma_max_blocks(int blocks);

// dt Float16 or BFloat16; M in [kGemvMmaMinM, kGemvMaxM]; K and N multiples of 8; every
// pointer 16-byte aligned (the caller checks). false: nothing launched.
bool launch_gemv_nk_mma(DType dt, GemvMmaForm form, const GemvMmaArgs& a, cudaStream_t stream);

// Launches so far in this process (tests: which path ran).
long long gemv_nk_mma_launch_count();

}  // namespace fuseopt::cuda_fused
