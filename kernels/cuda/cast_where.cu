// Cast (every pair of the supported dtypes) and Where (3-way broadcast; the
// selected values are moved as raw bytes, so every dtype works).
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T> constexpr bool is_16bit_float = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Cast semantics as the CPU backend: to bool is != 0; float NaN to an
// integer gives 0; 16-bit floats go through fp32.
template <class D, class S> __device__ __forceinline__ D convert(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else {
    using V = std::conditional_t<is_16bit_float<S>, float, std::conditional_t<std::is_same_v<S, bool>, int, S>>;
    V v;
    if constexpr (std::is_same_v<S, __half>) v = __half2float(s);
    else if constexpr (std::is_same_v<S, __nv_bfloat16>) v = __bfloat162float(s);
    else v = static_cast<V>(s);
    if constexpr (std::is_same_v<D, bool>) {
      return v != V(0);
    } else if constexpr (std::is_same_v<D, __half>) {
      return __float2half_rn(static_cast<float>(v));
    } else if constexpr (std::is_same_v<D, __nv_bfloat16>) {
      return __float2bfloat16_rn(static_cast<float>(v));
    } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<V>) {
      return v != v ? D(0) : static_cast<D>(v);
    } else {
      return static_cast<D>(v);
    }
  }
}

template <class D, class S> __global__ void cast_kernel(const S* __restrict__ x, D* __restrict__ y, int64_t n) {
  CUDA_GRID_STRIDE(i, n) { y[i] = convert<D>(x[i]); }
}

// Cast's types: every data dtype (dispatch_all) plus double and int16.
template <class F> void dispatch_cast(KernelContext& ctx, DType t, F&& f) {
  if (t == DType::Double) return f(Tag<double>{});
  if (t == DType::Int16) return f(Tag<int16_t>{});
  dispatch_all(ctx, t, std::forward<F>(f));
}

FUSEOPT_KERNEL(CudaCast, "", "Cast", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, ctx.node().has_attr("to"), "needs attribute 'to'");
  const DType to = static_cast<DType>(ctx.node().attr_int("to", 0));
  if (to == x.dtype) {  // a no-op cast is a view
    ctx.alias_output(0, 0, x.shape);
    return;
  }
  RtTensor* y = ctx.output(0, to, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_cast(ctx, x.dtype, [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch_cast(ctx, to, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      cast_kernel<D, S><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<S>(), y->ptr<D>(), n);
    });
  });
  check_launch(ctx);
}

// CastLike: the target dtype is the second input's.
FUSEOPT_KERNEL(CudaCastLike, "", "CastLike", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const DType to = req_input(ctx, 1).dtype;
  if (to == x.dtype) {
    ctx.alias_output(0, 0, x.shape);
    return;
  }
  RtTensor* y = ctx.output(0, to, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_cast(ctx, x.dtype, [&](auto stag) {
    using S = typename decltype(stag)::type;
    dispatch_cast(ctx, to, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      cast_kernel<D, S><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<S>(), y->ptr<D>(), n);
    });
  });
  check_launch(ctx);
}

template <class T>
__global__ void where_kernel(const bool* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ y, int64_t n, BcastIndex<3> ix) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t off[3];
    ix.offsets(i, off);
    y[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

FUSEOPT_KERNEL(CudaWhere, "", "Where", Backend::CUDA, {}) {
  const RtTensor& c = req_input(ctx, 0);
  const RtTensor& a = req_input(ctx, 1);
  const RtTensor& b = req_input(ctx, 2);
  DM_CHECK(ctx, c.dtype == DType::Bool, "condition must be bool, got " << dtype_name(c.dtype));
  DM_CHECK(ctx, a.dtype == b.dtype, "X and Y dtypes differ: " << dtype_name(a.dtype) << " vs " << dtype_name(b.dtype));
  const std::vector<int64_t> out_shape = broadcast_shape({c.shape, a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, a.dtype, out_shape);
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  auto ix = make_index<3>(ctx, out_shape,
                          {broadcast_strides(c.shape, out_shape), broadcast_strides(a.shape, out_shape),
                           broadcast_strides(b.shape, out_shape)});
  dispatch_bytes(ctx, a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    where_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(c.ptr<bool>(), a.ptr<T>(), b.ptr<T>(), y->ptr<T>(), n, ix);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
