// Small generators and views on the GPU: Trilu, CumSum, CumProd, Range,
// ConstantOfShape, Shape, Size, Dropout (inference) and the pure view ops.
// Values that come from the host (shapes, k, start/delta) are passed to the
// kernels by value, so nothing is copied host-to-device inside a run.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common/op_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// ---- views: the CPU kernels only compute a shape and alias their input, so
// the same code serves the GPU (one definition of Reshape's rules).
KernelFn view_of(const char* op) {
  return [op](KernelContext& ctx) {
    const KernelInfo* k = find_kernel("", op, Backend::CPU, DType::Undefined);
    DM_CHECK(ctx, k, "no shape rule for " << op << " (CPU view kernel missing)");
    k->fn(ctx);
  };
}
KernelRegistrar reshape_reg(KernelInfo{"", "Reshape", Backend::CUDA, {}, view_of("Reshape")});
KernelRegistrar squeeze_reg(KernelInfo{"", "Squeeze", Backend::CUDA, {}, view_of("Squeeze")});
KernelRegistrar unsqueeze_reg(KernelInfo{"", "Unsqueeze", Backend::CUDA, {}, view_of("Unsqueeze")});
KernelRegistrar flatten_reg(KernelInfo{"", "Flatten", Backend::CUDA, {}, view_of("Flatten")});
KernelRegistrar identity_reg(KernelInfo{"", "Identity", Backend::CUDA, {}, view_of("Identity")});

template <class E> __global__ void fill_kernel(E* __restrict__ y, int64_t n, E v) {
  CUDA_GRID_STRIDE(i, n) { y[i] = v; }
}

// Inference: Dropout is the identity; the optional mask says "kept".
FUSEOPT_KERNEL(CudaDropout, "", "Dropout", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  ctx.alias_output(0, 0, x.shape);
  if (!wants_output(ctx, 1)) return;
  DType mask_type = ctx.node().output(1)->dtype;
  if (mask_type == DType::Undefined) mask_type = DType::Bool;
  DM_CHECK(ctx, mask_type == DType::Bool, "mask output must be bool, not " << dtype_name(mask_type));
  RtTensor* mask = ctx.output(1, DType::Bool, x.shape);
  if (!mask->numel()) return;
  fill_kernel<uint8_t><<<grid_for(mask->numel()), kThreads, 0, stream_of(ctx)>>>(mask->ptr<uint8_t>(), mask->numel(), 1);
  check_launch(ctx);
}

// Up to kMaxDims int64 values written by one thread (Shape, Size).
__global__ void write_ints_kernel(int64_t* y, int n, I64s v) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    for (int i = 0; i < n; ++i) y[i] = v.v[i];
}

FUSEOPT_KERNEL(CudaShape, "", "Shape", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const dm::DimRange dims_range = dm::resolve_shape_range(ctx, rank);  // shared with the CPU reference kernel
  const int64_t start = dims_range.start, n = dims_range.count;
  RtTensor* y = ctx.output(0, DType::Int64, {n});
  if (!n) return;
  std::vector<int64_t> dims(x.shape.begin() + start, x.shape.begin() + start + n);
  write_ints_kernel<<<1, 32, 0, stream_of(ctx)>>>(y->ptr<int64_t>(), static_cast<int>(n), to_i64s(ctx, dims));
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaSize, "", "Size", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, DType::Int64, {});
  write_ints_kernel<<<1, 32, 0, stream_of(ctx)>>>(y->ptr<int64_t>(), 1, to_i64s(ctx, {x.numel()}));
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaConstantOfShape, "", "ConstantOfShape", Backend::CUDA, {}) {
  const dm::ConstantOfShapeParams p = dm::resolve_constant_of_shape(ctx);  // shared with the CPU reference kernel
  const std::vector<int64_t>& shape = p.shape;
  const Tensor& value = p.value;
  RtTensor* y = ctx.output(0, value.dtype, shape);
  const int64_t n = y->numel();
  if (!n) return;
  dispatch_bytes(ctx, value.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    E v;
    std::memcpy(&v, value.bytes.data(), sizeof(E));
    fill_kernel<E><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(y->ptr<E>(), n, v);
  });
  check_launch(ctx);
}

// ---- Range ----------------------------------------------------------------
template <class T> __global__ void range_kernel(T* __restrict__ y, int64_t n, T start, T delta) {
  CUDA_GRID_STRIDE(i, n) { y[i] = static_cast<T>(start + static_cast<T>(i) * delta); }
}
// float16 / bfloat16 (opset 27): computed in float and rounded once, as stash_type 1 (the
// default) asks; the CPU reference does the same for every stash_type.
template <class T> __global__ void range_kernel_f(T* __restrict__ y, int64_t n, float start, float delta) {
  CUDA_GRID_STRIDE(i, n) { y[i] = store_c<T>(static_cast<compute_t<T>>(start + static_cast<float>(i) * delta)); }
}

