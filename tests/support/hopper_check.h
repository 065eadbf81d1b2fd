// Whether a test of the sm_90a kernels (the Hopper GEMM, its RMSNorm prologue) can run: a usable
// GPU of compute capability 9.0. Otherwise the case reports skipped (WARN), with the reason.
#pragma once
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "support/cuda_kernel_check.h"

namespace fuseopt::cuda_check {

inline bool hopper_ready() {
  if (!gpu_ready()) return false;
  int dev = 0, major = 0, minor = 0;
  ck(cudaGetDevice(&dev), "device");
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) {
    WARN("CUDA tests skipped: the Hopper GEMM needs compute capability 9.0, this device is " << major << "."
                                                                                            << minor);
    return false;
  }
  return true;
}

}  // namespace fuseopt::cuda_check
