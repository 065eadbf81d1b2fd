// Where, comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual),
// boolean logic (And, Or, Xor, Not) and IsNaN. Binary ones broadcast like
// numpy; comparisons of fp16/bf16 compare the float values.
#include <array>
#include <cmath>
#include <functional>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

// out[i] = op(a[..], b[..]) over the broadcast shape, bool output.
template <class Op>
void compare(KernelContext& ctx, Op op) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  DM_CHECK(ctx, a.dtype == b.dtype, "inputs differ in dtype: " << dtype_name(a.dtype) << " vs "
                                                               << dtype_name(b.dtype));
  const std::vector<int64_t> out_shape = cpu::broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, DType::Bool, out_shape);
  bool* out = y->ptr<bool>();
  const std::array<std::vector<int64_t>, 2> strides{cpu::broadcast_strides(a.shape, out_shape),
                                                    cpu::broadcast_strides(b.shape, out_shape)};
  visit_dtype(a.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = a.template ptr<T>();
    const T* pb = b.template ptr<T>();
    cpu::for_each_broadcast<2>(out_shape, strides, [&](int64_t o, const auto& off) {
      out[o] = op(value_of(pa[off[0]]), value_of(pb[off[1]]));
    });
  });
}

template <class Op>
void logic(KernelContext& ctx, Op op) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  DM_CHECK(ctx, a.dtype == DType::Bool && b.dtype == DType::Bool,
           "inputs must be bool, got " << dtype_name(a.dtype) << " and " << dtype_name(b.dtype));
  const std::vector<int64_t> out_shape = cpu::broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, DType::Bool, out_shape);
  bool* out = y->ptr<bool>();
  const bool* pa = a.ptr<bool>();
  const bool* pb = b.ptr<bool>();
  cpu::for_each_broadcast<2>(out_shape,
                             {cpu::broadcast_strides(a.shape, out_shape),
                              cpu::broadcast_strides(b.shape, out_shape)},
                             [&](int64_t o, const auto& off) { out[o] = op(pa[off[0]], pb[off[1]]); });
}

template <class E>
void where_typed(const bool* c, const E* x, const E* yv, E* out, const std::vector<int64_t>& shape,
                 const std::array<std::vector<int64_t>, 3>& strides) {
  cpu::for_each_broadcast<3>(shape, strides, [&](int64_t o, const auto& off) {
    out[o] = c[off[0]] ? x[off[1]] : yv[off[2]];
  });
}

}  // namespace

FUSEOPT_KERNEL(CpuWhere, "", "Where", Backend::CPU, {}) {
  const RtTensor& c = req_input(ctx, 0);
  const RtTensor& x = req_input(ctx, 1);
  const RtTensor& yv = req_input(ctx, 2);
  DM_CHECK(ctx, c.dtype == DType::Bool, "condition must be bool, got " << dtype_name(c.dtype));
  DM_CHECK(ctx, x.dtype == yv.dtype, "X and Y differ in dtype: " << dtype_name(x.dtype) << " vs "
                                                                 << dtype_name(yv.dtype));
  const std::vector<int64_t> out_shape =
      cpu::broadcast_shape({c.shape, x.shape, yv.shape}, ctx.node());
  RtTensor* out = ctx.output(0, x.dtype, out_shape);
  const std::array<std::vector<int64_t>, 3> strides{cpu::broadcast_strides(c.shape, out_shape),
                                                    cpu::broadcast_strides(x.shape, out_shape),
                                                    cpu::broadcast_strides(yv.shape, out_shape)};
  const bool* pc = c.ptr<bool>();
  switch (elem_size(ctx, x.dtype)) {
    case 1: return where_typed(pc, x.ptr<uint8_t>(), yv.ptr<uint8_t>(), out->ptr<uint8_t>(), out_shape, strides);
    case 2: return where_typed(pc, x.ptr<uint16_t>(), yv.ptr<uint16_t>(), out->ptr<uint16_t>(), out_shape, strides);
    case 4: return where_typed(pc, x.ptr<uint32_t>(), yv.ptr<uint32_t>(), out->ptr<uint32_t>(), out_shape, strides);
    case 8: return where_typed(pc, x.ptr<uint64_t>(), yv.ptr<uint64_t>(), out->ptr<uint64_t>(), out_shape, strides);
    default: DM_CHECK(ctx, false, "unsupported dtype " << dtype_name(x.dtype));
  }
}

FUSEOPT_KERNEL(CpuEqual, "", "Equal", Backend::CPU, {}) {
  compare(ctx, [](auto a, auto b) { return a == b; });
}
FUSEOPT_KERNEL(CpuLess, "", "Less", Backend::CPU, {}) {
  compare(ctx, [](auto a, auto b) { return a < b; });
}
FUSEOPT_KERNEL(CpuLessOrEqual, "", "LessOrEqual", Backend::CPU, {}) {
  compare(ctx, [](auto a, auto b) { return a <= b; });
}
FUSEOPT_KERNEL(CpuGreater, "", "Greater", Backend::CPU, {}) {
  compare(ctx, [](auto a, auto b) { return a > b; });
}
FUSEOPT_KERNEL(CpuGreaterOrEqual, "", "GreaterOrEqual", Backend::CPU, {}) {
  compare(ctx, [](auto a, auto b) { return a >= b; });
}

FUSEOPT_KERNEL(CpuAnd, "", "And", Backend::CPU, {}) {
  logic(ctx, [](bool a, bool b) { return a && b; });
}
FUSEOPT_KERNEL(CpuOr, "", "Or", Backend::CPU, {}) {
  logic(ctx, [](bool a, bool b) { return a || b; });
}
FUSEOPT_KERNEL(CpuXor, "", "Xor", Backend::CPU, {}) {
  logic(ctx, [](bool a, bool b) { return a != b; });
}

FUSEOPT_KERNEL(CpuNot, "", "Not", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.dtype == DType::Bool, "input must be bool, got " << dtype_name(x.dtype));
  RtTensor* y = ctx.output(0, DType::Bool, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) y->ptr<bool>()[i] = !x.ptr<bool>()[i];
}

FUSEOPT_KERNEL(CpuIsNaN, "", "IsNaN", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, dtype_is_float(x.dtype), "input must be a float type, got " << dtype_name(x.dtype));
  RtTensor* y = ctx.output(0, DType::Bool, x.shape);
  bool* out = y->ptr<bool>();
  visit_dtype(x.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.template ptr<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const auto v = value_of(p[i]);
      if constexpr (std::is_floating_point_v<decltype(v)>) out[i] = std::isnan(v);
      else out[i] = false;
    }
  });
}

}  // namespace fuseopt
