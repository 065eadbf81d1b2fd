// Y = gelu_erf(A·B + bias) in one kernel for small-M fp16/bf16 GEMMs (BERT's
// FFN1 at batch 1: 128 x 768 x 3072). cuBLASLt has only the tanh GELU
// epilogue, so the exact (erf) GELU otherwise runs as a second kernel over Y
// after the GEMM's bias epilogue (NOTES-perf.md v8 says why this one).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

// Row-major A [M, K], B [K, N] (not transposed), bias [N] (may be null),
// Y [M, N], all of dtype dt. Launches and returns true when the kernel
// applies: the switch is on (gemm_gelu_enabled), dt is Float16 or BFloat16,
// 0 < M <= kGemmGeluMaxM, K and N multiples of 8 (K up to
// kSmallGemmMaxSplitK, in one kernel whatever K), every pointer 16-byte
// aligned. Otherwise launches nothing and returns false (the caller runs
// cuBLASLt + the GELU pass). fp32 accumulation, bias and GELU in fp32, one
// rounding to the storage type.
constexpr int64_t kGemmGeluMaxM = 512;
bool launch_gemm_bias_gelu(DType dt, const void* A, const void* B, const void* bias, void* Y, int64_t M, int64_t N,
                           int64_t K, cudaStream_t stream);

// FUSEOPT_GEMM_GELU=1 turns the fused kernel on; off by default until it has
// been timed against cuBLASLt + the pass on the GPU (.gpucmd/pdl.sh).
// set_gemm_gelu(-1) goes back to the environment's choice (tests).
bool gemm_gelu_enabled();
void set_gemm_gelu(int mode);

// The same kernel with the other epilogues, for the small-M GEMMs cuBLASLt
// runs latency-bound (BERT/GPT-2 projections at batch 1): FUSEOPT_SMALL_GEMM=1
// (off by default, unmeasured), any activation, otherwise the conditions
// above. K <= kSmallGemmMaxK: one kernel (a block streams (64 + 64) x K
// elements). Larger K (FFN2's 3072), up to kSmallGemmMaxSplitK: split-K into
// fp32 partials in `workspace` (small_gemm_workspace bytes, 16-byte aligned;
// the caller asks for it only when that is non-zero) and a second kernel that
// adds the splits in order (deterministic), the bias and the activation.
// Launches and returns true, or returns false having launched nothing.
enum class SmallGemmAct { None, Relu, GeluErf, GeluTanh };
constexpr int64_t kSmallGemmMaxK = 1024;
constexpr int64_t kSmallGemmMaxSplitK = 16384;
size_t small_gemm_workspace(DType dt, int64_t M, int64_t N, int64_t K);
bool launch_small_gemm(DType dt, SmallGemmAct act, const void* A, const void* B, const void* bias, void* Y,
                       int64_t M, int64_t N, int64_t K, cudaStream_t stream, void* workspace = nullptr);
bool small_gemm_enabled();
void set_small_gemm(int mode);

}  // namespace fuseopt::cuda_fused
