// Elementwise activations that exporters emit less often than the core set
// in elementwise.cc: Selu, Celu, Mish, Swish, ThresholdedRelu, Shrink, Sinh, Cosh,
// Asin, Acos, Asinh, Acosh, Atanh (float and double, computed in double) and
// IsInf (bool output). The CUDA backend has
// the same ops (kernels/cuda/extra_unary.cu); these are its reference.
#include <cmath>

#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

// y[i] = f(x[i]) in double, stored as the input's float type.
template <class F>
void unary_double(KernelContext& ctx, F f) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  auto loop = [&](auto* in, auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    parallel_for(x->numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = static_cast<T>(f(static_cast<double>(in[i])));
    });
  };
  switch (x->dtype) {
    case DType::Float: return loop(x->ptr<float>(), y->ptr<float>());
    case DType::Double: return loop(x->ptr<double>(), y->ptr<double>());
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}

#define FLOATS_AND_DOUBLE {DType::Float, DType::Double}

FUSEOPT_KERNEL(cpu_Selu, "", "Selu", Backend::CPU, FLOATS_AND_DOUBLE) {
  const double alpha = ctx.node().attr_float("alpha", 1.67326319217681884765625f);
  const double gamma = ctx.node().attr_float("gamma", 1.05070102214813232421875f);
  unary_double(ctx, [=](double v) { return gamma * (v > 0 ? v : alpha * std::expm1(v)); });
}

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
FUSEOPT_KERNEL(cpu_Celu, "", "Celu", Backend::CPU, FLOATS_AND_DOUBLE) {
  const double alpha = ctx.node().attr_float("alpha", 1.0f);
  MATH_CHECK(ctx, alpha != 0, "alpha must not be 0");
  unary_double(ctx, [=](double v) { return v > 0 ? v : alpha * std::expm1(v / alpha); });
}

// Mish: x * tanh(softplus(x)); softplus without overflow for large x.
FUSEOPT_KERNEL(cpu_Mish, "", "Mish", Backend::CPU, FLOATS_AND_DOUBLE) {
  unary_double(ctx, [](double v) { return v * std::tanh(v > 20 ? v : std::log1p(std::exp(v))); });
}

// Swish (opset 24): x * sigmoid(alpha * x).
FUSEOPT_KERNEL(cpu_Swish, "", "Swish", Backend::CPU, FLOATS_AND_DOUBLE) {
  const double alpha = ctx.node().attr_float("alpha", 1.0f);
  unary_double(ctx, [=](double v) { return v / (1.0 + std::exp(-alpha * v)); });
}

FUSEOPT_KERNEL(cpu_ThresholdedRelu, "", "ThresholdedRelu", Backend::CPU, FLOATS_AND_DOUBLE) {
  const double alpha = ctx.node().attr_float("alpha", 1.0f);
  unary_double(ctx, [=](double v) { return v > alpha ? v : 0.0; });
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
FUSEOPT_KERNEL(cpu_Shrink, "", "Shrink", Backend::CPU, FLOATS_AND_DOUBLE) {
  const double lambd = ctx.node().attr_float("lambd", 0.5f), bias = ctx.node().attr_float("bias", 0.0f);
  unary_double(ctx, [=](double v) { return v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0); });
}

// Hyperbolic and inverse trigonometric functions (opset 7/9/22).
#define EXTRA_TRIG(NAME, FN) \
  FUSEOPT_KERNEL(cpu_##NAME, "", #NAME, Backend::CPU, FLOATS_AND_DOUBLE) { unary_double(ctx, [](double v) { return FN(v); }); }
EXTRA_TRIG(Sinh, std::sinh)
EXTRA_TRIG(Cosh, std::cosh)
EXTRA_TRIG(Asin, std::asin)
EXTRA_TRIG(Acos, std::acos)
EXTRA_TRIG(Asinh, std::asinh)
EXTRA_TRIG(Acosh, std::acosh)
EXTRA_TRIG(Atanh, std::atanh)
#undef EXTRA_TRIG

// IsInf (opset 10/20): detect_negative / detect_positive select the signs.
FUSEOPT_KERNEL(cpu_IsInf, "", "IsInf", Backend::CPU, FLOATS_AND_DOUBLE) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  const bool neg = ctx.node().attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.node().attr_int("detect_positive", 1) != 0;
  RtTensor* y = ctx.output(0, DType::Bool, x->shape);
  bool* out = y->ptr<bool>();
  auto loop = [&](const auto* in) {
    for (int64_t i = 0; i < x->numel(); ++i)
      out[i] = std::isinf(in[i]) && ((in[i] > 0 && pos) || (in[i] < 0 && neg));
  };
  if (x->dtype == DType::Float) loop(x->ptr<float>());
  else loop(x->ptr<double>());
}

}  // namespace
}  // namespace fuseopt
