// Elementwise binary and variadic ops with numpy broadcasting on the GPU:
// arithmetic (Add Sub Mul Div Pow Mod PRelu), Max/Min/Sum/Mean (variadic,
// folded pairwise into the output), comparisons and logic (bool outputs).
// Same-shape operands take a linear path; everything else walks a merged,
// broadcast index (see make_index).
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

enum class Bin { Add, Sub, Mul, Div, Mod, FMod, Max, Min, PRelu, Eq, Lt, Le, Gt, Ge, And, Or, Xor };

template <Bin OP, class C> __device__ __forceinline__ auto apply_bin(C a, C b) {
  if constexpr (OP == Bin::Add) return C(a + b);
  if constexpr (OP == Bin::Sub) return C(a - b);
  if constexpr (OP == Bin::Mul) return C(a * b);
  if constexpr (OP == Bin::Div) {
    if constexpr (std::is_integral_v<C>) return b == C(0) ? C(0) : C(a / b);  // no trap on the GPU; 0 by choice
    else return C(a / b);
  }
  if constexpr (OP == Bin::FMod) {
    if constexpr (std::is_integral_v<C>) return b == C(0) ? C(0) : C(a % b);
    else return C(fmod(a, b));
  }
  if constexpr (OP == Bin::Mod) {  // result takes the divisor's sign (Python)
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) return C(0);
      C r = a % b;
      if constexpr (std::is_signed_v<C>)
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      C r = fmod(a, b);
      if (r != C(0) && ((r < C(0)) != (b < C(0)))) r += b;
      return r;
    }
  }
  // NaN propagates through Max/Min (as ONNX Runtime and the CPU backend).
  if constexpr (OP == Bin::Max) return a != a ? a : (b != b ? b : (a < b ? b : a));
  if constexpr (OP == Bin::Min) return a != a ? a : (b != b ? b : (b < a ? b : a));
  if constexpr (OP == Bin::PRelu) return a < C(0) ? C(a * b) : a;
  if constexpr (OP == Bin::Eq) return a == b;
  if constexpr (OP == Bin::Lt) return a < b;
  if constexpr (OP == Bin::Le) return a <= b;
  if constexpr (OP == Bin::Gt) return a > b;
  if constexpr (OP == Bin::Ge) return a >= b;
  if constexpr (OP == Bin::And) return bool(a) && bool(b);
  if constexpr (OP == Bin::Or) return bool(a) || bool(b);
  if constexpr (OP == Bin::Xor) return bool(a) != bool(b);
}

constexpr bool is_compare(Bin op) { return op >= Bin::Eq; }

template <class T, class O, Bin OP, bool LINEAR>
__global__ void binary_kernel(const T* a, const T* b, O* y, int64_t n,  // y may be a (variadic fold)
                              BcastIndex<2> ix) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t ia = i, ib = i;
    if constexpr (!LINEAR) {
      int64_t off[2];
      ix.offsets(i, off);
      ia = off[0];
      ib = off[1];
    }
    const auto r = apply_bin<OP>(load_c(a[ia]), load_c(b[ib]));
    if constexpr (is_compare(OP)) y[i] = r;
    else y[i] = store_c<O>(r);
  }
}

// y = a OP b over the broadcast of the two shapes into `out_shape`.
template <Bin OP, class T>
void launch_binary(KernelContext& ctx, const T* a, const std::vector<int64_t>& as, const T* b,
                   const std::vector<int64_t>& bs, void* y, const std::vector<int64_t>& out_shape) {
  using O = std::conditional_t<is_compare(OP), bool, T>;
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  const bool linear = shape_numel(as) == n && shape_numel(bs) == n;
  BcastIndex<2> ix{};
  if (!linear) ix = make_index<2>(ctx, out_shape, {broadcast_strides(as, out_shape), broadcast_strides(bs, out_shape)});
  if (linear)
    binary_kernel<T, O, OP, true><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a, b, static_cast<O*>(y), n, ix);
  else
    binary_kernel<T, O, OP, false><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a, b, static_cast<O*>(y), n, ix);
  check_launch(ctx);
}

template <Bin OP, int KINDS> void run_binary(KernelContext& ctx) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  DM_CHECK(ctx, a.dtype == b.dtype, "input dtypes differ: " << dtype_name(a.dtype) << " vs " << dtype_name(b.dtype));
  const std::vector<int64_t> out_shape = broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, is_compare(OP) ? DType::Bool : a.dtype, out_shape);
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_binary<OP, T>(ctx, a.ptr<T>(), a.shape, b.ptr<T>(), b.shape, y->data, out_shape);
  };
  if constexpr (KINDS == 0) dispatch_float(ctx, a.dtype, go);
  else if constexpr (KINDS == 1) dispatch_numeric(ctx, a.dtype, go);
  else dispatch_all(ctx, a.dtype, go);
}

