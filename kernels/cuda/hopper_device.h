// Whether the current device can run the sm_90a kernels (the Hopper attention of
// fused_attention_hopper.cu, the GEMM of gemm_hopper.cu): compute capability 9.0 and the
// sm_90a image of those files loaded (CMakeLists.txt builds it beside sm_90, whose copies
// of the kernels are empty). Probed once per device with a one-thread kernel, outside a
// stream capture (inside one, before the first probe: false, and the next uncaptured call
// probes). Host-only header.
#pragma once
#include <cuda_runtime_api.h>

namespace fuseopt::cuda_fused {

bool hopper_sm90a_ready(cudaStream_t stream);

}  // namespace fuseopt::cuda_fused
