// Softmax / LogSoftmax (opset 13 semantics: along one axis, max subtracted
// for stability; opset < 13 flattening when the Session marks the node)
// and the reductions ReduceMean/Sum/Max/Min/Prod/SumSquare/L2
// (axes as attribute or, opset 13+/18+, as input; keepdims;
// noop_with_empty_axes). Accumulation is in double for float sums so long
// rows do not drift.
#include <cmath>
#include <limits>

#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

using cpumath::norm_axis;
using cpumath::prod;

// View of `shape` around `axis` as [outer, n, inner].
struct AxisView {
  int64_t outer, n, inner;
};
AxisView around(const std::vector<int64_t>& shape, int64_t axis) {
  return {prod(shape, 0, axis), shape.empty() ? 1 : shape[axis], prod(shape, axis + 1, shape.size())};
}

void softmax_impl(KernelContext& ctx, bool log_form) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x && x->dtype == DType::Float, "expects a float32 input");
  int64_t axis = x->rank() == 0 ? 0 : norm_axis(ctx, ctx.node().attr_int("axis", -1), x->rank());
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  AxisView v = x->rank() == 0 ? AxisView{1, 1, 1} : around(x->shape, axis);
  // Opset < 13 (the Session marks such nodes): the input is seen as 2-D
  // [prod(dims before axis), prod(dims from axis)], normalised per row.
  if (ctx.node().attr_int("__fuseopt_softmax_2d", 0) != 0 && x->rank() > 0)
    v = AxisView{prod(x->shape, 0, axis), prod(x->shape, axis, x->rank()), 1};
  const float* in = x->ptr<float>();
  float* out = y->ptr<float>();
  parallel_for(v.outer * v.inner, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, v.n)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / v.inner, i = r % v.inner;
      const float* px = in + o * v.n * v.inner + i;
      float* py = out + o * v.n * v.inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < v.n; ++k) mx = std::max(mx, px[k * v.inner]);
      if (std::isinf(mx) && mx < 0) mx = 0;  // a row of -inf: exp gives 0s, sum 0 -> NaN as in ORT
      double sum = 0;
      for (int64_t k = 0; k < v.n; ++k) {
        float ex = std::exp(px[k * v.inner] - mx);
        if (!log_form) py[k * v.inner] = ex;
        sum += ex;
      }
      if (log_form) {
        float lse = static_cast<float>(std::log(sum));
        for (int64_t k = 0; k < v.n; ++k) py[k * v.inner] = px[k * v.inner] - mx - lse;
      } else {
        float inv = static_cast<float>(1.0 / sum);
        for (int64_t k = 0; k < v.n; ++k) py[k * v.inner] *= inv;
      }
    }
  });
}

FUSEOPT_KERNEL(cpu_Softmax, "", "Softmax", Backend::CPU, {DType::Float}) { softmax_impl(ctx, false); }
FUSEOPT_KERNEL(cpu_LogSoftmax, "", "LogSoftmax", Backend::CPU, {DType::Float}) { softmax_impl(ctx, true); }

// ---- reductions ---------------------------------------------------------------

enum class Red { Sum, Mean, Max, Min, Prod, SumSquare, L2, L1, LogSumExp };

