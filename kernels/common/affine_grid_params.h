// AffineGrid (opset 20, 2-D) parameters and base coordinates shared by the
// CPU reference (kernels/cpu/affine_grid.cc) and the CUDA kernel
// (kernels/cuda/affine_grid.cu).
#pragma once
#include <cstdint>

#include "kernels/cpu/dm_util.h"

#ifdef __CUDACC__
#define AG_HD __host__ __device__ __forceinline__
#else
#define AG_HD inline
#endif

namespace fuseopt::dm {

struct AffineGridParams {
  int64_t N = 0, H = 0, W = 0;
  bool align_corners = false;
};

inline AffineGridParams resolve_affine_grid(KernelContext& ctx, const RtTensor& theta) {
  const RtTensor* size = opt_host_input(ctx, 1);
  DM_CHECK(ctx, size, "needs theta and size");
  const std::vector<int64_t> s = read_ints(ctx, *size);
  DM_CHECK(ctx, s.size() == 4, "only 2-D grids are supported: size must be [N, C, H, W], got " << s.size() << " values");
  AffineGridParams p;
  p.N = s[0];
  p.H = s[2];
  p.W = s[3];
  DM_CHECK(ctx, p.N >= 0 && p.H >= 0 && p.W >= 0, "negative size " << shape_str(s));
  DM_CHECK(ctx, theta.shape == std::vector<int64_t>({p.N, 2, 3}),
           "theta " << shape_str(theta.shape) << " must be [" << p.N << ", 2, 3]");
  p.align_corners = ctx.node().attr_int("align_corners", 0) != 0;
  return p;
}

// Normalised coordinate of pixel i of n.
AG_HD float affine_base_coord(int64_t i, int64_t n, bool align_corners) {
  if (align_corners) return n > 1 ? -1.f + 2.f * static_cast<float>(i) / static_cast<float>(n - 1) : -1.f;
  return (2.f * static_cast<float>(i) + 1.f) / static_cast<float>(n) - 1.f;
}

}  // namespace fuseopt::dm

#undef AG_HD
