// ScatterND and ScatterElements: copy `data`, then write `updates` at the
// indexed places, optionally combining with the old value (reduction
// add/mul/max/min, opsets 16 and 18). Writes happen in index order, so with
// duplicate indices and no reduction the last update wins.
#include <algorithm>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

enum class Reduction { None, Add, Mul, Max, Min };

Reduction read_reduction(KernelContext& ctx) {
  const std::string r = ctx.node().attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  DM_CHECK(ctx, false, "unknown reduction '" << r << "'");
  return Reduction::None;
}

// Applies `count` elements of `upd` onto `dst` with the reduction.
template <class T>
void combine(T* dst, const T* upd, int64_t count, Reduction red) {
  for (int64_t i = 0; i < count; ++i) {
    if (red == Reduction::None) { dst[i] = upd[i]; continue; }
    const auto a = value_of(dst[i]);
    const auto b = value_of(upd[i]);
    using V = std::remove_const_t<decltype(a)>;
    V r{};
    if constexpr (std::is_same_v<V, bool>) {
      switch (red) {
        case Reduction::Add: case Reduction::Max: r = a || b; break;
        default: r = a && b; break;
      }
    } else {
      switch (red) {
        case Reduction::Add: r = static_cast<V>(a + b); break;
        case Reduction::Mul: r = static_cast<V>(a * b); break;
        case Reduction::Max: r = std::max(a, b); break;
        default: r = std::min(a, b); break;
      }
    }
    dst[i] = convert<T>(r);
  }
}

}  // namespace

FUSEOPT_KERNEL(CpuScatterND, "", "ScatterND", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx_t = *ctx.host_input(1);
  const RtTensor& upd = req_input(ctx, 2);
  const Reduction red = read_reduction(ctx);
  const int64_t r = static_cast<int64_t>(x.rank());
  const int64_t q = static_cast<int64_t>(idx_t.rank());
  DM_CHECK(ctx, q >= 1, "indices must have rank >= 1");
  const int64_t k = idx_t.shape[q - 1];
  DM_CHECK(ctx, k <= r, "index depth " << k << " exceeds data rank " << r);
  std::vector<int64_t> want(idx_t.shape.begin(), idx_t.shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  DM_CHECK(ctx, upd.shape == want && upd.dtype == x.dtype,
           "updates " << shape_str(upd.shape) << " must have shape " << shape_str(want)
                      << " and the data's dtype (data " << shape_str(x.shape) << ", indices "
                      << shape_str(idx_t.shape) << ")");

  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  copy_bytes(y->data, x.data, x.nbytes());
  const std::vector<int64_t> idx = read_ints(ctx, idx_t);
  const std::vector<int64_t> strides = dense_strides(x.shape);
  const int64_t inner = prod(x.shape, k, r);
  const int64_t n = prod(idx_t.shape, 0, q - 1);
  visit_dtype(x.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y->template ptr<T>();
    const T* u = upd.template ptr<T>();
    for (int64_t j = 0; j < n; ++j) {
      int64_t offset = 0;
      for (int64_t t = 0; t < k; ++t) {
        int64_t v = idx[j * k + t];
        const int64_t dim = x.shape[t];
        DM_CHECK(ctx, v >= -dim && v < dim, "ScatterND index " << v << " out of range for dim "
                                                               << dim << " of data "
                                                               << shape_str(x.shape));
        if (v < 0) v += dim;
        offset += v * strides[t];
      }
      combine(out + offset, u + j * inner, inner, red);
    }
  });
}

FUSEOPT_KERNEL(CpuScatterElements, "", "ScatterElements", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& idx_t = *ctx.host_input(1);
  const RtTensor& upd = req_input(ctx, 2);
  const Reduction red = read_reduction(ctx);
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 1 && idx_t.shape == upd.shape && idx_t.rank() == x.rank() &&
                    upd.dtype == x.dtype,
           "indices " << shape_str(idx_t.shape) << " and updates " << shape_str(upd.shape)
                      << " must match and have the rank of data " << shape_str(x.shape));
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), rank);
  for (int64_t d = 0; d < rank; ++d)
    DM_CHECK(ctx, d == axis || idx_t.shape[d] <= x.shape[d],
             "indices " << shape_str(idx_t.shape) << " exceed data " << shape_str(x.shape)
                        << " on axis " << d);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  copy_bytes(y->data, x.data, x.nbytes());
  std::vector<int64_t> idx = read_ints(ctx, idx_t);
  const int64_t dim = x.shape[axis];
  for (int64_t& v : idx) {
    DM_CHECK(ctx, v >= -dim && v < dim, "ScatterElements index " << v << " out of range for dim "
                                                                 << dim << " of data "
                                                                 << shape_str(x.shape));
    if (v < 0) v += dim;
  }
  std::vector<int64_t> strides = dense_strides(x.shape);
  const int64_t axis_stride = strides[axis];
  strides[axis] = 0;
  visit_dtype(x.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = y->template ptr<T>();
    const T* u = upd.template ptr<T>();
    cpu::for_each_broadcast<1>(idx_t.shape, {strides}, [&](int64_t o, const auto& off) {
      combine(out + off[0] + idx[o] * axis_stride, u + o, 1, red);
    });
  });
}

}  // namespace fuseopt
