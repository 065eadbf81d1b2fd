// Less common activations on the GPU (Celu, Mish, Swish, ThresholdedRelu, Shrink)
// and Sinh/Cosh/Asin/Acos/Asinh/Acosh/Atanh:
// one grid-stride kernel per (op, dtype), fp16/bf16 computed in fp32. The
// CPU reference is kernels/cpu/extra_unary.cc.
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

enum class ExtraUn { Celu, Mish, Swish, ThresholdedRelu, Shrink, Sinh, Cosh, Asin, Acos, Asinh, Acosh, Atanh };

template <ExtraUn OP> __device__ __forceinline__ float apply_extra(float v, float a, float b) {
  if constexpr (OP == ExtraUn::Celu) return v > 0.f ? v : a * expm1f(v / a);
  if constexpr (OP == ExtraUn::Mish) return v * tanhf(v > 20.f ? v : log1pf(expf(v)));
  if constexpr (OP == ExtraUn::Swish) return v / (1.f + expf(-a * v));
  if constexpr (OP == ExtraUn::ThresholdedRelu) return v > a ? v : 0.f;
  if constexpr (OP == ExtraUn::Shrink) return v < -a ? v + b : (v > a ? v - b : 0.f);
  if constexpr (OP == ExtraUn::Sinh) return sinhf(v);
  if constexpr (OP == ExtraUn::Cosh) return coshf(v);
  if constexpr (OP == ExtraUn::Asin) return asinf(v);
  if constexpr (OP == ExtraUn::Acos) return acosf(v);
  if constexpr (OP == ExtraUn::Asinh) return asinhf(v);
  if constexpr (OP == ExtraUn::Acosh) return acoshf(v);
  if constexpr (OP == ExtraUn::Atanh) return atanhf(v);
  return v;
}

template <class T, ExtraUn OP>
__global__ void extra_unary_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, float a, float b) {
  CUDA_GRID_STRIDE(i, n) {
    y[i] = store_c<T>(static_cast<compute_t<T>>(apply_extra<OP>(float(load_c(x[i])), a, b)));
  }
}

template <ExtraUn OP> void run_extra(KernelContext& ctx, float a = 0, float b = 0) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    extra_unary_kernel<T, OP><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), n, a, b);
  });
  check_launch(ctx);
}

#define FLOATS {DType::Float, DType::Float16, DType::BFloat16}

FUSEOPT_KERNEL(CudaCelu, "", "Celu", Backend::CUDA, FLOATS) {
  const float alpha = ctx.node().attr_float("alpha", 1.0f);
  DM_CHECK(ctx, alpha != 0.f, "alpha must not be 0");
  run_extra<ExtraUn::Celu>(ctx, alpha);
}
FUSEOPT_KERNEL(CudaMish, "", "Mish", Backend::CUDA, FLOATS) { run_extra<ExtraUn::Mish>(ctx); }
FUSEOPT_KERNEL(CudaSwish, "", "Swish", Backend::CUDA, FLOATS) {
  run_extra<ExtraUn::Swish>(ctx, ctx.node().attr_float("alpha", 1.0f));
}
FUSEOPT_KERNEL(CudaThresholdedRelu, "", "ThresholdedRelu", Backend::CUDA, FLOATS) {
  run_extra<ExtraUn::ThresholdedRelu>(ctx, ctx.node().attr_float("alpha", 1.0f));
}
FUSEOPT_KERNEL(CudaShrink, "", "Shrink", Backend::CUDA, FLOATS) {
  run_extra<ExtraUn::Shrink>(ctx, ctx.node().attr_float("lambd", 0.5f), ctx.node().attr_float("bias", 0.0f));
}

#define EXTRA_TRIG(NAME) \
  FUSEOPT_KERNEL(Cuda##NAME, "", #NAME, Backend::CUDA, FLOATS) { run_extra<ExtraUn::NAME>(ctx); }
EXTRA_TRIG(Sinh)
EXTRA_TRIG(Cosh)
EXTRA_TRIG(Asin)
EXTRA_TRIG(Acos)
EXTRA_TRIG(Asinh)
EXTRA_TRIG(Acosh)
EXTRA_TRIG(Atanh)
#undef EXTRA_TRIG

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
