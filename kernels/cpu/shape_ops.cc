// Ops that only change how a tensor is viewed (Reshape, Squeeze, Unsqueeze,
// Flatten, Identity, Dropout at inference) and ops that report a shape
// (Shape, Size). The view ops alias their input: no copy.
#include <algorithm>

#include "kernels/common/op_params.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

// Axes from input `slot` (opset >= 13) or attribute "axes" (older opsets);
// `present` says whether either exists.
std::vector<int64_t> axes_input_or_attr(KernelContext& ctx, size_t slot, bool* present) {
  if (const RtTensor* t = opt_host_input(ctx, slot)) {
    *present = true;
    return read_ints(ctx, *t);
  }
  *present = ctx.node().has_attr("axes");
  return ctx.node().attr_ints("axes");
}

// Target shape of Reshape: 0 copies the input dim (unless allowzero), -1 is
// inferred from the element count.
std::vector<int64_t> reshape_target(KernelContext& ctx, const RtTensor& x,
                                    const std::vector<int64_t>& spec, bool allowzero) {
  std::vector<int64_t> out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      DM_CHECK(ctx, i < x.rank(), "shape " << shape_str(spec) << " copies dim " << i
                                          << " (0) but the input " << shape_str(x.shape)
                                          << " has rank " << x.rank());
      out[i] = x.shape[i];
    } else if (d == -1) {
      DM_CHECK(ctx, infer < 0, "shape " << shape_str(spec) << " has more than one -1");
      infer = static_cast<int>(i);
      continue;
    } else {
      DM_CHECK(ctx, d >= 0, "shape " << shape_str(spec) << " has invalid dim " << d);
      out[i] = d;
    }
    // The product in 64 bits with a check: a dim near INT64_MAX (mutate_models.py seed 11
    // m200, a Concat rewired into a Reshape's target) overflowed it (UBSan).
    int64_t next = 0;
    const bool over = __builtin_mul_overflow(known, out[i], &next);
    DM_CHECK(ctx, !over, "shape " << shape_str(spec) << " has more elements than 64 bits can count");
    known = next;
  }
  if (infer >= 0) {
    DM_CHECK(ctx, known != 0 && x.numel() % known == 0,
             "cannot reshape input " << shape_str(x.shape) << " (" << x.numel()
                                     << " elements) to " << shape_str(spec));
    out[infer] = x.numel() / known;
  }
  DM_CHECK(ctx, shape_numel(out) == x.numel(),
           "cannot reshape input " << shape_str(x.shape) << " (" << x.numel() << " elements) to "
                                   << shape_str(spec) << " (" << shape_numel(out) << " elements)");
  return out;
}

}  // namespace

FUSEOPT_KERNEL(CpuReshape, "", "Reshape", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  std::vector<int64_t> spec;
  if (const RtTensor* s = opt_host_input(ctx, 1)) {
    spec = read_ints(ctx, *s);
  } else {
    DM_CHECK(ctx, ctx.node().has_attr("shape"), "needs a shape input or attribute");
    spec = ctx.node().attr_ints("shape");  // opset < 5
  }
  const bool allowzero = ctx.node().attr_int("allowzero", 0) != 0;
  ctx.alias_output(0, 0, reshape_target(ctx, x, spec, allowzero));
}

FUSEOPT_KERNEL(CpuSqueeze, "", "Squeeze", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  bool has_axes = false;
  std::vector<int64_t> axes = axes_input_or_attr(ctx, 1, &has_axes);
  std::vector<bool> drop(rank, false);
  if (!has_axes || axes.empty()) {  // an empty axes input also means "all" (as ONNX Runtime does)
    for (int64_t i = 0; i < rank; ++i) drop[i] = x.shape[i] == 1;
  } else {
    for (int64_t a : axes) {
      const int64_t ax = norm_axis(ctx, a, rank);
      DM_CHECK(ctx, x.shape[ax] == 1, "cannot squeeze axis " << a << " of size " << x.shape[ax]
                                                             << " in input " << shape_str(x.shape));
      drop[ax] = true;
    }
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[i]) out.push_back(x.shape[i]);
  ctx.alias_output(0, 0, out);
}

FUSEOPT_KERNEL(CpuUnsqueeze, "", "Unsqueeze", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  bool has_axes = false;
  std::vector<int64_t> axes = axes_input_or_attr(ctx, 1, &has_axes);
  DM_CHECK(ctx, has_axes, "needs axes (input for opset >= 13, attribute before)");
  const int64_t out_rank = static_cast<int64_t>(x.rank() + axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : axes) {
    const int64_t ax = norm_axis(ctx, a, out_rank);
    DM_CHECK(ctx, !inserted[ax], "axis " << a << " repeated in axes");
    inserted[ax] = true;
  }
  std::vector<int64_t> out(out_rank);
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i) out[i] = inserted[i] ? 1 : x.shape[next++];
  ctx.alias_output(0, 0, out);
}

FUSEOPT_KERNEL(CpuFlatten, "", "Flatten", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = ctx.node().attr_int("axis", 1);
  DM_CHECK(ctx, axis >= -rank && axis <= rank,
           "axis " << axis << " out of range for input " << shape_str(x.shape));
  if (axis < 0) axis += rank;
  ctx.alias_output(0, 0, {prod(x.shape, 0, axis), prod(x.shape, axis, x.rank())});
}

FUSEOPT_KERNEL(CpuIdentity, "", "Identity", Backend::CPU, {}) {
  ctx.alias_output(0, 0, req_input(ctx, 0).shape);
}

// Inference: Dropout is the identity; the optional mask says "kept" everywhere.
FUSEOPT_KERNEL(CpuDropout, "", "Dropout", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  ctx.alias_output(0, 0, x.shape);
  if (!wants_output(ctx, 1)) return;
  DType mask_type = ctx.node().output(1)->dtype;
  if (mask_type == DType::Undefined) mask_type = DType::Bool;
  RtTensor* mask = ctx.output(1, mask_type, x.shape);
  visit_dtype(mask_type, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(mask->ptr<T>(), mask->numel(), convert<T>(true));
  });
}

FUSEOPT_KERNEL(CpuShape, "", "Shape", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const dm::DimRange dims_range = dm::resolve_shape_range(ctx, rank);  // shared with the CUDA kernel
  const int64_t start = dims_range.start, n = dims_range.count;
  RtTensor* y = ctx.output(0, DType::Int64, {n});
  for (int64_t i = 0; i < n; ++i) y->ptr<int64_t>()[i] = x.shape[start + i];
}

FUSEOPT_KERNEL(CpuSize, "", "Size", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, DType::Int64, {});
  *y->ptr<int64_t>() = x.numel();
}

}  // namespace fuseopt
