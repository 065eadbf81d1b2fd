// BitwiseAnd / BitwiseOr / BitwiseXor (numpy broadcasting), BitwiseNot
// (opset 18) and BitShift (opset 11, direction LEFT / RIGHT; unsigned
// types only, as ONNX defines it; shifts of the bit width or more give 0)
// on the integer types. The CUDA kernels (kernels/cuda/bitwise.cu) follow
// the same rules.
#include <array>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

template <class F> void visit_int(KernelContext& ctx, DType t, bool unsigned_only, F&& f) {
  switch (t) {
    case DType::UInt8: return f(uint8_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::UInt32: return f(uint32_t{});
    case DType::UInt64: return f(uint64_t{});
    default: break;
  }
  if (!unsigned_only) switch (t) {
      case DType::Int8: return f(int8_t{});
      case DType::Int16: return f(int16_t{});
      case DType::Int32: return f(int32_t{});
      case DType::Int64: return f(int64_t{});
      default: break;
    }
  throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(t) +
              (unsigned_only ? " (unsigned integers only)" : " (integers only)"));
}

// 0 And, 1 Or, 2 Xor, 3 shift left, 4 shift right.
template <class T> T apply_bits(int op, T a, T b) {
  constexpr int kBits = static_cast<int>(sizeof(T) * 8);
  switch (op) {
    case 0: return static_cast<T>(a & b);
    case 1: return static_cast<T>(a | b);
    case 2: return static_cast<T>(a ^ b);
    case 3: return b >= static_cast<T>(kBits) ? T(0) : static_cast<T>(a << b);
    default: return b >= static_cast<T>(kBits) ? T(0) : static_cast<T>(a >> b);
  }
}

void binary_bits(KernelContext& ctx, int op) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  MATH_CHECK(ctx, a && b, "needs two inputs");
  MATH_CHECK(ctx, a->dtype == b->dtype, "input dtypes differ: " << dtype_name(a->dtype) << " vs " << dtype_name(b->dtype));
  const std::vector<int64_t> shape = cpu::broadcast_shape({a->shape, b->shape}, ctx.node());
  RtTensor* y = ctx.output(0, a->dtype, shape);
  visit_int(ctx, a->dtype, op >= 3, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a->ptr<T>();
    const T* pb = b->ptr<T>();
    T* py = y->ptr<T>();
    std::array<std::vector<int64_t>, 2> st = {cpu::broadcast_strides(a->shape, shape),
                                              cpu::broadcast_strides(b->shape, shape)};
    cpu::for_each_broadcast<2>(shape, st, [&](int64_t o, const std::array<int64_t, 2>& off) {
      py[o] = apply_bits<T>(op, pa[off[0]], pb[off[1]]);
    });
  });
}

#define INTS {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}

FUSEOPT_KERNEL(cpu_BitwiseAnd, "", "BitwiseAnd", Backend::CPU, INTS) { binary_bits(ctx, 0); }
FUSEOPT_KERNEL(cpu_BitwiseOr, "", "BitwiseOr", Backend::CPU, INTS) { binary_bits(ctx, 1); }
FUSEOPT_KERNEL(cpu_BitwiseXor, "", "BitwiseXor", Backend::CPU, INTS) { binary_bits(ctx, 2); }
FUSEOPT_KERNEL(cpu_BitShift, "", "BitShift", Backend::CPU, INTS) {
  const std::string dir = ctx.node().attr_string("direction", "");
  MATH_CHECK(ctx, dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT, got '" << dir << "'");
  binary_bits(ctx, dir == "LEFT" ? 3 : 4);
}

FUSEOPT_KERNEL(cpu_BitwiseNot, "", "BitwiseNot", Backend::CPU, INTS) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  visit_int(ctx, x->dtype, false, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x->ptr<T>();
    T* py = y->ptr<T>();
    for (int64_t i = 0; i < x->numel(); ++i) py[i] = static_cast<T>(~px[i]);
  });
}

}  // namespace
}  // namespace fuseopt
