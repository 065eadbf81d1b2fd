// QuantizeLinear / DequantizeLinear on CUDA: elementwise, per tensor or per
// axis (kernels/common/quantize_params.h); float math as the CPU reference,
// round half to even (rintf), saturation to the integer type.
#include "kernels/common/quantize_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class F> void visit_qint(KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::Int8: return f(Tag<int8_t>{});
    case DType::UInt8: return f(Tag<uint8_t>{});
    case DType::Int16: return f(Tag<int16_t>{});
    case DType::UInt16: return f(Tag<uint16_t>{});
    case DType::Int32: return f(Tag<int32_t>{});
    default: throw Error(unsupported(ctx, t));
  }
}

template <class Q, class S>
__global__ void dequantize_kernel(const Q* __restrict__ x, const S* __restrict__ scale, const Q* __restrict__ zp,
                                  S* __restrict__ y, int64_t n, int64_t channels, int64_t inner) {
  CUDA_GRID_STRIDE(i, n) {
    const int64_t c = (i / inner) % channels;
    const float z = zp ? static_cast<float>(zp[c]) : 0.f;
    y[i] = store_c<S>(static_cast<compute_t<S>>((static_cast<float>(x[i]) - z) * float(load_c(scale[c]))));
  }
}

template <class T, class S, class Q>
__global__ void quantize_kernel(const T* __restrict__ x, const S* __restrict__ scale, const Q* __restrict__ zp,
                                Q* __restrict__ y, int64_t n, int64_t channels, int64_t inner, double lo, double hi) {
  CUDA_GRID_STRIDE(i, n) {
    const int64_t c = (i / inner) % channels;
    double v = static_cast<double>(rintf(float(load_c(x[i])) / float(load_c(scale[c])))) +
               (zp ? static_cast<double>(zp[c]) : 0.0);
    v = v != v ? 0.0 : fmin(fmax(v, lo), hi);
    y[i] = static_cast<Q>(v);
  }
}

FUSEOPT_KERNEL(CudaDequantizeLinear, "", "DequantizeLinear", Backend::CUDA,
               {DType::Int8, DType::UInt8, DType::Int16, DType::UInt16, DType::Int32}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& scale = req_input(ctx, 1);
  const RtTensor* zp = opt_input(ctx, 2);
  const dm::QuantParams p = dm::resolve_quant(ctx, x, scale, zp, false);
  RtTensor* y = ctx.output(0, scale.dtype, x.shape);  // float, or the run's 16-bit type
  if (!p.n) return;
  visit_qint(ctx, x.dtype, [&](auto qtag) {
    using Q = typename decltype(qtag)::type;
    dispatch_float(ctx, scale.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      dequantize_kernel<Q, S><<<grid_for(p.n), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<Q>(), scale.ptr<S>(), zp ? zp->ptr<Q>() : nullptr, y->ptr<S>(), p.n, p.channels, p.inner);
    });
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaQuantizeLinear, "", "QuantizeLinear", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& scale = req_input(ctx, 1);
  const RtTensor* zp = opt_input(ctx, 2);
  const dm::QuantParams p = dm::resolve_quant(ctx, x, scale, zp, true);
  RtTensor* y = ctx.output(0, p.qtype, x.shape);
  if (!p.n) return;
  double lo, hi;
  dm::quant_range(p.qtype, &lo, &hi);
  dispatch_float(ctx, x.dtype, [&](auto ttag) {
    using T = typename decltype(ttag)::type;
    dispatch_float(ctx, scale.dtype, [&](auto stag) {
      using S = typename decltype(stag)::type;
      visit_qint(ctx, p.qtype, [&](auto qtag) {
        using Q = typename decltype(qtag)::type;
        quantize_kernel<T, S, Q><<<grid_for(p.n), kThreads, 0, stream_of(ctx)>>>(
            x.ptr<T>(), scale.ptr<S>(), zp ? zp->ptr<Q>() : nullptr, y->ptr<Q>(), p.n, p.channels, p.inner, lo, hi);
      });
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
