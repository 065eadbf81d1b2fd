// The driver's cuTensorMapEncodeTiled, fetched once through the runtime (no link against
// libcuda): the TMA descriptors of the Hopper kernels (fused_attention_hopper.cu,
// gemm_hopper.cu). Null where the driver does not have it.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

namespace fuseopt::cuda_fused {

PFN_cuTensorMapEncodeTiled_v12000 tma_encode_tiled();

}  // namespace fuseopt::cuda_fused
