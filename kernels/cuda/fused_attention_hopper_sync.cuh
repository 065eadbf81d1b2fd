// Device primitives of the Hopper attention kernel (fused_attention_hopper_kernel.cuh):
// mbarriers, TMA tile copies, wgmma fences and shared-memory descriptors, named
// barriers, TMA stores and ex2 (fp16/bf16 packing: pack2 in fused_device.cuh). Inline PTX that exists only in the sm_90a image,
// hence all of it under FUSEOPT_HOPPER_DEVICE (defined here for the sm_90a pass).
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fused_device.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FUSEOPT_HOPPER_DEVICE 1
#endif

namespace fuseopt::cuda_fused::hopper {

#if defined(FUSEOPT_HOPPER_DEVICE)
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Announces `bytes` of copies without arriving (the arrival comes later, e.g. once the arriving
// thread has written what else the phase publishes).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
#if defined(FUSEOPT_HOPPER_WATCHDOG)
  // Debugging aid (-DFUSEOPT_HOPPER_WATCHDOG): a wait of over ~2 s traps
  // instead of hanging the device. Off in every build: it costs registers.
  const long long t0 = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#if defined(FUSEOPT_HOPPER_WATCHDOG)
    if (!done && clock64() - t0 > 4000000000ll) __trap();
#endif
  } while (!done);
}
// 4-d tile copy global -> shared, completing on mbarrier `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                         int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
// 4-d tile copy shared -> global as a bulk group of this thread; the box's parts outside the
// tensor (rows past S_q) are not written.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// This thread's bulk stores have finished reading shared memory (the buffer may be rewritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// ... and have completed (their writes are done).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Generic-proxy writes to shared memory made visible to the async proxy (the TMA store).
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins registers written by an asynchronous MMA after the wait that completes it.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle; stride between 8-row
// groups 1024 B; `lbo` only matters for MN-major operands wider than 64.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// A descriptor moved on by `bytes` (a multiple of 16): the start address is the low field, in
// 16-byte units, and no field above it is touched while the address stays under 256 KB (every
// shared-memory address does). Lets a kernel build each operand's descriptor once and step it by
// constants, instead of re-deriving the whole 64-bit word per MMA (masks, shifts, ORs: ~10 integer
// instructions per wgmma in the attention's consumer loop, NOTES-perf.md v26).
__device__ __forceinline__ uint64_t desc_add(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }
// Named barriers 1 and 2 (256 threads: one consumer warpgroup syncs, the other arrives).
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
// The 128 threads of one warpgroup (named barrier `id`).
__device__ __forceinline__ void warpgroup_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }
// Fetches a TMA descriptor (a __grid_constant__ kernel parameter) into the descriptor cache, so the
// first copy through it does not wait for that fetch. The descriptor is the host's encoding, which no
// kernel writes: a kernel launched with PDL issues this before its wait, during the previous
// kernel's tail (pdl.cuh's contract: no global memory another kernel writes is touched).
__device__ __forceinline__ void prefetch_tmap(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
#endif  // FUSEOPT_HOPPER_DEVICE

}  // namespace fuseopt::cuda_fused::hopper
