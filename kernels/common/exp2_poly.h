// 2^x on the FMA pipe: a polynomial instead of the MUFU's ex2, for kernels whose exponentials
// outrun the special-function unit.
//
// Why: an H100/H200 SM does 16 MUFU results a clock against 4096 fp16 tensor-core FLOPs, so
// flash attention at head dim 64 (256 MMA FLOPs per score, one exponential per score) needs as
// many MUFU cycles as tensor-core cycles: the exponentials cap it at half the tensor peak.
// Evaluating some of them here moves that work to the FMA pipe (128 lanes a clock), which the
// softmax leaves mostly idle (FlashAttention-4's software exponential; NOTES-perf.md v35).
//
//   x = max(x, −126)                 (NaN stays NaN; below 2^−126 the result is ~1e-38)
//   t = x + 1.5·2^23                 (round to nearest: j = round(x) sits in t's low bits)
//   f = x − (t − 1.5·2^23)           (f ∈ [−0.5, 0.5])
//   2^x = p(f) · 2^j,                p of degree 3, fitted to 2^f for relative error;
//                                    2^j built from t's bits by one shift-add
//
// Accuracy (tests/kernels/cpu_exp2_poly_test.cc, against double exp2): relative error ≤ 7.6e-5
// for x in [−126, 1]. Only for values that are then rounded to fp16 / bf16 (half-ulp 2.4e-4 /
// 2e-3): the attention's probabilities, which P·V takes in 16 bits. ~9 instructions a value
// (one ALU clamp and shift-add, the rest FMA pipe) against one MUFU op of 8 pipe cycles a warp.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifndef FUSEOPT_HD
#ifdef __CUDACC__
#define FUSEOPT_HD __host__ __device__ __forceinline__
#else
#define FUSEOPT_HD inline
#endif
#endif

namespace fuseopt::dm {

// 2^f ≈ c0 + c1·f + c2·f² + c3·f³ on [−0.5, 0.5] (relative-error fit, max 7.5e-5).
FUSEOPT_HD float exp2_poly3_fraction(float f) {
  float p = fmaf(0.055171459913253784f, f, 0.2426108568906784f);
  p = fmaf(p, f, 0.6932609677314758f);
  return fmaf(p, f, 0.9999281167984009f);
}

FUSEOPT_HD float exp2_poly3(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(x) : "f"(x), "f"(-126.f));
#else
  x = x != x ? x : fmaxf(x, -126.f);
#endif
  const float t = __fadd_rn(x, kRound);  // _rn: never contracted or reassociated
  const float f = __fsub_rn(x, __fsub_rn(t, kRound));
  const uint32_t scale = (__float_as_uint(t) << 23) + 0x3F800000u;  // 2^j: (127 + j) << 23
  return exp2_poly3_fraction(f) * __uint_as_float(scale);
#else
  x = std::isnan(x) ? x : std::fmax(x, -126.f);
  const float t = x + kRound;
  const float f = x - (t - kRound);
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  const uint32_t sb = (tb << 23) + 0x3F800000u;
  float scale;
  std::memcpy(&scale, &sb, 4);
  return exp2_poly3_fraction(f) * scale;
#endif
}

}  // namespace fuseopt::dm
