// BitCast (opset 26) on the GPU: a device-to-device copy under the new element type (checks
// shared with the CPU reference: kernels/common/bitcast_params.h).
#include "kernels/common/bitcast_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

FUSEOPT_KERNEL(CudaBitCast, "", "BitCast", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const DType to = dm::resolve_bitcast(ctx, x);
  RtTensor* y = ctx.output(0, to, x.shape);
  if (x.nbytes())
    DM_CHECK(ctx, cudaMemcpyAsync(y->data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, stream_of(ctx)) == cudaSuccess,
             "device copy failed");
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
