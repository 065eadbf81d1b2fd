// Decode-step GEMVs with the weight stored [N, K] that absorb the kernel
// before or after them (issue 11): a decode layer is ~12 launches of a few
// microseconds each, and two of them exist only to prepare or finish a GEMV.
//
//  - LayerNormLinear: the norm (LayerNorm or RMSNorm, with the residual skip
//    and its Sum output) computed by every block of the GEMV from the row it
//    already reads, instead of a norm kernel writing Z for the GEMM to read.
//    RMSNorm without beta (the Llama family) is streamed: the sum of squares
//    rides beside the dot products and scales them at the end (on by
//    default); the general prologue stages the normalised row first (opt-in).
//  - GatedMatMul: act(gate) * up in the GEMV's epilogue (a block owns 4 gate
//    columns and the 4 up columns they multiply), instead of storing P
//    [M, 2N] and running the gate pass.
//
// Both take the rows the small-M kernel takes by default (M <= 2; FUSEOPT_GEMV
// as in gemm_small_m.h), fp16/bf16, K and N multiples of 8, 16-byte aligned
// rows. The gate fusion and the streamed RMSNorm are on by default, the norm prologue
// opt-in (it measured slower: gemv_nk_fused.cu); FUSEOPT_GEMV_FUSED=0 / gate / rms / norm /
// all picks. Includable from .cc files (no nvcc needed).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_small_m.h"

namespace fuseopt::cuda_fused {

// Y [M, N] = act(norm(X (+ skip)) · W^T + bias), W stored [N, K]: `norm` is the norm the
// two-kernel path would launch (rows = M, D = K; its y is not used), Z = X + skip formed in
// fp32 and written to norm.sum (rounded) when set. The prologue rounds the normalised row to
// the storage type before the product, as that path's scratch Z is; the streamed RMSNorm never
// forms it (fp32 throughout: within the 16-bit tolerance, not bit-identical to that path).
struct NormGemvArgs {
  NormArgs norm;
  const void* w = nullptr;     // [N, K]
  const void* bias = nullptr;  // [N] or null
  void* y = nullptr;
  int64_t N = 0;
  GemvAct act = GemvAct::None;
  bool w_const = false;  // w may be read before the launch wait (launch_gemm_small_m's b_const)
};
// true: launched; false: nothing launched (shape, type, alignment or the switch), use the
// norm kernel + GEMM.
bool launch_norm_gemv_nk(const NormGemvArgs& a, cudaStream_t stream);

// fuseopt.GatedMatMul with W stored [2N, K] (rows [0, N) the gate, [N, 2N) the up
// projection; the runtime's weight layout): Y [M, N] = act(P[:, :N]) * P[:, N:], P = A · W^T
// + bias [2N]; P rounded to the storage type before the gate, as the pass reads it.
bool launch_gated_gemv_nk(DType dt, GateActivation act, const void* A, const void* W, const void* bias, void* Y,
                          int64_t M, int64_t N, int64_t K, cudaStream_t stream, bool b_const = false);

// Tests: a mask of 1 the norm prologue, 2 the gate fusion, 4 the streamed RMSNorm (0 none); -1
// back to FUSEOPT_GEMV_FUSED.
void set_gemv_nk_fused(int mask);

// Launches of either entry point so far in this process (tests: which path ran).
long long gemv_nk_fused_launch_count();

}  // namespace fuseopt::cuda_fused
