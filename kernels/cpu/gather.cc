// Gather, GatherElements, GatherND: indexed reads. They move whole elements
// (or contiguous runs), so one byte-level implementation covers every dtype.
// Negative indices count from the end; out-of-range indices throw.
#include <array>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

// All indices of `t`, each normalised against `dim` and range-checked.
std::vector<int64_t> read_indices(KernelContext& ctx, const RtTensor& t, int64_t dim,
                                  const char* what) {
  std::vector<int64_t> v = read_ints(ctx, t);
  for (int64_t& k : v) {
    DM_CHECK(ctx, k >= -dim && k < dim, what << " index " << k << " out of range for dim "
                                               << dim << " (indices " << shape_str(t.shape) << ")");
    if (k < 0) k += dim;
  }
  return v;
}

}  // namespace

FUSEOPT_KERNEL(CpuGather, "", "Gather", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx_t = *ctx.host_input(1);
  DM_CHECK(ctx, x.rank() >= 1, "data must have rank >= 1, got a scalar");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), x.rank());
  const int64_t axis_dim = x.shape[axis];
  const std::vector<int64_t> idx = read_indices(ctx, idx_t, axis_dim, "Gather");

  std::vector<int64_t> out_shape(x.shape.begin(), x.shape.begin() + axis);
  out_shape.insert(out_shape.end(), idx_t.shape.begin(), idx_t.shape.end());
  out_shape.insert(out_shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);

  const size_t es = elem_size(ctx, x.dtype);
  const int64_t outer = prod(x.shape, 0, axis);
  const int64_t inner = prod(x.shape, axis + 1, x.rank());
  const int64_t n = static_cast<int64_t>(idx.size());
  const size_t run = static_cast<size_t>(inner) * es;
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      copy_bytes(dst + (o * n + j) * run, src + (o * axis_dim + idx[j]) * run, run);
}

FUSEOPT_KERNEL(CpuGatherElements, "", "GatherElements", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx_t = req_input(ctx, 1);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1 && idx_t.rank() == x.rank(),
           "data " << shape_str(x.shape) << " and indices " << shape_str(idx_t.shape)
                   << " must have the same rank >= 1");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    DM_CHECK(ctx, d == axis || idx_t.shape[d] <= x.shape[d],
             "indices " << shape_str(idx_t.shape) << " exceed data " << shape_str(x.shape)
                        << " on axis " << d);
  const std::vector<int64_t> idx = read_indices(ctx, idx_t, x.shape[axis], "GatherElements");
  RtTensor* y = ctx.output(0, x.dtype, idx_t.shape);

  // Walk the output; the data offset is the output position with the axis
  // coordinate replaced by the index.
  std::vector<int64_t> data_strides = dense_strides(x.shape);
  const int64_t axis_stride = data_strides[axis];
  data_strides[axis] = 0;
  const size_t es = elem_size(ctx, x.dtype);
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  cpu::for_each_broadcast<1>(idx_t.shape, {data_strides}, [&](int64_t o, const auto& off) {
    std::memcpy(dst + o * es, src + (off[0] + idx[o] * axis_stride) * es, es);
  });
}

FUSEOPT_KERNEL(CpuGatherND, "", "GatherND", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx_t = *ctx.host_input(1);
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t q = static_cast<int64_t>(idx_t.rank());
  const int64_t b = ctx.node().attr_int("batch_dims", 0);
  DM_CHECK(ctx, q >= 1 && r >= 1, "data and indices must have rank >= 1");
  const int64_t k = idx_t.shape[q - 1];
  DM_CHECK(ctx, b >= 0 && b < q && b < r && b + k <= r,
           "batch_dims " << b << " and index depth " << k << " do not fit data "
                         << shape_str(x.shape) << " and indices " << shape_str(idx_t.shape));
  for (int64_t d = 0; d < b; ++d)
    DM_CHECK(ctx, idx_t.shape[d] == x.shape[d],
             "batch dims of data " << shape_str(x.shape) << " and indices "
                                   << shape_str(idx_t.shape) << " differ");

  std::vector<int64_t> out_shape(idx_t.shape.begin(), idx_t.shape.end() - 1);
  out_shape.insert(out_shape.end(), x.shape.begin() + b + k, x.shape.end());
  RtTensor* y = ctx.output(0, x.dtype, out_shape);

  const std::vector<int64_t> idx = read_ints(ctx, idx_t);
  const std::vector<int64_t> strides = dense_strides(x.shape);
  const int64_t batches = prod(x.shape, 0, b);
  const int64_t per_batch = prod(idx_t.shape, b, q - 1);
  const int64_t batch_stride = prod(x.shape, b, r);
  const int64_t inner = prod(x.shape, b + k, r);
  const size_t es = elem_size(ctx, x.dtype);
  const size_t run = static_cast<size_t>(inner) * es;
  const auto* src = static_cast<const uint8_t*>(x.data);
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t j = 0; j < per_batch; ++j) {
      const int64_t tuple = (bi * per_batch + j) * k;
      int64_t offset = bi * batch_stride;
      for (int64_t t = 0; t < k; ++t) {
        const int64_t dim = x.shape[b + t];
        int64_t v = idx[tuple + t];
        DM_CHECK(ctx, v >= -dim && v < dim, "GatherND index " << v << " out of range for dim "
                                                              << dim << " of data "
                                                              << shape_str(x.shape));
        if (v < 0) v += dim;
        offset += v * strides[b + t];
      }
      copy_bytes(dst + (bi * per_batch + j) * run, src + offset * es, run);
    }
  }
}

}  // namespace fuseopt