FUSEOPT_KERNEL(CudaRange, "", "Range", Backend::CUDA, {}) {
  const RtTensor* ts[3];
  for (int i = 0; i < 3; ++i) {
    DM_CHECK(ctx, opt_input(ctx, i), "missing input " << i);
    ts[i] = ctx.host_input(i);
    DM_CHECK(ctx, ts[i]->numel() == 1, "start, limit and delta must be scalars, got " << shape_str(ts[i]->shape));
    DM_CHECK(ctx, ts[i]->dtype == ts[0]->dtype, "start, limit and delta must share a dtype");
  }
  const DType dt = ts[0]->dtype;
  auto go = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T start = *ts[0]->ptr<T>(), limit = *ts[1]->ptr<T>(), delta = *ts[2]->ptr<T>();
    const int64_t n = dm::range_length<T>(ctx, start, limit, delta);  // shared with the CPU reference kernel
    RtTensor* y = ctx.output(0, dt, {n});
    if (n) range_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(y->ptr<T>(), n, start, delta);
  };
  switch (dt) {
    case DType::Float: go(Tag<float>{}); break;
    case DType::Double: go(Tag<double>{}); break;
    case DType::Int64: go(Tag<int64_t>{}); break;
    case DType::Int32: go(Tag<int32_t>{}); break;
    case DType::Int16: go(Tag<int16_t>{}); break;
    case DType::Float16:
    case DType::BFloat16: {
      float v[3];
      for (int i = 0; i < 3; ++i) {
        const uint16_t bits = *ts[i]->ptr<uint16_t>();
        v[i] = dt == DType::Float16 ? half_to_float(bits) : bf16_to_float(bits);
      }
      const int64_t n = dm::range_length<float>(ctx, v[0], v[1], v[2]);
      RtTensor* y = ctx.output(0, dt, {n});
      if (n && dt == DType::Float16) range_kernel_f<__half><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(y->ptr<__half>(), n, v[0], v[2]);
      if (n && dt == DType::BFloat16)
        range_kernel_f<__nv_bfloat16><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(y->ptr<__nv_bfloat16>(), n, v[0], v[2]);
      break;
    }
    default: throw Error(unsupported(ctx, dt));
  }
  check_launch(ctx);
}

// ---- Trilu ----------------------------------------------------------------
template <class E>
__global__ void trilu_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t n, int64_t rows, int64_t cols,
                             int64_t k, bool upper) {
  CUDA_GRID_STRIDE(i, n) {
    const int64_t j = i % cols, r = (i / cols) % rows;
    const bool keep = upper ? (j - r >= k) : (j - r <= k);
    y[i] = keep ? x[i] : E(0);
  }
}

FUSEOPT_KERNEL(CudaTrilu, "", "Trilu", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 2, "input must have rank >= 2, got " << shape_str(x.shape));
  int64_t k = 0;
  if (const RtTensor* kt = opt_host_input(ctx, 1)) {
    DM_CHECK(ctx, kt->numel() == 1, "k must be a scalar, got " << shape_str(kt->shape));
    k = dm::int_at(ctx, *kt, 0);
  }
  const bool upper = ctx.node().attr_int("upper", 1) != 0;
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (!n) return;
  const int64_t rows = x.shape[x.rank() - 2], cols = x.shape[x.rank() - 1];
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    trilu_kernel<E><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<E>(), y->ptr<E>(), n, rows, cols, k, upper);
  });
  check_launch(ctx);
}

// ---- CumSum / CumProd: one thread per (outer, inner) column walks the axis --
template <class T, bool PROD>
__global__ void cumulate_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t L, int64_t inner,
                              bool exclusive, bool reverse) {
  using A = std::conditional_t<std::is_integral_v<compute_t<T>>, compute_t<T>, float>;
  CUDA_GRID_STRIDE(c, outer * inner) {
    const int64_t o = c / inner, in = c - o * inner;
    const T* p = x + o * L * inner + in;
    T* q = y + o * L * inner + in;
    A acc = PROD ? A(1) : A(0);  // the exclusive first element: the identity
    for (int64_t s = 0; s < L; ++s) {
      const int64_t j = reverse ? L - 1 - s : s;
      const A v = static_cast<A>(load_c(p[j * inner]));
      if (exclusive) q[j * inner] = store_c<T>(static_cast<compute_t<T>>(acc));
      if constexpr (PROD) acc *= v;
      else acc += v;
      if (!exclusive) q[j * inner] = store_c<T>(static_cast<compute_t<T>>(acc));
    }
  }
}

template <bool PROD>
void cumulate(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* at = opt_host_input(ctx, 1);
  DM_CHECK(ctx, at && at->numel() == 1, "axis must be a scalar input");
  const int64_t rank = static_cast<int64_t>(x.rank());
  // A scalar is a one-element axis (as the CPU reference).
  const std::vector<int64_t> shape = rank == 0 ? std::vector<int64_t>{1} : x.shape;
  const int64_t axis = rank == 0 ? 0 : norm_axis(ctx, dm::int_at(ctx, *at, 0), rank);
  const bool exclusive = ctx.node().attr_int("exclusive", 0) != 0, reverse = ctx.node().attr_int("reverse", 0) != 0;
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (!x.numel()) return;
  const int64_t outer = dm::prod(shape, 0, axis), L = shape[axis], inner = dm::prod(shape, axis + 1, shape.size());
  dispatch_numeric(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumulate_kernel<T, PROD><<<grid_for(outer * inner), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), outer,
                                                                                       L, inner, exclusive, reverse);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaCumSum, "", "CumSum", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32}) {
  cumulate<false>(ctx);
}

FUSEOPT_KERNEL(CudaCumProd, "", "CumProd", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32}) {
  cumulate<true>(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
