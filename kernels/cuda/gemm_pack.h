// Packing a GEMM's padded output rows into Y (kernels/cuda/gemm_kernels.cc,
// aligned_columns): the GEMM writes 16-byte aligned rows of ld elements, Y
// wants rows of N < ld elements, which for a 16-bit N that is not a multiple
// of 8 (BERT's vocabulary 30522, GPT-2's 50257) start at 4- or 2-byte
// addresses only. Nothing here needs nvcc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

// y[m, n] = src[m * ld + n] for m < rows, n < N (ld >= N); dt is Float16 or
// BFloat16 (2-byte elements). y_fp32: y is float (a float graph output of a
// 16-bit run: the pack is the conversion). Any alignment of src and y.
void launch_pack_rows(DType dt, const void* src, int64_t ld, void* y, int64_t rows, int64_t N, cudaStream_t stream,
                      bool y_fp32 = false);

}  // namespace fuseopt::cuda_fused
