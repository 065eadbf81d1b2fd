// X seen as [rows, D] for an ONNX normalisation over the dims from attribute
// `axis` (default -1) on, and the check that a Scale/B tensor broadcasts to the
// normalised shape. Shared by the CUDA LayerNormalization (kernels/cuda/norm.cu)
// and RMSNormalization (kernels/cuda/rms_normalization.cu).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct NormRows {
  int64_t axis = 0, rows = 0, D = 0;
  std::vector<int64_t> norm_shape;  // x.shape[axis:]
};

inline NormRows resolve_norm_rows(KernelContext& ctx, const RtTensor& x) {
  DM_CHECK(ctx, x.rank() >= 1, "X must have rank >= 1");
  const int64_t rank = static_cast<int64_t>(x.rank());
  NormRows r;
  r.axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  r.rows = prod(x.shape, 0, r.axis);
  r.D = prod(x.shape, r.axis, rank);
  r.norm_shape.assign(x.shape.begin() + r.axis, x.shape.end());
  return r;
}

// `what` (e.g. "Scale/B") names the parameter in the error.
inline void check_broadcasts_to_norm(KernelContext& ctx, const RtTensor& t, const std::vector<int64_t>& norm_shape,
                                     const char* what) {
  DM_CHECK(ctx, broadcast_shape({t.shape, norm_shape}, ctx.node()) == norm_shape,
           what << " " << shape_str(t.shape) << " does not broadcast to " << shape_str(norm_shape));
}

}  // namespace fuseopt::dm
