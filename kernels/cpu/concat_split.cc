// Concat and Split along one axis: contiguous runs of prod(dims after axis)
// elements per outer index, so both are plain memcpy loops for every dtype.
#include <numeric>

#include "kernels/common/op_params.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
using namespace dm;

FUSEOPT_KERNEL(CpuConcat, "", "Concat", Backend::CPU, {}) {
  const RtTensor& first = req_input(ctx, 0);
  const ConcatParams cp = resolve_concat(ctx);  // shared with CUDA
  const int64_t rank = static_cast<int64_t>(first.rank()), axis = cp.axis;
  const std::vector<int64_t>& out_shape = cp.out_shape;
  RtTensor* y = ctx.output(0, first.dtype, out_shape);
  const size_t es = elem_size(ctx, first.dtype);
  const int64_t outer = prod(out_shape, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(prod(out_shape, axis + 1, rank)) * es;
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const RtTensor& t = *ctx.input(i);
      const size_t run = static_cast<size_t>(t.shape[axis]) * inner_bytes;
      copy_bytes(dst, static_cast<const uint8_t*>(t.data) + o * run, run);
      dst += run;
    }
  }
}

FUSEOPT_KERNEL(CpuSplit, "", "Split", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1, "cannot split a scalar");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  const int64_t n = static_cast<int64_t>(ctx.num_outputs());
  const std::vector<int64_t> sizes = split_sizes(ctx, x.shape[axis], n);  // shared with CUDA
  const size_t es = elem_size(ctx, x.dtype);
  const int64_t outer = prod(x.shape, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(prod(x.shape, axis + 1, rank)) * es;
  const size_t in_row = static_cast<size_t>(x.shape[axis]) * inner_bytes;
  const auto* src = static_cast<const uint8_t*>(x.data);
  size_t begin = 0;  // byte offset of this part inside one outer row
  for (int64_t i = 0; i < n; ++i) {
    const size_t run = static_cast<size_t>(sizes[i]) * inner_bytes;
    if (wants_output(ctx, i)) {
      std::vector<int64_t> shape = x.shape;
      shape[axis] = sizes[i];
      auto* dst = static_cast<uint8_t*>(ctx.output(i, x.dtype, shape)->data);
      for (int64_t o = 0; o < outer; ++o) copy_bytes(dst + o * run, src + o * in_row + begin, run);
    }
    begin += run;
  }
}

}  // namespace fuseopt
