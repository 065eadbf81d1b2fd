// fuseopt.EmbedLayerNorm on the GPU (kernels/cuda/embed_layer_norm.cu): per
// output row, 2-3 embedding-table rows picked by their ids are summed in fp32
// (lookup order) and layer-normalised (fp32 statistics), in one kernel, where
// the unfused graph ran a Gather per table, the Adds and the norm.
// Includable from .cc files (no nvcc needed).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"
#include "kernels/cuda/index_errors.h"

namespace fuseopt::cuda_fused {

constexpr int kEmbedMaxLookups = 3;
constexpr int kEmbedMaxRank = 6;  // leading (index) dims of the output

// One lookup: table [rows, D] of the op's dtype, ids (int64 or int32) read at
// sum over a of coordinate[a] * strides[a] for the output row's coordinates
// over dims[] (stride 0 on a broadcast dim).
struct EmbedLookup {
  const void* table = nullptr;
  int64_t rows = 0;
  const void* ids = nullptr;
  bool ids32 = false;
  int64_t strides[kEmbedMaxRank] = {};
};

// y [rows, D] = LayerNorm(sum_j table_j[id_j(row)]) * gamma (+ beta).
// An id outside [-rows_j, rows_j - 1] contributes a zero row and is reported
// to `err` (the Session then raises an Error for the node, as for Gather).
struct EmbedLayerNormArgs {
  DType dtype = DType::Float;
  int64_t rows = 0, D = 0;
  int rank = 0;  // of the leading dims; rows = product of dims
  int64_t dims[kEmbedMaxRank] = {};
  int num_lookups = 0;
  EmbedLookup lookups[kEmbedMaxLookups];
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  float eps = 1e-5f;
  cuda::IndexErrorSink err{nullptr, nullptr, 0};
};

// Throws Error for arguments it cannot run (rows longer than the row cache).
void launch_embed_layer_norm(const EmbedLayerNormArgs& a, cudaStream_t stream);

// Tests: the warp-per-row path on/off (on by default), to cover the block path at small D.
void set_embed_warp_rows(bool on);

}  // namespace fuseopt::cuda_fused
