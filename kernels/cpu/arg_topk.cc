// ArgMax / ArgMin (axis, keepdims, select_last_index) and TopK (K input,
// axis, largest, sorted) on float, double, int64 and int32.
// Order of elements (shared with kernels/cuda/arg_topk.cu):
//  - ties go to the lower index (ArgMax/ArgMin with select_last_index = 1:
//    the higher index);
//  - NaN: ArgMax/ArgMin return the first NaN (numpy); TopK treats NaN as
//    larger than every number (first for largest = 1, last for largest = 0).
// TopK output is always sorted (a valid answer for sorted = 0 too).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

template <class T> bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// True when element (a, ia) comes before (b, ib) in the requested order.
template <class T> bool comes_before(T a, int64_t ia, T b, int64_t ib, bool largest, bool nan_first, bool last_index) {
  const bool na = is_nan(a), nb = is_nan(b);
  if (na || nb) {
    if (na && nb) return last_index ? ia > ib : ia < ib;
    return na == nan_first;
  }
  if (a != b) return largest ? a > b : a < b;
  return last_index ? ia > ib : ia < ib;
}

// Calls f(T tag) for the supported dtypes.
template <class F> void dispatch_sortable(KernelContext& ctx, DType dt, F&& f) {
  switch (dt) {
    case DType::Float: return f(float{});
    case DType::Double: return f(double{});
    case DType::Int64: return f(int64_t{});
    case DType::Int32: return f(int32_t{});
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(dt));
  }
}

void arg_reduce(KernelContext& ctx, bool largest) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  MATH_CHECK(ctx, x->rank() >= 1, "input must have rank >= 1");
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", 0), x->rank());
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  const int64_t outer = cpumath::prod(x->shape, 0, axis), n = x->shape[axis];
  const int64_t inner = cpumath::prod(x->shape, axis + 1, x->rank());
  MATH_CHECK(ctx, n > 0, "cannot reduce over an empty axis " << axis << " of " << shape_str(x->shape));
  std::vector<int64_t> shape = x->shape;
  if (keepdims) shape[axis] = 1;
  else shape.erase(shape.begin() + axis);
  int64_t* out = ctx.output(0, DType::Int64, shape)->ptr<int64_t>();
  dispatch_sortable(ctx, x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x->ptr<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* row = px + o * n * inner + i;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j)
          if (comes_before(row[j * inner], j, row[best * inner], best, largest, true, last)) best = j;
        out[o * inner + i] = best;
      }
  });
}

FUSEOPT_KERNEL(cpu_ArgMax, "", "ArgMax", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  arg_reduce(ctx, true);
}
FUSEOPT_KERNEL(cpu_ArgMin, "", "ArgMin", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  arg_reduce(ctx, false);
}

FUSEOPT_KERNEL(cpu_TopK, "", "TopK", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x && ctx.num_inputs() > 1 && ctx.input(1), "needs X and K");
  MATH_CHECK(ctx, x->rank() >= 1, "X must have rank >= 1");
  const RtTensor* kt = ctx.host_input(1);
  MATH_CHECK(ctx, kt->numel() == 1, "K must hold one value, got shape " << shape_str(kt->shape));
  const int64_t K = cpumath::read_ints(*kt)[0];
  const int64_t axis = cpumath::norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  const bool largest = ctx.node().attr_int("largest", 1) != 0;
  const int64_t outer = cpumath::prod(x->shape, 0, axis), n = x->shape[axis];
  const int64_t inner = cpumath::prod(x->shape, axis + 1, x->rank());
  MATH_CHECK(ctx, K >= 0 && K <= n, "K = " << K << " is outside [0, " << n << "] (axis " << axis << " of "
                                           << shape_str(x->shape) << ")");
  std::vector<int64_t> shape = x->shape;
  shape[axis] = K;
  RtTensor* values = ctx.output(0, x->dtype, shape);
  int64_t* indices = ctx.num_outputs() > 1 && ctx.node().output(1)
                         ? ctx.output(1, DType::Int64, shape)->ptr<int64_t>()
                         : static_cast<int64_t*>(ctx.scratch(static_cast<size_t>(std::max<int64_t>(1, outer * K * inner)) * 8));
  dispatch_sortable(ctx, x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x->ptr<T>();
    T* pv = values->ptr<T>();
    parallel_for(outer * inner, 1, [&](int64_t r0, int64_t r1) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t o = r / inner, i = r % inner;
        const T* row = px + o * n * inner + i;
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int64_t a, int64_t b) {
          return comes_before(row[a * inner], a, row[b * inner], b, largest, largest, false);
        });
        for (int64_t k = 0; k < K; ++k) {
          const int64_t dst = o * K * inner + k * inner + i;
          pv[dst] = row[order[k] * inner];
          indices[dst] = order[k];
        }
      }
    });
  });
}

}  // namespace
}  // namespace fuseopt
