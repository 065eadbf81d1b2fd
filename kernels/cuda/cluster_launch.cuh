// Launch of a kernel whose grid x is one thread-block cluster (the decode attention kernels:
// the splits of one (batch, head group) merge through distributed shared memory), with PDL
// where the stream allows it. nvcc only.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/pdl.h"

namespace fuseopt::cuda_fused {

// false: nothing launched (error cleared). Dynamic shared memory past 48 KB is opted into first
// (session 10: without it a 40 KB stage beside 21 KB of static arrays failed to launch).
template <class Kernel, class Args>
bool launch_x_cluster(Kernel kernel, dim3 grid, int threads, size_t smem, cudaStream_t stream, const Args& args) {
  if (smem > 0 &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  // Past 8 blocks a cluster (Hopper takes 16) the kernel must opt into the non-portable size.
  if (grid.x > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  attr[n].id = cudaLaunchAttributeClusterDimension;
  attr[n].val.clusterDim.x = grid.x;
  attr[n].val.clusterDim.y = 1;
  attr[n].val.clusterDim.z = 1;
  ++n;
  const bool pdl = stream != nullptr && stream != cudaStreamLegacy && cuda_pdl::enabled() &&
                   cuda_pdl::capture_allows(stream);
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  if (cudaLaunchKernelEx(&cfg, kernel, args) == cudaSuccess) return true;
  (void)cudaGetLastError();
  if (!pdl) return false;
  cfg.numAttrs = 1;  // without PDL (the pair may be what the driver refused)
  if (cudaLaunchKernelEx(&cfg, kernel, args) == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

}  // namespace fuseopt::cuda_fused
