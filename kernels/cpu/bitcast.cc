// BitCast (opset 26) on the CPU: a byte copy under the new element type (checks shared with
// the CUDA kernel: kernels/common/bitcast_params.h).
#include <cstring>

#include "kernels/common/bitcast_params.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_BitCast, "", "BitCast", Backend::CPU, {}) {
  const RtTensor& x = dm::req_input(ctx, 0);
  const DType to = dm::resolve_bitcast(ctx, x);
  RtTensor* y = ctx.output(0, to, x.shape);
  if (x.nbytes()) std::memcpy(y->data, x.data, x.nbytes());
}

}  // namespace
}  // namespace fuseopt
