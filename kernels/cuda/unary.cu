// Elementwise unary ops on the GPU: one grid-stride kernel per (op, dtype);
// fp16/bf16 compute in fp32. Also IsNaN/IsInf/Not (bool outputs) and Clip,
// whose optional bounds are read on the device (no host round trip).
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

enum class Un {
  Sqrt, Reciprocal, Erf, Tanh, Exp, Log, Neg, Abs, Floor, Ceil, Round, Sin, Cos, Tan, Relu, Sigmoid,
  Softplus, Softsign, Atan, Sign, LeakyRelu, Elu, HardSigmoid, HardSwish, GeluErf, GeluTanh, Selu, Identity
};

template <Un OP, class C> __device__ __forceinline__ C apply_un(C v, float a, float b) {
  if constexpr (OP == Un::Neg) return -v;
  if constexpr (OP == Un::Abs) return v < C(0) ? C(-v) : v;
  if constexpr (OP == Un::Relu) return v > C(0) ? v : C(0);
  if constexpr (OP == Un::Sign) return v > C(0) ? C(1) : (v < C(0) ? C(-1) : C(0));
  if constexpr (OP == Un::Identity) return v;
  if constexpr (std::is_floating_point_v<C>) {
    if constexpr (OP == Un::Sqrt) return sqrt(v);
    if constexpr (OP == Un::Reciprocal) return C(1) / v;
    if constexpr (OP == Un::Erf) return erf(v);
    if constexpr (OP == Un::Tanh) return tanh(v);
    if constexpr (OP == Un::Exp) return exp(v);
    if constexpr (OP == Un::Log) return log(v);
    if constexpr (OP == Un::Floor) return floor(v);
    if constexpr (OP == Un::Ceil) return ceil(v);
    if constexpr (OP == Un::Round) return rint(v);  // half to even, as ONNX says
    if constexpr (OP == Un::Sin) return sin(v);
    if constexpr (OP == Un::Cos) return cos(v);
    if constexpr (OP == Un::Tan) return tan(v);
    if constexpr (OP == Un::Atan) return atan(v);
    if constexpr (OP == Un::Softsign) return v / (C(1) + fabs(v));
    if constexpr (OP == Un::Sigmoid) return v >= C(0) ? C(1) / (C(1) + exp(-v)) : exp(v) / (C(1) + exp(v));
    if constexpr (OP == Un::Softplus) return v > C(20) ? v : log1p(exp(v));
    if constexpr (OP == Un::LeakyRelu) return v >= C(0) ? v : C(a) * v;
    if constexpr (OP == Un::Elu) return v >= C(0) ? v : C(a) * expm1(v);
    if constexpr (OP == Un::Selu) return C(b) * (v > C(0) ? v : C(a) * (exp(v) - C(1)));
    if constexpr (OP == Un::HardSigmoid) {
      C r = C(a) * v + C(b);
      return r < C(0) ? C(0) : (r > C(1) ? C(1) : r);
    }
    if constexpr (OP == Un::HardSwish) {
      C r = v / C(6) + C(0.5);
      return v * (r < C(0) ? C(0) : (r > C(1) ? C(1) : r));
    }
    if constexpr (OP == Un::GeluErf) return C(0.5) * v * (C(1) + erf(v * C(0.70710678118654752440)));
    if constexpr (OP == Un::GeluTanh)
      return C(0.5) * v * (C(1) + tanh(C(0.79788456080286535588) * (v + C(0.044715) * v * v * v)));
  }
  return v;
}

template <class T, Un OP> __global__ void unary_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, float a, float b) {
  CUDA_GRID_STRIDE(i, n) { y[i] = store_c<T>(apply_un<OP>(load_c(x[i]), a, b)); }
}

template <Un OP> void run_unary(KernelContext& ctx, bool ints_ok, float a = 0, float b = 0) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  auto launch = [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_kernel<T, OP><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), n, a, b);
  };
  if (ints_ok && !is_float_dtype(x.dtype)) {
    switch (x.dtype) {
      case DType::Int64: launch(Tag<int64_t>{}); break;
      case DType::Int32: launch(Tag<int32_t>{}); break;
      case DType::Int8: launch(Tag<int8_t>{}); break;
      default: throw Error(unsupported(ctx, x.dtype));
    }
  } else {
    dispatch_float(ctx, x.dtype, launch);
  }
  check_launch(ctx);
}

#define FLOATS {DType::Float, DType::Float16, DType::BFloat16}
#define NUMS {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Int8}

#define UNARY_FLOAT(NAME, OP)                                                   \
  FUSEOPT_KERNEL(Cuda##NAME, "", #NAME, Backend::CUDA, FLOATS) {                \
    run_unary<Un::OP>(ctx, false);                                              \
  }
#define UNARY_NUM(NAME, OP)                                                     \
  FUSEOPT_KERNEL(Cuda##NAME, "", #NAME, Backend::CUDA, NUMS) {                  \
    run_unary<Un::OP>(ctx, true);                                               \
  }

UNARY_FLOAT(Sqrt, Sqrt)
UNARY_FLOAT(Reciprocal, Reciprocal)
UNARY_FLOAT(Erf, Erf)
UNARY_FLOAT(Tanh, Tanh)
UNARY_FLOAT(Exp, Exp)
UNARY_FLOAT(Log, Log)
UNARY_FLOAT(Floor, Floor)
UNARY_FLOAT(Ceil, Ceil)
UNARY_FLOAT(Round, Round)
UNARY_FLOAT(Sin, Sin)
UNARY_FLOAT(Cos, Cos)
UNARY_FLOAT(Tan, Tan)
UNARY_FLOAT(Atan, Atan)
UNARY_FLOAT(Softsign, Softsign)
UNARY_FLOAT(Sigmoid, Sigmoid)
UNARY_FLOAT(Softplus, Softplus)
UNARY_FLOAT(HardSwish, HardSwish)
UNARY_NUM(Neg, Neg)
UNARY_NUM(Abs, Abs)
UNARY_NUM(Relu, Relu)
UNARY_NUM(Sign, Sign)

