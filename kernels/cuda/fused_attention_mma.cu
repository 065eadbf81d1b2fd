// Tensor-core attention kernel for fp16/bf16 (placeholder: not yet enabled).
#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_common.h"

namespace fuseopt::cuda_fused {

bool attention_mma_supported(const AttentionArgs& a) { return false; }
void launch_attention_mma(const AttentionArgs& a, cudaStream_t stream) {
  FUSE_CHECK(false, "Attention: tensor-core kernel not available");
}

}  // namespace fuseopt::cuda_fused
