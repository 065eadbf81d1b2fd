// Mean and 1/sqrt(variance + eps) of one row, reduced over the thread block
// in fp32 (two passes: the mean, then the centred variance), for the
// Instance/GroupNormalization kernels (instance_norm.cu).
#pragma once
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt::cuda {

// Every thread of the block gets {mean, inv_std}. `shm`: 32 floats of shared memory.
template <class T>
__device__ __forceinline__ float2 block_row_stats(const T* __restrict__ xr, int64_t D, float eps, float* shm) {
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += float(load_c(xr[i]));
  const float mean = block_sum(s, shm) / float(D);
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float d = float(load_c(xr[i])) - mean;
    sq += d * d;
  }
  return make_float2(mean, rsqrtf(block_sum(sq, shm) / float(D) + eps));
}

}  // namespace fuseopt::cuda
