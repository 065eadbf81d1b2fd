// A key-padding mask's per-batch key counts, for the Hopper attention kernel's varlen path
// (AttentionArgs::mask_prefix). Exporters pass the mask as a graph input that every layer reads,
// and in almost every batch it is a prefix of kept keys followed by padding (right padding; all
// ones at a benchmark's full length). For such a batch the attention is the unmasked one over its
// first n keys, and the kernel then needs no per-tile mask work (NOTES-perf.md v42). One block a
// batch row; the runtime launches it once a forward (KernelContext::shared_derived).
#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_common.h"

namespace fuseopt::cuda_fused {

namespace {

constexpr int kThreads = 256;

// out[b] = n when row b keeps keys [0, n) and masks [n, Skv) with n >= 1; else -1 (holes, left
// padding, or every key masked: those batches keep the per-key flags). Each thread finds its
// first masked key and its last kept one; the row is a prefix when the block's last kept key
// comes before its first masked one.
__global__ void __launch_bounds__(kThreads) mask_prefix_kernel(const void* mask, DType dt, int Skv, int* out) {
  const int64_t row = int64_t(blockIdx.x) * Skv;
  int first_masked = Skv, last_kept = -1;
  for (int j = threadIdx.x; j < Skv; j += kThreads) {
    if (mask_raw_keep(mask_load_raw(mask, dt, row + j), dt))
      last_kept = j;  // j grows: the last assignment is the thread's last kept key
    else
      first_masked = min(first_masked, j);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    first_masked = min(first_masked, __shfl_xor_sync(0xffffffffu, first_masked, o));
    last_kept = max(last_kept, __shfl_xor_sync(0xffffffffu, last_kept, o));
  }
  __shared__ int s_first[kThreads / 32], s_last[kThreads / 32];
  const int warp = threadIdx.x / 32;
  if ((threadIdx.x & 31) == 0) s_first[warp] = first_masked, s_last[warp] = last_kept;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) first_masked = min(first_masked, s_first[w]), last_kept = max(last_kept, s_last[w]);
    out[blockIdx.x] = first_masked >= 1 && last_kept < first_masked ? first_masked : -1;
  }
}

}  // namespace

void launch_mask_prefix(const void* mask, DType mask_dtype, int B, int Skv, int* out, cudaStream_t stream) {
  if (B <= 0) return;
  mask_prefix_kernel<<<B, kThreads, 0, stream>>>(mask, mask_dtype, Skv, out);
  FUSED_LAUNCH_CHECK("Attention mask prefix");
}

}  // namespace fuseopt::cuda_fused
