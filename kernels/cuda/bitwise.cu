// BitwiseAnd / Or / Xor / Not and BitShift on CUDA: grid-stride kernels with
// the broadcast index of cuda_common.cuh; same rules as the CPU reference
// (kernels/cpu/bitwise.cc): integer types only, BitShift on unsigned types,
// shifts of the bit width or more give 0.
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class F> void visit_int(KernelContext& ctx, DType t, bool unsigned_only, F&& f) {
  switch (t) {
    case DType::UInt8: return f(Tag<uint8_t>{});
    case DType::UInt16: return f(Tag<uint16_t>{});
    case DType::UInt32: return f(Tag<uint32_t>{});
    case DType::UInt64: return f(Tag<uint64_t>{});
    default: break;
  }
  if (!unsigned_only) switch (t) {
      case DType::Int8: return f(Tag<int8_t>{});
      case DType::Int16: return f(Tag<int16_t>{});
      case DType::Int32: return f(Tag<int32_t>{});
      case DType::Int64: return f(Tag<int64_t>{});
      default: break;
    }
  throw Error(unsupported(ctx, t));
}

template <class T, int OP>
__global__ void bits_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n,
                            BcastIndex<2> ix, bool linear) {
  constexpr int kBits = static_cast<int>(sizeof(T) * 8);
  CUDA_GRID_STRIDE(i, n) {
    int64_t off[2] = {i, i};
    if (!linear) ix.offsets(i, off);
    const T x = a[off[0]], s = b[off[1]];
    T r;
    if constexpr (OP == 0) r = static_cast<T>(x & s);
    else if constexpr (OP == 1) r = static_cast<T>(x | s);
    else if constexpr (OP == 2) r = static_cast<T>(x ^ s);
    else if constexpr (OP == 3) r = s >= static_cast<T>(kBits) ? T(0) : static_cast<T>(x << s);
    else r = s >= static_cast<T>(kBits) ? T(0) : static_cast<T>(x >> s);
    y[i] = r;
  }
}

template <int OP> void run_bits(KernelContext& ctx) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  DM_CHECK(ctx, a.dtype == b.dtype, "input dtypes differ: " << dtype_name(a.dtype) << " vs " << dtype_name(b.dtype));
  const std::vector<int64_t> shape = broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, a.dtype, shape);
  const int64_t n = shape_numel(shape);
  if (!n) return;
  const bool linear = a.numel() == n && b.numel() == n;
  BcastIndex<2> ix{};
  if (!linear) ix = make_index<2>(ctx, shape, {broadcast_strides(a.shape, shape), broadcast_strides(b.shape, shape)});
  visit_int(ctx, a.dtype, OP >= 3, [&](auto tag) {
    using T = typename decltype(tag)::type;
    bits_kernel<T, OP><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a.ptr<T>(), b.ptr<T>(), y->ptr<T>(), n, ix, linear);
  });
  check_launch(ctx);
}

template <class T> __global__ void not_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  CUDA_GRID_STRIDE(i, n) { y[i] = static_cast<T>(~x[i]); }
}

#define INTS {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64}

FUSEOPT_KERNEL(CudaBitwiseAnd, "", "BitwiseAnd", Backend::CUDA, INTS) { run_bits<0>(ctx); }
FUSEOPT_KERNEL(CudaBitwiseOr, "", "BitwiseOr", Backend::CUDA, INTS) { run_bits<1>(ctx); }
FUSEOPT_KERNEL(CudaBitwiseXor, "", "BitwiseXor", Backend::CUDA, INTS) { run_bits<2>(ctx); }
FUSEOPT_KERNEL(CudaBitShift, "", "BitShift", Backend::CUDA, INTS) {
  const std::string dir = ctx.node().attr_string("direction", "");
  DM_CHECK(ctx, dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT, got '" << dir << "'");
  if (dir == "LEFT") run_bits<3>(ctx);
  else run_bits<4>(ctx);
}
FUSEOPT_KERNEL(CudaBitwiseNot, "", "BitwiseNot", Backend::CUDA, INTS) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (!n) return;
  visit_int(ctx, x.dtype, false, [&](auto tag) {
    using T = typename decltype(tag)::type;
    not_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), n);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