#define FLOATS {DType::Float, DType::Float16, DType::BFloat16}
#define NUMS {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Int8, DType::UInt8}
#define ALL {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Int8, DType::UInt8, DType::Bool}

FUSEOPT_KERNEL(CudaAdd, "", "Add", Backend::CUDA, NUMS) { run_binary<Bin::Add, 1>(ctx); }
FUSEOPT_KERNEL(CudaSub, "", "Sub", Backend::CUDA, NUMS) { run_binary<Bin::Sub, 1>(ctx); }
FUSEOPT_KERNEL(CudaMul, "", "Mul", Backend::CUDA, NUMS) { run_binary<Bin::Mul, 1>(ctx); }
FUSEOPT_KERNEL(CudaDiv, "", "Div", Backend::CUDA, NUMS) { run_binary<Bin::Div, 1>(ctx); }
FUSEOPT_KERNEL(CudaPRelu, "", "PRelu", Backend::CUDA, FLOATS) { run_binary<Bin::PRelu, 0>(ctx); }
FUSEOPT_KERNEL(CudaMod, "", "Mod", Backend::CUDA, NUMS) {
  if (ctx.node().attr_int("fmod", 0) != 0)
    run_binary<Bin::FMod, 1>(ctx);
  else
    run_binary<Bin::Mod, 1>(ctx);
}
FUSEOPT_KERNEL(CudaEqual, "", "Equal", Backend::CUDA, ALL) { run_binary<Bin::Eq, 2>(ctx); }
FUSEOPT_KERNEL(CudaLess, "", "Less", Backend::CUDA, NUMS) { run_binary<Bin::Lt, 1>(ctx); }
FUSEOPT_KERNEL(CudaLessOrEqual, "", "LessOrEqual", Backend::CUDA, NUMS) { run_binary<Bin::Le, 1>(ctx); }
FUSEOPT_KERNEL(CudaGreater, "", "Greater", Backend::CUDA, NUMS) { run_binary<Bin::Gt, 1>(ctx); }
FUSEOPT_KERNEL(CudaGreaterOrEqual, "", "GreaterOrEqual", Backend::CUDA, NUMS) { run_binary<Bin::Ge, 1>(ctx); }

void run_logic(KernelContext& ctx, Bin op) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  DM_CHECK(ctx, a.dtype == DType::Bool && b.dtype == DType::Bool,
           "expects bool inputs, got " << dtype_name(a.dtype) << " and " << dtype_name(b.dtype));
  const std::vector<int64_t> out_shape = broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, DType::Bool, out_shape);
  if (op == Bin::And) launch_binary<Bin::And, bool>(ctx, a.ptr<bool>(), a.shape, b.ptr<bool>(), b.shape, y->data, out_shape);
  if (op == Bin::Or) launch_binary<Bin::Or, bool>(ctx, a.ptr<bool>(), a.shape, b.ptr<bool>(), b.shape, y->data, out_shape);
  if (op == Bin::Xor) launch_binary<Bin::Xor, bool>(ctx, a.ptr<bool>(), a.shape, b.ptr<bool>(), b.shape, y->data, out_shape);
}
FUSEOPT_KERNEL(CudaAnd, "", "And", Backend::CUDA, {DType::Bool}) { run_logic(ctx, Bin::And); }
FUSEOPT_KERNEL(CudaOr, "", "Or", Backend::CUDA, {DType::Bool}) { run_logic(ctx, Bin::Or); }
FUSEOPT_KERNEL(CudaXor, "", "Xor", Backend::CUDA, {DType::Bool}) { run_logic(ctx, Bin::Xor); }

// ---- Pow: the exponent may have its own dtype -------------------------------
template <class T, class E, bool LINEAR>
__global__ void pow_kernel(const T* __restrict__ a, const E* __restrict__ b, T* __restrict__ y, int64_t n,
                           BcastIndex<2> ix) {
  using C = compute_t<T>;
  CUDA_GRID_STRIDE(i, n) {
    int64_t ia = i, ib = i;
    if constexpr (!LINEAR) {
      int64_t off[2];
      ix.offsets(i, off);
      ia = off[0];
      ib = off[1];
    }
    if constexpr (std::is_integral_v<T>) {
      // Integer base: the exponent is converted to the base type first, as the CPU reference does.
      const double e = static_cast<double>(static_cast<T>(to_double(b[ib])));
      y[i] = static_cast<T>(llround(pow(static_cast<double>(a[ia]), e)));
      continue;
    }
    const C x = load_c(a[ia]);
    const C e = static_cast<C>(to_double(b[ib]));
    C r;
    // Exact for the exponents exporters write (x*x for x^2, as the CPU does).
    if (e == C(2)) r = x * x;
    else if (e == C(1)) r = x;
    else if (e == C(3)) r = x * x * x;
    else if (e == C(0.5)) r = sqrt(x);
    else r = pow(x, e);
    y[i] = store_c<T>(r);
  }
}

