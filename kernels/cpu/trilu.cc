// Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of every
// matrix in the last two dims, zero elsewhere (all-zero bytes is 0 for every
// numeric dtype and false for bool).
#include <algorithm>

#include "kernels/cpu/dm_util.h"

namespace fuseopt {

using namespace dm;

FUSEOPT_KERNEL(CpuTrilu, "", "Trilu", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 2, "input " << shape_str(x.shape) << " must have rank >= 2");
  int64_t k = 0;
  if (const RtTensor* kt = opt_host_input(ctx, 1)) {
    DM_CHECK(ctx, kt->numel() == 1, "k must be a scalar, got " << shape_str(kt->shape));
    k = int_at(ctx, *kt, 0);
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const size_t es = elem_size(ctx, x.dtype);
  const int64_t rows = x.shape[x.rank() - 2];
  const int64_t cols = x.shape[x.rank() - 1];
  const int64_t mats = prod(x.shape, 0, x.rank() - 2);
  const size_t row_bytes = static_cast<size_t>(cols) * es;
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      const size_t at = static_cast<size_t>(m * rows + i) * row_bytes;
      copy_bytes(dst + at, src + at, row_bytes);
      // Zero the columns outside the kept triangle: [0, i+k) for upper,
      // [i+k+1, cols) for lower.
      const int64_t lo = upper ? 0 : std::clamp<int64_t>(i + k + 1, 0, cols);
      const int64_t hi = upper ? std::clamp<int64_t>(i + k, 0, cols) : cols;
      if (hi > lo) std::memset(dst + at + lo * es, 0, static_cast<size_t>(hi - lo) * es);
    }
  }
}

}  // namespace fuseopt
