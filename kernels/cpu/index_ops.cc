// Less common index/selection ops that exporters still emit: NonZero,
// OneHot, Compress, EyeLike, DepthToSpace, SpaceToDepth.
#include <algorithm>

#include "kernels/common/op_params.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

// Non-zero test of element i whatever the dtype (fp16 -0.0 counts as zero).
bool nonzero_at(KernelContext& ctx, const RtTensor& t, int64_t i) {
  bool nz = false;
  visit_dtype(t.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    nz = value_of(t.template ptr<T>()[i]) != 0;
  });
  return nz;
}

}  // namespace

// Indices of non-zero elements, [rank, count], in row-major order.
FUSEOPT_KERNEL(CpuNonZero, "", "NonZero", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (nonzero_at(ctx, x, i)) hits.push_back(i);
  // A scalar is treated as shape [1] (as ONNX Runtime does).
  const std::vector<int64_t> shape = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t n = static_cast<int64_t>(hits.size());
  RtTensor* y = ctx.output(0, DType::Int64, {rank, n});
  const std::vector<int64_t> strides = dense_strides(shape);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < rank; ++d) y->ptr<int64_t>()[d * n + j] = hits[j] / strides[d] % shape[d];
}

// One-hot along `axis`: values[1] where indices (negative: + depth) hit,
// values[0] elsewhere; out-of-range indices give an all-off row.
FUSEOPT_KERNEL(CpuOneHot, "", "OneHot", Backend::CPU, {}) {
  const RtTensor& idx = req_input(ctx, 0);
  const RtTensor& depth_t = *ctx.host_input(1);
  const RtTensor& values = req_input(ctx, 2);
  DM_CHECK(ctx, depth_t.numel() == 1, "depth must hold one value, got " << shape_str(depth_t.shape));
  DM_CHECK(ctx, values.numel() == 2, "values must hold [off, on], got " << shape_str(values.shape));
  int64_t depth = 0;
  visit_dtype(depth_t.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    depth = static_cast<int64_t>(value_of(depth_t.template ptr<T>()[0]));
  });
  DM_CHECK(ctx, depth > 0, "depth must be positive, got " << depth);
  const int64_t out_rank = static_cast<int64_t>(idx.rank()) + 1;
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), out_rank);
  std::vector<int64_t> out_shape = idx.shape;
  out_shape.insert(out_shape.begin() + axis, depth);
  RtTensor* y = ctx.output(0, values.dtype, out_shape);
  const size_t es = elem_size(ctx, values.dtype);
  const auto* off = static_cast<const uint8_t*>(values.data);
  const uint8_t* on = off + es;
  auto* dst = static_cast<uint8_t*>(y->data);
  const int64_t outer = prod(idx.shape, 0, axis);
  const int64_t inner = prod(idx.shape, axis, idx.rank());
  // Indices may be any numeric type (float included): read them once.
  std::vector<int64_t> hot(static_cast<size_t>(idx.numel()));
  visit_dtype(idx.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < idx.numel(); ++i) {
      const int64_t k = static_cast<int64_t>(value_of(idx.template ptr<T>()[i]));
      hot[i] = k < 0 ? k + depth : k;
    }
  });
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t d = 0; d < depth; ++d)
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + ((o * depth + d) * inner + i) * es, hot[o * inner + i] == d ? on : off, es);
}

// Keeps the slices along `axis` (or of the flattened input) whose condition
// is true; a condition shorter than the axis counts as false beyond its end.
FUSEOPT_KERNEL(CpuCompress, "", "Compress", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& cond = *ctx.host_input(1);
  DM_CHECK(ctx, cond.rank() == 1, "condition must be 1-d, got " << shape_str(cond.shape));
  const bool has_axis = ctx.node().has_attr("axis");
  const std::vector<int64_t> shape = has_axis ? x.shape : std::vector<int64_t>{x.numel()};
  const int64_t axis = has_axis ? norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank()) : 0;
  const int64_t dim = shape[axis];
  DM_CHECK(ctx, cond.numel() <= dim,
           "condition " << shape_str(cond.shape) << " is longer than axis " << axis << " of " << shape_str(x.shape));
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (nonzero_at(ctx, cond, i)) keep.push_back(i);
  std::vector<int64_t> out_shape = shape;
  out_shape[axis] = static_cast<int64_t>(keep.size());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const size_t es = elem_size(ctx, x.dtype);
  const int64_t outer = prod(shape, 0, axis);
  const size_t run = static_cast<size_t>(prod(shape, axis + 1, shape.size())) * es;
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : keep) {
      copy_bytes(dst, src + (o * dim + k) * run, run);
      dst += run;
    }
}

// A 2-d matrix of the input's shape with ones on diagonal k.
FUSEOPT_KERNEL(CpuEyeLike, "", "EyeLike", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() == 2, "input must be 2-d, got " << shape_str(x.shape));
  const DType dt = ctx.node().has_attr("dtype") ? static_cast<DType>(ctx.node().attr_int("dtype", 1)) : x.dtype;
  const int64_t k = ctx.node().attr_int("k", 0);
  RtTensor* y = ctx.output(0, dt, x.shape);
  visit_dtype(dt, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y->template ptr<T>();
    std::fill_n(out, y->numel(), convert<T>(0));
    for (int64_t i = 0; i < x.shape[0]; ++i)
      if (i + k >= 0 && i + k < x.shape[1]) out[i * x.shape[1] + i + k] = convert<T>(1);
  });
}

FUSEOPT_KERNEL(CpuDepthToSpace, "", "DepthToSpace", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const BlockPermuteView v = resolve_depth_to_space(ctx, x);  // shared with the CUDA kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), v.view_shape, v.view_strides);
}

FUSEOPT_KERNEL(CpuSpaceToDepth, "", "SpaceToDepth", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const BlockPermuteView v = resolve_space_to_depth(ctx, x);  // shared with the CUDA kernel
  RtTensor* y = ctx.output(0, x.dtype, v.out_shape);
  strided_copy(ctx, y->data, x.data, elem_size(ctx, x.dtype), v.view_shape, v.view_strides);
}

}  // namespace fuseopt