FUSEOPT_KERNEL(CudaLeakyRelu, "", "LeakyRelu", Backend::CUDA, FLOATS) {
  run_unary<Un::LeakyRelu>(ctx, false, ctx.node().attr_float("alpha", 0.01f));
}
FUSEOPT_KERNEL(CudaElu, "", "Elu", Backend::CUDA, FLOATS) {
  run_unary<Un::Elu>(ctx, false, ctx.node().attr_float("alpha", 1.0f));
}
FUSEOPT_KERNEL(CudaSelu, "", "Selu", Backend::CUDA, FLOATS) {
  run_unary<Un::Selu>(ctx, false, ctx.node().attr_float("alpha", 1.67326319217681884765625f),
                      ctx.node().attr_float("gamma", 1.05070102214813232421875f));
}
FUSEOPT_KERNEL(CudaHardSigmoid, "", "HardSigmoid", Backend::CUDA, FLOATS) {
  run_unary<Un::HardSigmoid>(ctx, false, ctx.node().attr_float("alpha", 0.2f), ctx.node().attr_float("beta", 0.5f));
}
// ONNX Gelu (opset 20): approximate = "none" (erf) or "tanh".
FUSEOPT_KERNEL(CudaGelu, "", "Gelu", Backend::CUDA, FLOATS) {
  const std::string approx = ctx.node().attr_string("approximate", "none");
  if (approx == "tanh")
    run_unary<Un::GeluTanh>(ctx, false);
  else if (approx == "none")
    run_unary<Un::GeluErf>(ctx, false);
  else
    throw Error(ctx.node().label() + ": unknown approximate='" + approx + "'");
}

// ---- predicates -----------------------------------------------------------
template <class T, int KIND> __global__ void predicate_kernel(const T* __restrict__ x, bool* __restrict__ y, int64_t n,
                                                              bool neg_inf, bool pos_inf) {
  CUDA_GRID_STRIDE(i, n) {
    const auto v = load_c(x[i]);
    if constexpr (KIND == 0) {
      y[i] = v != v;
    } else {
      const bool inf = isinf(v);
      y[i] = inf && ((v > 0 && pos_inf) || (v < 0 && neg_inf));
    }
  }
}

template <int KIND> void run_predicate(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, DType::Bool, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool neg = ctx.node().attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.node().attr_int("detect_positive", 1) != 0;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    predicate_kernel<T, KIND><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<bool>(), n, neg, pos);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaIsNaN, "", "IsNaN", Backend::CUDA, FLOATS) { run_predicate<0>(ctx); }
FUSEOPT_KERNEL(CudaIsInf, "", "IsInf", Backend::CUDA, FLOATS) { run_predicate<1>(ctx); }

__global__ void not_kernel(const bool* __restrict__ x, bool* __restrict__ y, int64_t n) {
  CUDA_GRID_STRIDE(i, n) { y[i] = !x[i]; }
}
FUSEOPT_KERNEL(CudaNot, "", "Not", Backend::CUDA, {DType::Bool}) {
  const RtTensor& x = req_input(ctx, 0);
  RtTensor* y = ctx.output(0, DType::Bool, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  not_kernel<<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<bool>(), y->ptr<bool>(), n);
  check_launch(ctx);
}

// ---- Clip -----------------------------------------------------------------
// Bounds come from inputs 1/2 (opset >= 11, device scalars, may be omitted)
// or from attributes min/max (older opsets).
template <class T>
__global__ void clip_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, const T* lo_p, const T* hi_p,
                            compute_t<T> lo_attr, compute_t<T> hi_attr, bool has_lo, bool has_hi) {
  using C = compute_t<T>;
  const C lo = lo_p ? load_c(*lo_p) : lo_attr;
  const C hi = hi_p ? load_c(*hi_p) : hi_attr;
  CUDA_GRID_STRIDE(i, n) {
    C v = load_c(x[i]);
    if ((lo_p || has_lo) && v < lo) v = lo;
    if ((hi_p || has_hi) && v > hi) v = hi;
    y[i] = store_c<T>(v);
  }
}

FUSEOPT_KERNEL(CudaClip, "", "Clip", Backend::CUDA, NUMS) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* lo = opt_input(ctx, 1);
  const RtTensor* hi = opt_input(ctx, 2);
  for (const RtTensor* b : {lo, hi})
    if (b) {
      DM_CHECK(ctx, b->numel() == 1, "min/max must be scalars, got " << shape_str(b->shape));
      DM_CHECK(ctx, b->dtype == x.dtype, "min/max dtype " << dtype_name(b->dtype) << " differs from input "
                                                           << dtype_name(x.dtype));
    }
  const bool has_lo = ctx.node().has_attr("min"), has_hi = ctx.node().has_attr("max");
  const float lo_attr = ctx.node().attr_float("min", 0), hi_attr = ctx.node().attr_float("max", 0);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_numeric(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    clip_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(
        x.ptr<T>(), y->ptr<T>(), n, lo ? lo->ptr<T>() : nullptr, hi ? hi->ptr<T>() : nullptr, static_cast<C>(lo_attr),
        static_cast<C>(hi_attr), has_lo, has_hi);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
