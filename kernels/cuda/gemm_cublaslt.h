// cuBLASLt GEMM for row-major tensors, with the bias/activation epilogues the
// fused ops need. Plain functions so tests and other kernels (LayerNormLinear)
// call them directly.
//
// Row-major C[M,N] = op(A)[M,K] · op(B)[K,N] is computed as the column-major
// product Cᵀ = op(B)ᵀ · op(A)ᵀ: a row-major matrix read column-major is its
// transpose, so no data moves and every cuBLASLt algorithm stays available.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

enum class GemmEpilogue { None, Bias, Relu, ReluBias, GeluTanh, GeluTanhBias };

struct GemmDesc {
  DType dtype = DType::Float;  // A and B in this type; C, D and bias too unless d_dtype says otherwise
  // D's (and C's and the bias') type when it is not `dtype`: Float for a 16-bit product handed
  // out as float (an odd vocabulary's logits, gemm_row_phases.h). Undefined: `dtype`.
  DType d_dtype = DType::Undefined;
  bool tf32 = false;           // fp32 only: CUBLAS_COMPUTE_32F_FAST_TF32
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false;  // A stored [K, M] instead of [M, K]
  bool trans_b = false;  // B stored [N, K] instead of [K, N]
  int64_t batch = 1;
  // Element strides between batch items; 0 broadcasts one matrix to all.
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  // D's leading dimension in elements (0: N, rows packed). Larger than N, it
  // lets a 16-bit D whose rows are not 16-byte multiples (N = 30522) use the
  // Hopper kernels (see padded_output_ld in gemm_kernels.cc).
  int64_t ldd = 0;
  // A's leading dimension in elements (0: packed, K or M with trans_a). Larger, it reads every
  // P-th row of A (the row phases of gemm_row_phases.h).
  int64_t lda = 0;
  float alpha = 1.f;
  // beta != 0 adds beta · C: C is `c` where set (a tensor of D's layout: FusedMatMul's residual,
  // read in the epilogue instead of a separate add kernel), else D's previous contents.
  float beta = 0.f;
  const void* c = nullptr;
  GemmEpilogue epilogue = GemmEpilogue::None;
  const void* bias = nullptr;  // [N], required by the *Bias epilogues
  // Time the heuristic's candidates on the first call whatever the tuning default (not when
  // FUSEOPT_GEMM_AUTOTUNE=0): the row-phase GEMMs, whose float-output heuristic choice was a
  // generic kernel 4x slower than the Hopper one it chose for a neighbouring N (NOTES-perf v32).
  bool tune = false;
};

// Returns device memory of at least `bytes` for cuBLASLt's workspace.
using ScratchFn = std::function<void*(size_t bytes)>;

// Enqueues D = epilogue(alpha · op(A)·op(B) + beta · C [+ bias]) on `stream` (C: d.c or D).
// The algorithm is chosen once per (shape, dtype, epilogue, layout, alignment)
// and cached: with autotuning on for it (see set_gemm_autotune), the first call of a
// configuration times cuBLASLt's top heuristic candidates on the call's own
// inputs (CUDA events, synchronising the stream once) and keeps the fastest;
// with beta != 0 the candidates write a scratch copy of D (from `scratch`), so
// C (or D's previous contents) is read as the call reads it and accumulated
// into D exactly once; when the stream is being captured into a CUDA graph,
// it takes the heuristic's first choice instead.
// Throws Error on failure.
void gemm(const GemmDesc& d, const void* A, const void* B, void* D, cudaStream_t stream,
          const ScratchFn& scratch);

// Number of distinct GEMM configurations whose algorithm is cached (tests).
size_t gemm_algo_cache_size();

// Autotuning for configurations not cached yet (benchmarks compare the two in
// one process; the flag is part of the cache key). Default: only few-tile
// configurations (fewer 128x128 output tiles than SMs), with split-K variants
// among the candidates; FUSEOPT_GEMM_AUTOTUNE=1 tunes every configuration, =0
// none. set_gemm_autotune(true/false) switches between "every" and "none".
// Tuned winners persist on disk across processes (gemm_tune_cache.h).
void set_gemm_autotune(bool on);
bool gemm_autotune();

// What the cache holds for the most recently chosen configuration (tests and
// benchmarks): how many candidates were timed (0 = heuristic's first choice,
// -1 = read from the persisted cache) and the index of the winner in the
// candidate order (the heuristic's, then split-K variants).
struct GemmTuneInfo {
  int candidates_timed = 0;
  int winner_index = 0;
  size_t workspace = 0;
};
GemmTuneInfo gemm_last_tune_info();

}  // namespace fuseopt::cuda_fused
