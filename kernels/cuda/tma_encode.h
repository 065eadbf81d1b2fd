// The driver's cuTensorMapEncodeTiled, fetched once through the runtime (no link against
// libcuda): the TMA descriptors of the Hopper kernels (fused_attention_hopper.cu,
// gemm_hopper.cu, fused_matmul_layer_norm_hopper.cu). Null where the driver does not have it.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

PFN_cuTensorMapEncodeTiled_v12000 tma_encode_tiled();

// A 2-d fp16/bf16 view [rows][cols] (cols contiguous, row pitch `pitch` elements) in boxes of
// box_cols x box_rows, 128-byte swizzle, zero fill out of bounds (the Hopper GEMMs' operands and
// outputs). false where the driver has no encoder or refuses the map.
bool make_map_2d(CUtensorMap* map, DType dt, const void* ptr, int64_t rows, int64_t cols, int64_t pitch,
                 int box_cols, int box_rows);

}  // namespace fuseopt::cuda_fused
