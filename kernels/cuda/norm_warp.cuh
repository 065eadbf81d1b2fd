// What the warp-per-row normalisation kernels share (fused_norm.cu's norm_warp_kernel and
// embed_layer_norm.cu's embed_warp_kernel): rows per block, the centred sum of squares in
// element order, and the choice of vectors per lane for a row. nvcc only.
#pragma once
#include <cstdint>
#include <type_traits>

namespace fuseopt::cuda_fused::norm_warp {

constexpr int kRowsPerBlock = 4;  // warps (rows) a block

// sq += sum over the vector of (z - mean)^2, in element order.
template <int N>
__device__ __forceinline__ void add_centred_squares(float& sq, const float (&z)[N], float mean) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const float d = z[k] - mean;
    sq += d * d;
  }
}

// launch(std::integral_constant<int, VPL>) with the smallest vectors-per-lane count covering a
// row of nv vectors of N elements, keeping at most 32 fp32 values per lane in registers; false
// (nothing launched) when the row is longer.
template <int N, class Launch>
bool with_lane_vectors(int64_t nv, Launch&& launch) {
  constexpr int kMaxVpl = 32 / N;  // 4 for 16-bit types, 8 for fp32
  if (nv > 32 * kMaxVpl) return false;
  if (nv <= 32) {
    launch(std::integral_constant<int, 1>{});
  } else if (nv <= 64) {
    launch(std::integral_constant<int, 2>{});
  } else if (nv <= 96) {
    launch(std::integral_constant<int, 3>{});
  } else if (nv <= 128) {
    launch(std::integral_constant<int, 4>{});
  } else if constexpr (kMaxVpl >= 8) {
    if (nv <= 192)
      launch(std::integral_constant<int, 6>{});
    else
      launch(std::integral_constant<int, 8>{});
  } else {
    return false;
  }
  return true;
}

}  // namespace fuseopt::cuda_fused::norm_warp
