// Host-side parameter resolution shared by the CPU reference kernels
// (kernels/cpu/*.cc) and the CUDA kernels (kernels/cuda/*.cu): reading
// attributes and host shape inputs, ONNX clamping rules, output shapes.
// Both backends call these functions so that they cannot drift apart; only
// the data movement itself differs per backend. Plain C++ (no CUDA), so it
// compiles under nvcc from a .cu as well as from a .cc.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

// Slice as a strided view of x: y[i0..in] = x[base + sum i_d * strides[d]]
// (all in elements), with y of shape out_shape.
struct SliceView {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> strides;
  int64_t base = 0;
};

// Slice, both spellings: opset 1 (starts/ends/axes attributes) and opset >= 10
// (starts, ends, axes?, steps? inputs). Negative starts/ends count from the
// end, out-of-range values clamp, negative steps walk backwards.
inline SliceView resolve_slice(KernelContext& ctx, const RtTensor& x) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> starts, ends, axes, steps;
  bool has_axes = false;
  if (ctx.node().has_attr("starts")) {  // opset 1
    starts = ctx.node().attr_ints("starts");
    ends = ctx.node().attr_ints("ends");
    has_axes = ctx.node().has_attr("axes");
    axes = ctx.node().attr_ints("axes");
  } else {
    const RtTensor* s = opt_host_input(ctx, 1);
    const RtTensor* e = opt_host_input(ctx, 2);
    DM_CHECK(ctx, s && e, "needs starts and ends (inputs for opset >= 10, attributes before)");
    starts = read_ints(ctx, *s);
    ends = read_ints(ctx, *e);
    if (const RtTensor* a = opt_host_input(ctx, 3)) { has_axes = true; axes = read_ints(ctx, *a); }
    if (const RtTensor* st = opt_host_input(ctx, 4)) steps = read_ints(ctx, *st);
  }
  const size_t n = starts.size();
  if (!has_axes) {
    axes.resize(n);
    for (size_t i = 0; i < n; ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (steps.empty()) steps.assign(n, 1);
  DM_CHECK(ctx, ends.size() == n && axes.size() == n && steps.size() == n,
           "starts, ends, axes and steps differ in length (" << n << ", " << ends.size() << ", "
                                                            << axes.size() << ", " << steps.size()
                                                            << ")");

  std::vector<int64_t> begin(rank, 0), step(rank, 1), out_shape = x.shape;
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    const int64_t ax = norm_axis(ctx, axes[i], rank);
    DM_CHECK(ctx, !seen[ax], "axis " << axes[i] << " repeated");
    seen[ax] = true;
    const int64_t dim = x.shape[ax];
    const int64_t st = steps[i];
    DM_CHECK(ctx, st != 0, "step is 0 on axis " << axes[i]);
    int64_t s = starts[i], e = ends[i];
    // An end of INT_MAX means "to the end in the direction of the step"
    // (numpy's None), as ONNX Runtime reads it: with a negative step it runs
    // down to index 0 instead of clamping to dim-1.
    const bool end_is_none = e == std::numeric_limits<int64_t>::max() ||
                             e == std::numeric_limits<int32_t>::max();
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count = 0;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e > s) count = (e - s + st - 1) / st;
    } else if (dim > 0) {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = end_is_none ? -1 : std::clamp<int64_t>(e, -1, dim - 1);
      if (s > e) count = (s - e - st - 1) / -st;
    }
    begin[ax] = count > 0 ? s : 0;
    step[ax] = st;
    out_shape[ax] = count;
  }

  SliceView v;
  v.out_shape = out_shape;
  const std::vector<int64_t> in_strides = dense_strides(x.shape);
  v.strides.resize(rank);
  for (int64_t d = 0; d < rank; ++d) {
    v.base += begin[d] * in_strides[d];
    v.strides[d] = step[d] * in_strides[d];
  }
  return v;
}

}  // namespace fuseopt::dm
