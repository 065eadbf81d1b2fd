#include "kernels/cuda/tma_encode.h"

#include <cuda_runtime_api.h>

namespace fuseopt::cuda_fused {

PFN_cuTensorMapEncodeTiled_v12000 tma_encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

bool make_map_2d(CUtensorMap* map, DType dt, const void* ptr, int64_t rows, int64_t cols, int64_t pitch,
                 int box_cols, int box_rows) {
  auto encode = tma_encode_tiled();
  if (!encode) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(pitch) * 2};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  return encode(map, dt == DType::Float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool make_gemm_operand_maps(CUtensorMap* ta, CUtensorMap* tb, DType dt, const void* a, const void* b, int64_t M,
                            int64_t N, int64_t K, bool b_nk, int bk, int a_rows, int b_rows) {
  if (!make_map_2d(ta, dt, a, M, K, K, bk, a_rows)) return false;
  return b_nk ? make_map_2d(tb, dt, b, N, K, K, bk, b_rows) : make_map_2d(tb, dt, b, K, N, N, 64, bk);
}

}  // namespace fuseopt::cuda_fused