template <class T>
void reduce_typed(KernelContext& ctx, Red kind, const RtTensor& x, const std::vector<bool>& reduced, bool keepdims) {
  const size_t rank = x.rank();
  std::vector<int64_t> out_shape, kept_shape;
  for (size_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (keepdims) out_shape.push_back(1);
    } else {
      out_shape.push_back(x.shape[d]);
    }
    kept_shape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  if (kind == Red::Max || kind == Red::Min)
    for (size_t d = 0; d < rank; ++d)
      MATH_CHECK(ctx, !reduced[d] || x.shape[d] > 0, "cannot take the max/min of an empty axis in " << shape_str(x.shape));
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t n_out = shape_numel(kept_shape);
  const int64_t n_red = n_out == 0 ? 0 : x.numel() / std::max<int64_t>(1, n_out);
  // Strides of x, split into kept dims (walk the output) and reduced dims.
  std::vector<int64_t> stride(rank, 1);
  for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) stride[d] = stride[d + 1] * x.shape[d + 1];
  std::vector<int64_t> red_dims, red_strides, keep_dims, keep_strides;
  for (size_t d = 0; d < rank; ++d) {
    if (reduced[d]) { red_dims.push_back(x.shape[d]); red_strides.push_back(stride[d]); }
    else { keep_dims.push_back(x.shape[d]); keep_strides.push_back(stride[d]); }
  }
  const T* in = x.ptr<T>();
  T* out = y->ptr<T>();
  // Fast path: the reduced axes are the trailing ones (LayerNorm-style rows).
  bool trailing = true;
  for (size_t d = 0, seen = 0; d < rank; ++d) {
    if (reduced[d]) seen = 1;
    else if (seen) trailing = false;
  }
  auto finish = [&](double acc) -> T {
    switch (kind) {
      case Red::Mean: return static_cast<T>(n_red ? acc / static_cast<double>(n_red) : std::nan(""));
      case Red::L2: return static_cast<T>(std::sqrt(acc));
      default: return static_cast<T>(acc);
    }
  };
  auto reduce_one = [&](int64_t o, auto&& element_at) {
    if (kind == Red::Max || kind == Red::Min) {
      T best = element_at(0);
      bool nan = false;
      for (int64_t r = 0; r < n_red; ++r) {
        T v = element_at(r);
        if constexpr (std::is_floating_point_v<T>) if (std::isnan(v)) nan = true;
        best = kind == Red::Max ? (v > best ? v : best) : (v < best ? v : best);
      }
      out[o] = nan ? static_cast<T>(std::numeric_limits<double>::quiet_NaN()) : best;
      return;
    }
    if (kind == Red::LogSumExp) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < n_red; ++r) mx = std::max(mx, static_cast<double>(element_at(r)));
      double s = 0;
      for (int64_t r = 0; r < n_red; ++r) s += std::exp(static_cast<double>(element_at(r)) - mx);
      out[o] = static_cast<T>(mx + std::log(s));
      return;
    }
    double acc = kind == Red::Prod ? 1.0 : 0.0;
    for (int64_t r = 0; r < n_red; ++r) {
      double v = static_cast<double>(element_at(r));
      switch (kind) {
        case Red::Prod: acc *= v; break;
        case Red::SumSquare: case Red::L2: acc += v * v; break;
        case Red::L1: acc += std::fabs(v); break;
        default: acc += v;
      }
    }
    out[o] = finish(acc);
  };
  if (trailing) {
    parallel_for(n_out, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, n_red)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) reduce_one(o, [&](int64_t r) { return in[o * n_red + r]; });
    });
    return;
  }
  // General case: multi-index walk over kept and reduced dims.
  auto offset_of = [](int64_t flat, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      off += (flat % dims[d]) * strides[d];
      flat /= dims[d];
    }
    return off;
  };
  std::vector<int64_t> red_offsets(static_cast<size_t>(n_red));
  for (int64_t r = 0; r < n_red; ++r) red_offsets[r] = offset_of(r, red_dims, red_strides);
  parallel_for(n_out, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, n_red)), [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      int64_t base = offset_of(o, keep_dims, keep_strides);
      reduce_one(o, [&](int64_t r) { return in[base + red_offsets[r]]; });
    }
  });
}

