// LpNormalization, MeanVarianceNormalization and LRN parameter resolution
// shared by the CPU reference (kernels/cpu/norm_extra.cc) and the CUDA kernels
// (kernels/cuda/norm_extra.cu).
//  LpNormalization: y = x / ||x||_p along axis (p 1 or 2; a zero norm gives 0,
//    as onnxruntime does);
//  MeanVarianceNormalization: y = (x - mean) / (std + 1e-9) over `axes`
//    (default [0, 2, 3]), biased variance (the ONNX function body);
//  LRN: y = x / (bias + alpha / size * sum of x^2 over channels
//    [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

// x viewed as kept dims x reduced dims (any axes): group g's elements are
// base(g) + off(r) for r in [0, group_size).
struct ReduceGroups {
  int64_t groups = 1, group_size = 1;
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
};

inline ReduceGroups resolve_mvn(KernelContext& ctx, const std::vector<int64_t>& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes = ctx.node().attr_ints("axes", {0, 2, 3});
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) {
    DM_CHECK(ctx, a >= -rank && a < rank, "axis " << a << " is out of range for rank " << rank);
    reduced[a < 0 ? a + rank : a] = true;
  }
  ReduceGroups g;
  const std::vector<int64_t> strides = dense_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      g.red_dims.push_back(shape[d]);
      g.red_strides.push_back(strides[d]);
      g.group_size *= shape[d];
    } else {
      g.kept_dims.push_back(shape[d]);
      g.kept_strides.push_back(strides[d]);
      g.groups *= shape[d];
    }
  }
  return g;
}

// Element offset of mixed-radix index i over dims/strides.
inline int64_t radix_offset(int64_t i, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

struct LrnParams {
  int64_t N = 0, C = 0, S = 1, size = 0, before = 0, after = 0;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.f;
};

inline LrnParams resolve_lrn(KernelContext& ctx, const std::vector<int64_t>& shape) {
  LrnParams p;
  DM_CHECK(ctx, shape.size() >= 2, "X must be [N, C, ...], got " << shape_str(shape));
  DM_CHECK(ctx, ctx.node().has_attr("size"), "missing attribute size");
  p.size = ctx.node().attr_int("size", 1);
  DM_CHECK(ctx, p.size >= 1, "size must be >= 1, got " << p.size);
  p.N = shape[0];
  p.C = shape[1];
  p.S = prod(shape, 2, shape.size());
  p.before = (p.size - 1) / 2;
  p.after = p.size - 1 - p.before;
  p.alpha = ctx.node().attr_float("alpha", 1e-4f);
  p.beta = ctx.node().attr_float("beta", 0.75f);
  p.bias = ctx.node().attr_float("bias", 1.f);
  return p;
}

}  // namespace fuseopt::dm
