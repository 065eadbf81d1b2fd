// Launches of kernels in thread-block clusters along x, with PDL where the stream allows it: the
// decode attention kernels (grid x is one cluster: the splits of one (batch, head group) merge
// through distributed shared memory), the Hopper GEMM's 2-block clusters, the GEMM + LayerNorm's
// row of tiles. nvcc only.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/pdl.h"

namespace fuseopt::cuda_fused {

// kernel<<<grid, threads, smem, stream>>>(args...) in clusters of `cluster_x` blocks along x,
// with PDL where the stream allows it (pdl_launch's rule); a launch the driver refuses with both
// attributes is retried without PDL. The caller has set the kernel's shared-memory attributes.
// false: nothing launched (error cleared).
template <class Kernel, class... Args>
bool launch_clustered(Kernel kernel, dim3 grid, int cluster_x, int threads, size_t smem, cudaStream_t stream,
                      const Args&... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  attr[n].id = cudaLaunchAttributeClusterDimension;
  attr[n].val.clusterDim.x = unsigned(cluster_x);
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
  if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return true;
  (void)cudaGetLastError();
  if (!pdl) return false;
  cfg.numAttrs = 1;  // without PDL (the pair may be what the driver refused)
  if (cudaLaunchKernelEx(&cfg, kernel, args...) == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

// Clusters of `cluster_x` blocks of `kernel` (threads and dynamic shared memory as launched, its
// shared-memory attribute set) the device holds at once, or 0 (error cleared). The GPCs decide
// it, not the SM count alone: an H100 holds 30 clusters of 4 (120 of its 132 SMs).
template <class Kernel>
int max_active_clusters(Kernel kernel, int cluster_x, int threads, size_t smem, int sms) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = unsigned(cluster_x);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(cluster_x * (sms / cluster_x)));
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters <= 0) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

// A grid whose x is one cluster (the decode attention kernels). Dynamic shared memory past 48 KB
// is opted into first (session 10: without it a 40 KB stage beside 21 KB of static arrays failed
// to launch). false: nothing launched (error cleared).
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
  return launch_clustered(kernel, grid, int(grid.x), threads, smem, stream, args);
}

}  // namespace fuseopt::cuda_fused