FUSEOPT_KERNEL(CudaPow, "", "Pow", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32}) {
  const RtTensor& a = req_input(ctx, 0);
  const RtTensor& b = req_input(ctx, 1);
  const std::vector<int64_t> out_shape = broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, a.dtype, out_shape);
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  const bool linear = a.numel() == n && b.numel() == n;
  BcastIndex<2> ix{};
  if (!linear) ix = make_index<2>(ctx, out_shape, {broadcast_strides(a.shape, out_shape), broadcast_strides(b.shape, out_shape)});
  auto with_base = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto with_e = [&](auto etag) {
      using E = typename decltype(etag)::type;
      if (linear)
        pow_kernel<T, E, true><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a.ptr<T>(), b.ptr<E>(), y->ptr<T>(), n, ix);
      else
        pow_kernel<T, E, false><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(a.ptr<T>(), b.ptr<E>(), y->ptr<T>(), n, ix);
    };
    switch (b.dtype) {
      case DType::Float: with_e(Tag<float>{}); break;
      case DType::Float16: with_e(Tag<__half>{}); break;
      case DType::BFloat16: with_e(Tag<__nv_bfloat16>{}); break;
      case DType::Double: with_e(Tag<double>{}); break;
      case DType::Int64: with_e(Tag<int64_t>{}); break;
      case DType::Int32: with_e(Tag<int32_t>{}); break;
      default: throw Error(unsupported(ctx, b.dtype));
    }
  };
  switch (a.dtype) {
    case DType::Int64: with_base(Tag<int64_t>{}); break;
    case DType::Int32: with_base(Tag<int32_t>{}); break;
    default: dispatch_float(ctx, a.dtype, with_base);
  }
  check_launch(ctx);
}

// ---- variadic Max/Min/Sum/Mean ---------------------------------------------
template <class T> __global__ void scale_kernel(T* y, int64_t n, float s) {
  CUDA_GRID_STRIDE(i, n) { y[i] = store_c<T>(static_cast<compute_t<T>>(load_c(y[i]) * s)); }
}
template <class T> __global__ void bcast_copy_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, BcastIndex<1> ix) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t off[1];
    ix.offsets(i, off);
    y[i] = x[off[0]];
  }
}

template <Bin OP> void run_variadic(KernelContext& ctx, bool mean) {
  std::vector<const RtTensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (const RtTensor* t = ctx.input(i)) ins.push_back(t);
  DM_CHECK(ctx, !ins.empty(), "needs at least one input");
  std::vector<std::vector<int64_t>> shapes;
  for (const RtTensor* t : ins) {
    DM_CHECK(ctx, t->dtype == ins[0]->dtype, "input dtypes differ: " << dtype_name(ins[0]->dtype) << " vs "
                                                                     << dtype_name(t->dtype));
    shapes.push_back(t->shape);
  }
  const std::vector<int64_t> out_shape = broadcast_shape(shapes, ctx.node());
  RtTensor* y = ctx.output(0, ins[0]->dtype, out_shape);
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  dispatch_numeric(ctx, ins[0]->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (ins.size() == 1) {
      auto ix = make_index<1>(ctx, out_shape, {broadcast_strides(ins[0]->shape, out_shape)});
      bcast_copy_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(ins[0]->ptr<T>(), y->ptr<T>(), n, ix);
      check_launch(ctx);
    } else {
      launch_binary<OP, T>(ctx, ins[0]->ptr<T>(), ins[0]->shape, ins[1]->ptr<T>(), ins[1]->shape, y->data, out_shape);
      for (size_t k = 2; k < ins.size(); ++k)
        launch_binary<OP, T>(ctx, y->ptr<T>(), out_shape, ins[k]->ptr<T>(), ins[k]->shape, y->data, out_shape);
    }
    if (mean) {
      if constexpr (std::is_floating_point_v<compute_t<T>>) {
        scale_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(y->ptr<T>(), n, 1.0f / ins.size());
        check_launch(ctx);
      } else {
        throw Error(ctx.node().label() + ": Mean needs a float dtype");
      }
    }
  });
}

FUSEOPT_KERNEL(CudaMax, "", "Max", Backend::CUDA, NUMS) { run_variadic<Bin::Max>(ctx, false); }
FUSEOPT_KERNEL(CudaMin, "", "Min", Backend::CUDA, NUMS) { run_variadic<Bin::Min>(ctx, false); }
FUSEOPT_KERNEL(CudaSum, "", "Sum", Backend::CUDA, NUMS) { run_variadic<Bin::Add>(ctx, false); }
FUSEOPT_KERNEL(CudaMean, "", "Mean", Backend::CUDA, FLOATS) { run_variadic<Bin::Add>(ctx, true); }

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
