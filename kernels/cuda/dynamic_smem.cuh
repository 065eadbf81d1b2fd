// Dynamic shared memory past the 48 KB default for the Hopper kernels (GEMM, GEMM + LayerNorm,
// attention): the attribute is set once per kernel instance and remembered, so a launch pays a
// relaxed atomic load, not a runtime call. nvcc only.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

namespace fuseopt::cuda_fused {

// Lets `Kernel` (one template instance: the flag lives per instance) take `bytes` of dynamic
// shared memory. Every launch of an instance asks for the same size (its layout's), so once set is
// set for good. false: the runtime refused (error cleared); the caller takes another kernel.
template <auto Kernel>
bool allow_dynamic_smem_once(int bytes) {
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_acquire)) return true;
  if (cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  done.store(true, std::memory_order_release);
  return true;
}

}  // namespace fuseopt::cuda_fused
