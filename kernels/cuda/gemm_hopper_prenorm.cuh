// The RMSNorm before a Hopper GEMM, done by the GEMM (gemm_hopper.cu, NORM = true): Y = act(Z · B
// + bias) with Z = rms(A) ⊙ A ⊙ gamma, where rms(a) = 1 / sqrt(mean(a²) + eps) over A's K.
//
// Z · B = diag(r) · (A · (diag(gamma) · B)): the session stores the weight with gamma folded into
// its K rows (session_setup.cc, fold_rms_norms: one rounding of w · gamma, where the norm kernel
// rounds a · r · gamma), the MMAs read A as it is, the consumer warpgroups sum the squares of
// A's rows from each stage while that stage's MMAs run, and each accumulator row is scaled by r
// in the epilogue, before the bias and the activation. The normalised [M, K] tensor is never
// written, and the norm's launch is gone (NOTES-perf.md v50). A first form multiplied each A
// stage by gamma in shared memory before the MMAs, with the gamma loads, a proxy fence and a
// barrier between a stage's arrival and its MMAs: Llama-1B-shaped end to end 1.12-1.15x slower
// than the norm as its own kernel (session 44, H100). sm_90a only where it is PTX.
#pragma once
#include <cstdint>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_hopper_device.cuh"

namespace fuseopt::cuda_fused {
namespace {

#if defined(FUSEOPT_HOPPER_DEVICE)
// One k-stage of the warpgroup's 64 A rows (`rows`: their shared-memory start; 128 bytes a row,
// its eight 16-byte chunks permuted by the 128-byte swizzle, so a row's line is the row whatever
// the permutation). Thread t of the warpgroup takes row t / 2, four chunks (half t % 2 of the
// row), rotated by the row so that the eight threads of a quarter-warp read eight different
// chunks (no bank conflicts). `ss` gathers the row's sum of squares; past K and M the stage is
// zero-filled. Reads only: it runs after the stage's MMAs are issued, beside them.
template <class T>
__device__ __forceinline__ void prenorm_sum_stage(uint32_t rows, int t, float& ss) {
  const int r = t >> 1;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = ((t & 1) * 4 + i + r) & 7;
    uint32_t x0, x1, x2, x3;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                 : "r"(rows + uint32_t(r) * 128u + uint32_t(c) * 16u));
    for (uint32_t u : {x0, x1, x2, x3}) {
      const float2 a = pair_to_float2<T>(u);
      ss = fmaf(a.x, a.x, ss);
      ss = fmaf(a.y, a.y, ss);
    }
  }
}

// After the tile's main loop: each row's 1 / rms from its two threads' sums (lanes 2j, 2j + 1 of
// the warp hold row 16·warp + j of the warpgroup's 64), applied to the accumulators, whose rows
// are g and g + 8 of the warp's 16 (acc[i]: row g + 8 · ((i >> 1) & 1)). `ss` restarts at 0.
template <int NV>
__device__ __forceinline__ void prenorm_scale_rows(float (&acc)[NV], float& ss, int g, const GemmParams& p) {
  const float total = ss + __shfl_xor_sync(0xffffffffu, ss, 1);
  const float r = rsqrtf(total / float(p.K) + p.norm_eps);
  const float r0 = __shfl_sync(0xffffffffu, r, 2 * g), r1 = __shfl_sync(0xffffffffu, r, 2 * g + 16);
#pragma unroll
  for (int i = 0; i < NV; ++i) acc[i] *= (i & 2) ? r1 : r0;
  ss = 0.f;
}
#endif  // FUSEOPT_HOPPER_DEVICE

}  // namespace
}  // namespace fuseopt::cuda_fused
