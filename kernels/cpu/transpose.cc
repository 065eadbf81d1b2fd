// Transpose: output dim i is input dim perm[i] (default: reversed dims).
#include "kernels/cpu/dm_util.h"

namespace fuseopt {

using namespace dm;

FUSEOPT_KERNEL(CpuTranspose, "", "Transpose", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> perm = ctx.node().attr_ints("perm");
  if (!ctx.node().has_attr("perm"))
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  DM_CHECK(ctx, static_cast<int64_t>(perm.size()) == rank,
           "perm has " << perm.size() << " entries for input " << shape_str(x.shape));
  std::vector<bool> used(rank, false);
  const std::vector<int64_t> in_strides = dense_strides(x.shape);
  std::vector<int64_t> out_shape(rank), strides(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t p = norm_axis(ctx, perm[i], rank);
    DM_CHECK(ctx, !used[p], "perm " << shape_str(perm) << " is not a permutation");
    used[p] = true;
    out_shape[i] = x.shape[p];
    strides[i] = in_strides[p];
  }
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), out_shape, strides);
}

}  // namespace fuseopt
