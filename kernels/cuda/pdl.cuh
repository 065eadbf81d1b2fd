// Programmatic dependent launch (PDL), nvcc side: the launcher every fused
// kernel goes through and the two device calls it requires.
//
// Contract of a kernel launched with pdl_launch:
//   * pdl_wait() runs before the kernel's first access to global memory that
//     another kernel may write or read: inputs (RAW) and outputs too (WAR: the
//     memory plan hands a buffer the previous kernel still reads to the next
//     one). Every thread calls it, before any early return, so "this grid has
//     completed" implies "its predecessor has completed" (a chain stays
//     transitive: kernel C may read what kernel A wrote two launches back).
//   * pdl_trigger() may come anywhere after pdl_wait(); it only lets the next
//     kernel be scheduled early (that kernel waits for our completion itself).
//     Right after the wait is what these kernels do: the successor's launch
//     and prologue then overlap our whole body; it cannot start before all of
//     our blocks are resident, so it never takes SM space our blocks need.
// Both compile to nothing below sm_90 and are no-ops when the kernel was not
// launched with the attribute (FUSEOPT_PDL=0, older devices).
//
// cuBLASLt kernels (the GEMMs between ours) are launched by cuBLASLt itself;
// edges from and to them are legal either way: a PDL-launched kernel of ours
// after a GEMM waits for the GEMM's completion; a GEMM after ours is either
// launched normally (full serialisation, our trigger is moot) or with PDL by
// cuBLASLt, whose kernels then wait themselves (NOTES-perf.md v8).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/pdl.h"

namespace fuseopt::cuda_pdl {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Both, in the order every kernel here uses them.
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}

// Both, trigger first (trigger_first_enabled(); else as pdl_begin): the next kernel may then
// start while this one still waits for its predecessor. Within the contract above: the next
// kernel's pre-wait accesses touch only memory no kernel of the run writes, and its wait still
// covers this grid's completion, which follows this grid's wait, hence the predecessor's
// completion (the chain stays transitive after the wait). For kernels with few blocks, since a
// dependent's blocks then share the SMs with the predecessor: RotaryEmbedding between the QKV
// GEMV and the decode attention, whose past tiles and mask then stream during the GEMV (v24).
__device__ __forceinline__ void pdl_begin_trigger_first(bool first) {
  if (first) pdl_trigger();
  pdl_wait();
  if (!first) pdl_trigger();
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic
// stream serialisation attribute when enabled() and capture_allows(stream).
// Errors are left for cudaGetLastError (FUSED_LAUNCH_CHECK / check_launch),
// as with <<<>>>.
template <class... Params, class... Args>
void pdl_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  // Not on the legacy default stream (its implicit synchronisation with other
  // streams is not worth reasoning about; the runtime uses its own stream).
  if (stream != nullptr && stream != cudaStreamLegacy && enabled() && capture_allows(stream)) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, args...);
    if (e == cudaSuccess) return;
    // Retry plainly: if that works the attribute was the problem (switch PDL
    // off for the device); if not, the plain launch's error is reported.
    (void)cudaGetLastError();
    kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
    if (cudaPeekAtLastError() == cudaSuccess) {
      int device = 0;
      if (cudaGetDevice(&device) == cudaSuccess) disable_for_device(device, static_cast<int>(e));
    }
    return;
  }
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
}

}  // namespace fuseopt::cuda_pdl
