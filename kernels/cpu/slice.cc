// Slice, both spellings: opset 1 (starts/ends/axes attributes) and opset >= 10
// (starts, ends, axes?, steps? inputs). Negative starts/ends count from the
// end, out-of-range values clamp, negative steps walk backwards (ONNX spec
// clamping rules). The result is a strided view copied densely.
#include "kernels/common/op_params.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {

using namespace dm;

FUSEOPT_KERNEL(CpuSlice, "", "Slice", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const SliceView v = resolve_slice(ctx, x);  // shared with the CUDA kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  if (y->numel() == 0) return;
  const size_t es = elem_size(ctx, x.dtype);
  strided_copy(ctx, y->data, static_cast<const uint8_t*>(x.data) + v.base * es, es, v.out_shape,
               v.strides);
}

}  // namespace fuseopt
