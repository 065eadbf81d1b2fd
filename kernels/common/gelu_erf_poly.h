// erf-GELU for values that are stored as fp16 / bf16, in few instructions.
//
//   gelu(x) = x · Φ(x) = max(x, 0) − |x| · Φ(−|x|)
//
// (for x ≥ 0: x − x·Φ(−x) = x·Φ(x); for x < 0: −|x|·Φ(x) = x·Φ(x)), and Φ(−a) = 2^P(a), P a
// degree-7 polynomial fitted at Chebyshev nodes to log2 Φ(−a) on [0, 5.5] (`a` clamped there).
// One ex2 and eight FMA-pipe instructions a value, where Abramowitz & Stegun 7.1.26 (the form
// before this one, in git history) took a reciprocal, an exponential and ~16 others:
// the erf-GELU epilogue of the Hopper GEMM (BERT's FFN1) ran its tiles' arithmetic unoverlapped
// with the MMAs (NOTES-perf.md v34).
//
// Accuracy (tests/kernels/cpu_gelu_erf_poly_test.cc, against double erf): relative error
// ≤ 4.3e-6 wherever |gelu| > 1e-3 and absolute error ≤ 7e-7 everywhere (A&S: 1.7e-4 relative in
// the negative tail, where x·Φ(x) is small and erf's absolute error is not). Past the clamp,
// |x| > 5.5, the result is max(x, 0) − 5.5·Φ(−5.5) ≈ max(x, 0) − 1.1e-7. NaN stays NaN, +inf
// gives +inf, −inf gives −1.1e-7 (the limit is 0; the ONNX body's −inf · 0 is NaN). fp16's
// half-ulp is 2.4e-4 relative: only for 16-bit storage; fp32 outputs keep erff.
#pragma once

#include <cmath>

#ifndef FUSEOPT_HD
#ifdef __CUDACC__
#define FUSEOPT_HD __host__ __device__ __forceinline__
#else
#define FUSEOPT_HD inline
#endif
#endif

namespace fuseopt::dm {

// |x| is clamped here: Φ(−5.5) = 1.9e-8, so the tail past it costs at most 1.1e-7 absolute.
inline constexpr float kGeluPolyLimit = 5.5f;

// log2 Φ(−a) ≈ c0 + c1·a + ... + c7·a⁷ on [0, 5.5] (max error 6e-6 in the exponent).
FUSEOPT_HD float gelu_log2_phi_neg(float a) {
  float p = -1.9212345705454936e-06f;
  p = fmaf(p, a, 6.328849849523976e-05f);
  p = fmaf(p, a, -0.00094342086231336f);
  p = fmaf(p, a, 0.008556271903216839f);
  p = fmaf(p, a, -0.05405228212475777f);
  p = fmaf(p, a, -0.4583817720413208f);
  p = fmaf(p, a, -1.1512783765792847f);
  return fmaf(p, a, -0.9999938607215881f);
}

// gelu(x) as above. On the device: min.NaN (a NaN x stays NaN through a) and ex2.approx.ftz
// (2^P ≥ 2^-28 here: no denormals to flush); on the host: the same formula with exp2f, for tests.
FUSEOPT_HD float gelu_erf_poly(float x) {
#if defined(__CUDA_ARCH__)
  float a;
#if __CUDA_ARCH__ >= 800
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(a) : "f"(fabsf(x)), "f"(kGeluPolyLimit));
#else
  a = x != x ? x : fminf(fabsf(x), kGeluPolyLimit);
#endif
  float h;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(h) : "f"(gelu_log2_phi_neg(a)));
  return fmaxf(x, 0.f) - a * h;
#else
  const float a = std::isnan(x) ? x : std::fmin(std::fabs(x), kGeluPolyLimit);
  const float h = std::exp2(gelu_log2_phi_neg(a));
  return std::fmax(x, 0.f) - a * h;
#endif
}

}  // namespace fuseopt::dm