void reduce_impl(KernelContext& ctx, Red kind) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  const Node& n = ctx.node();
  std::vector<int64_t> axes;
  bool axes_given = false;
  if (ctx.num_inputs() > 1 && ctx.input(1)) {
    axes = cpumath::read_ints(*ctx.host_input(1));
    axes_given = true;
  } else if (n.has_attr("axes")) {
    axes = n.attr_ints("axes");
    axes_given = true;
  }
  bool keepdims = n.attr_int("keepdims", 1) != 0;
  bool noop_empty = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduced(x->rank(), false);
  if (axes.empty()) {
    if (noop_empty) {
      (void)axes_given;
      std::fill(reduced.begin(), reduced.end(), false);
    } else {
      std::fill(reduced.begin(), reduced.end(), true);
    }
  } else {
    for (int64_t a : axes) {
      int64_t d = norm_axis(ctx, a, x->rank());
      MATH_CHECK(ctx, !reduced[d], "axis " << a << " is given twice");
      reduced[d] = true;
    }
  }
  switch (x->dtype) {
    case DType::Float: return reduce_typed<float>(ctx, kind, *x, reduced, keepdims);
    case DType::Double: return reduce_typed<double>(ctx, kind, *x, reduced, keepdims);
    case DType::Int64: return reduce_typed<int64_t>(ctx, kind, *x, reduced, keepdims);
    case DType::Int32: return reduce_typed<int32_t>(ctx, kind, *x, reduced, keepdims);
    default: throw Error(n.label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}

#define REDUCE_KERNEL(NAME, KIND)                                                                          \
  FUSEOPT_KERNEL(cpu_##NAME, "", #NAME, Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) { \
    reduce_impl(ctx, Red::KIND);                                                                           \
  }
REDUCE_KERNEL(ReduceSum, Sum)
REDUCE_KERNEL(ReduceMean, Mean)
REDUCE_KERNEL(ReduceMax, Max)
REDUCE_KERNEL(ReduceMin, Min)
REDUCE_KERNEL(ReduceProd, Prod)
REDUCE_KERNEL(ReduceSumSquare, SumSquare)
REDUCE_KERNEL(ReduceL2, L2)
REDUCE_KERNEL(ReduceL1, L1)
REDUCE_KERNEL(ReduceLogSumExp, LogSumExp)

// ---- CumSum / CumProd (opset 26) ---------------------------------------------

template <class T, bool PROD>
void cumulate_typed(KernelContext& ctx, const RtTensor& x, int64_t axis, bool exclusive, bool reverse) {
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  AxisView v = x.rank() == 0 ? AxisView{1, 1, 1} : around(x.shape, axis);
  const T* in = x.ptr<T>();
  T* out = y->ptr<T>();
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t i = 0; i < v.inner; ++i) {
      const T* px = in + o * v.n * v.inner + i;
      T* py = out + o * v.n * v.inner + i;
      T acc = PROD ? T(1) : T(0);  // the exclusive first element: the identity
      for (int64_t s = 0; s < v.n; ++s) {
        int64_t k = reverse ? v.n - 1 - s : s;
        if (exclusive) py[k * v.inner] = acc;
        if constexpr (PROD) acc *= px[k * v.inner];
        else acc += px[k * v.inner];
        if (!exclusive) py[k * v.inner] = acc;
      }
    }
}

template <bool PROD>
void cumulate(KernelContext& ctx) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* a = ctx.num_inputs() > 1 ? ctx.host_input(1) : nullptr;
  MATH_CHECK(ctx, x && a, "needs x and axis");
  MATH_CHECK(ctx, a->numel() == 1, "axis must be a scalar, got shape " << shape_str(a->shape));
  int64_t axis = x->rank() == 0 ? 0 : norm_axis(ctx, cpumath::read_ints(*a)[0], x->rank());
  bool exclusive = ctx.node().attr_int("exclusive", 0) != 0, reverse = ctx.node().attr_int("reverse", 0) != 0;
  switch (x->dtype) {
    case DType::Float: return cumulate_typed<float, PROD>(ctx, *x, axis, exclusive, reverse);
    case DType::Double: return cumulate_typed<double, PROD>(ctx, *x, axis, exclusive, reverse);
    case DType::Int64: return cumulate_typed<int64_t, PROD>(ctx, *x, axis, exclusive, reverse);
    case DType::Int32: return cumulate_typed<int32_t, PROD>(ctx, *x, axis, exclusive, reverse);
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}

FUSEOPT_KERNEL(cpu_CumSum, "", "CumSum", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  cumulate<false>(ctx);
}

FUSEOPT_KERNEL(cpu_CumProd, "", "CumProd", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  cumulate<true>(ctx);
}

}  // namespace
}  // namespace fuseopt
