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

// A Hopper GEMM's operand maps (gemm_hopper.cu, fused_matmul_layer_norm_hopper.cu): A [M][K] in
// boxes of bk columns x a_rows rows; B [N][K] (b_nk) in boxes of bk x b_rows, else [K][N] in boxes
// of 64 columns x bk rows. false where either map cannot be made.
bool make_gemm_operand_maps(CUtensorMap* ta, CUtensorMap* tb, DType dt, const void* a, const void* b, int64_t M,
                            int64_t N, int64_t K, bool b_nk, int bk, int a_rows, int b_rows);

}  // namespace fuseopt::cuda_fused
