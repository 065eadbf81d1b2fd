// The row half of fuseopt.FusedMatMulLayerNorm on CUDA (the GEMM half is
// cuda_fused::gemm with its bias epilogue): one kernel reads each row of the
// GEMM output h once and writes Y = LayerNorm(gelu(h)) · gamma (+ beta).
// Includable from .cc files (no nvcc needed); tests call it directly.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

enum class LnGelu { Erf = 0, Tanh = 1 };

// h, gamma, beta (optional), y: [rows, D] / [D] in `dtype` (float / float16 /
// bfloat16). GELU and the statistics in fp32 (two-pass: the mean, then the
// centred variance, from the row held on chip), one rounding to `dtype` at the
// end. When D is a multiple of 16 / sizeof(T) and every pointer is 16-byte
// aligned, rows are read as 16-byte vectors: one warp per row, the row in
// registers, up to D = 1024; one block per row, the row in shared memory,
// beyond. Other D take the scalar block kernel. D at most 51200.
struct GeluLayerNormArgs {
  DType dtype = DType::Float;
  int64_t rows = 0, D = 0;
  const void* h = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  float eps = 1e-5f;
  LnGelu gelu = LnGelu::Erf;
};
void launch_gelu_layer_norm(const GeluLayerNormArgs& a, cudaStream_t stream);

// Which kernel launch_gelu_layer_norm takes for these arguments ("warp",
// "block_vec", "block_scalar"): for tests that must cover each path.
const char* gelu_layer_norm_kernel_name(const GeluLayerNormArgs& a);

}  // namespace fuseopt::cuda_fused
