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
  DType dtype = DType::Float;  // A, B, C, D and bias all in this type
  bool tf32 = false;           // fp32 only: CUBLAS_COMPUTE_32F_FAST_TF32
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false;  // A stored [K, M] instead of [M, K]
  bool trans_b = false;  // B stored [N, K] instead of [K, N]
  int64_t batch = 1;
  // Element strides between batch items; 0 broadcasts one matrix to all.
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  float alpha = 1.f;
  // beta != 0 accumulates into D (D's previous contents play C).
  float beta = 0.f;
  GemmEpilogue epilogue = GemmEpilogue::None;
  const void* bias = nullptr;  // [N], required by the *Bias epilogues
};

// Returns device memory of at least `bytes` for cuBLASLt's workspace.
using ScratchFn = std::function<void*(size_t bytes)>;

// Enqueues D = epilogue(alpha · op(A)·op(B) + beta · D [+ bias]) on `stream`.
// The algorithm comes from cuBLASLt's heuristic, cached per (shape, dtype,
// epilogue, alignment). Throws Error on failure.
void gemm(const GemmDesc& d, const void* A, const void* B, void* D, cudaStream_t stream,
          const ScratchFn& scratch);

// Number of distinct GEMM configurations whose algorithm is cached (tests).
size_t gemm_algo_cache_size();

}  // namespace fuseopt::cuda_fused
