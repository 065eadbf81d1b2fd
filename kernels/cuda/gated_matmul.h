// The elementwise half of fuseopt.GatedMatMul on CUDA (the GEMM half is
// cuda_fused::gemm): Y[r, j] = act(P[r, j]) * P[r, N + j] for P [rows, 2N].
// Includable from .cc files (no nvcc needed); tests call it directly.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

enum class GateActivation { Silu = 0, Gelu = 1, GeluTanh = 2, Relu = 3 };

// fp32 math, P and Y in `dt` (float / float16 / bfloat16).
void launch_gated_activation(DType dt, GateActivation act, const void* p, void* y, int64_t rows, int64_t n,
                             cudaStream_t stream);

}  // namespace fuseopt::cuda_fused
