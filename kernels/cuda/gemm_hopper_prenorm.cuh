// The RMSNorm before a Hopper GEMM, done by the GEMM (gemm_hopper.cu, NORM = true): Y = act(Z · B
// + bias) with Z = rms(A) ⊙ A ⊙ gamma, where rms(a) = 1 / sqrt(mean(a²) + eps) over A's K.
//
// Z = diag(r) (A ⊙ gamma), so Z · B = diag(r) ((A ⊙ gamma) · B): the consumer warpgroups multiply
// each A stage by gamma in shared memory before their MMAs read it (one rounding of a · gamma,
// against the norm kernel's rounding of a · r · gamma), sum the squares of A's row on the way,
// and scale each accumulator row by r in the epilogue, before the bias and the activation. The
// normalised [M, K] tensor is never written, and the norm's launch is gone (NOTES-perf.md v50).
// sm_90a only where it is PTX.
#pragma once
#include <cstdint>

#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_hopper_device.cuh"

namespace fuseopt::cuda_fused {
namespace {

#if defined(FUSEOPT_HOPPER_DEVICE)
// One k-stage of the warpgroup's 64 A rows (`rows`: their shared-memory start, 1024-aligned;
// 128 bytes a row, its eight 16-byte chunks permuted by the 128-byte swizzle: physical chunk c of
// row r holds K columns 8 (c ^ (r & 7)) ..). Thread t of the warpgroup takes row t / 2, four
// chunks (half t % 2 of the row), rotated by the row so that the eight threads of a quarter-warp
// read eight different chunks (no bank conflicts). `ss` gathers the row's sum of squares of A.
template <class T>
__device__ __forceinline__ void prenorm_stage(uint32_t rows, int t, int kt, const GemmParams& p, float& ss) {
  const int r = t >> 1;
  const T* gamma = static_cast<const T*>(p.norm_gamma);
  uint4 x[4], gm[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = ((t & 1) * 4 + i + r) & 7;
    const int k0 = kt * kBK + 8 * (c ^ (r & 7));
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[i].x), "=r"(x[i].y), "=r"(x[i].z), "=r"(x[i].w)
                 : "r"(rows + uint32_t(r) * 128u + uint32_t(c) * 16u));
    // Past K the stage is zero-filled; gamma has K values (K a multiple of 8: whole chunks).
    gm[i] = k0 < p.K ? __ldg(reinterpret_cast<const uint4*>(gamma + k0)) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int c = ((t & 1) * 4 + i + r) & 7;
    uint32_t xs[4] = {x[i].x, x[i].y, x[i].z, x[i].w}, gs[4] = {gm[i].x, gm[i].y, gm[i].z, gm[i].w}, zs[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 a = pair_to_float2<T>(xs[j]), g = pair_to_float2<T>(gs[j]);
      ss = fmaf(a.x, a.x, ss);
      ss = fmaf(a.y, a.y, ss);
      zs[j] = pack2<T>(a.x * g.x, a.y * g.y);
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(rows + uint32_t(r) * 128u + uint32_t(c) * 16u),
                 "r"(zs[0]), "r"(zs[1]), "r"(zs[2]), "r"(zs[3])
                 : "memory");
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
