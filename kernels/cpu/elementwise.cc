// Elementwise math: unary functions, binary arithmetic with numpy
// broadcasting, variadic Max/Min/Sum/Mean, Clip. Float kernels compute in
// float (double for Double); integer kernels cover the shape arithmetic that
// exporters emit on int64/int32 tensors.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

using cpumath::norm_axis;

// ---- unary --------------------------------------------------------------------

template <class T, class F>
void unary_loop(KernelContext& ctx, F f) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  RtTensor* y = ctx.output(0, x->dtype, x->shape);
  const T* in = x->ptr<T>();
  T* out = y->ptr<T>();
  parallel_for(x->numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
  });
}

// Dispatches a unary float function (float and double).
template <class F>
void unary_float(KernelContext& ctx, F f) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  switch (x->dtype) {
    case DType::Float: return unary_loop<float>(ctx, [&](float v) { return static_cast<float>(f(v)); });
    case DType::Double: return unary_loop<double>(ctx, [&](double v) { return static_cast<double>(f(v)); });
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}

// Dispatches a unary function valid for floats and signed integers.
template <class F>
void unary_numeric(KernelContext& ctx, F f) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  switch (x->dtype) {
    case DType::Float: return unary_loop<float>(ctx, [&](float v) { return static_cast<float>(f(v)); });
    case DType::Double: return unary_loop<double>(ctx, [&](double v) { return static_cast<double>(f(v)); });
    case DType::Int64: return unary_loop<int64_t>(ctx, [&](int64_t v) { return static_cast<int64_t>(f(v)); });
    case DType::Int32: return unary_loop<int32_t>(ctx, [&](int32_t v) { return static_cast<int32_t>(f(v)); });
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}


#define UNARY_FLOAT(NAME, EXPR)                                                        \
  FUSEOPT_KERNEL(cpu_##NAME, "", #NAME, Backend::CPU, {DType::Float, DType::Double}) { \
    unary_float(ctx, [](auto x) { return EXPR; });                                     \
  }
#define UNARY_NUMERIC(NAME, EXPR)                                                                            \
  FUSEOPT_KERNEL(cpu_##NAME, "", #NAME, Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) { \
    unary_numeric(ctx, [](auto x) { return EXPR; });                                                         \
  }

UNARY_FLOAT(Sqrt, std::sqrt(x))
UNARY_FLOAT(Reciprocal, decltype(x)(1) / x)
UNARY_FLOAT(Erf, std::erf(x))
UNARY_FLOAT(Tanh, std::tanh(x))
UNARY_FLOAT(Exp, std::exp(x))
UNARY_FLOAT(Log, std::log(x))
UNARY_FLOAT(Floor, std::floor(x))
UNARY_FLOAT(Ceil, std::ceil(x))
UNARY_FLOAT(Round, std::nearbyint(x))  // ONNX rounds half to even, like the default FP mode
UNARY_FLOAT(Sin, std::sin(x))
UNARY_FLOAT(Cos, std::cos(x))
UNARY_FLOAT(Tan, std::tan(x))
UNARY_FLOAT(Atan, std::atan(x))
UNARY_FLOAT(Softplus, x > 20 ? x : std::log1p(std::exp(x)))
UNARY_FLOAT(Softsign, x / (decltype(x)(1) + std::fabs(x)))
UNARY_NUMERIC(Neg, -x)
UNARY_NUMERIC(Abs, x < 0 ? -x : x)
UNARY_NUMERIC(Relu, x > 0 ? x : decltype(x)(0))
UNARY_NUMERIC(Sign, decltype(x)((x > 0) - (x < 0)))

// Sigmoid without overflow for large |x|.
UNARY_FLOAT(Sigmoid, x >= 0 ? decltype(x)(1) / (decltype(x)(1) + std::exp(-x))
                            : std::exp(x) / (decltype(x)(1) + std::exp(x)))

FUSEOPT_KERNEL(cpu_LeakyRelu, "", "LeakyRelu", Backend::CPU, {DType::Float, DType::Double}) {
  double alpha = ctx.node().attr_float("alpha", 0.01f);
  unary_float(ctx, [alpha](auto x) { return x >= 0 ? x : decltype(x)(alpha * x); });
}
FUSEOPT_KERNEL(cpu_Elu, "", "Elu", Backend::CPU, {DType::Float, DType::Double}) {
  double alpha = ctx.node().attr_float("alpha", 1.0f);
  unary_float(ctx, [alpha](auto x) { return x >= 0 ? x : decltype(x)(alpha * std::expm1(x)); });
}
FUSEOPT_KERNEL(cpu_HardSigmoid, "", "HardSigmoid", Backend::CPU, {DType::Float, DType::Double}) {
  double alpha = ctx.node().attr_float("alpha", 0.2f), beta = ctx.node().attr_float("beta", 0.5f);
  unary_float(ctx, [=](auto x) { return decltype(x)(std::clamp<double>(alpha * x + beta, 0.0, 1.0)); });
}
FUSEOPT_KERNEL(cpu_HardSwish, "", "HardSwish", Backend::CPU, {DType::Float, DType::Double}) {
  unary_float(ctx, [](auto x) { return decltype(x)(x * std::clamp<double>(x / 6.0 + 0.5, 0.0, 1.0)); });
}
// Gelu (opset 20): approximate = "none" (erf) or "tanh".
FUSEOPT_KERNEL(cpu_Gelu, "", "Gelu", Backend::CPU, {DType::Float, DType::Double}) {
  bool tanh_form = ctx.node().attr_string("approximate", "none") == "tanh";
  if (tanh_form) {
    unary_float(ctx, [](auto x) {
      double v = x;
      return decltype(x)(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    });
  } else {
    unary_float(ctx, [](auto x) {
      double v = x;
      return decltype(x)(0.5 * v * (1.0 + std::erf(v * 0.7071067811865476)));
    });
  }
}

// ---- binary -------------------------------------------------------------------

// out = f(a, b) with numpy broadcasting; out dtype = input dtype.
template <class T, class F>
void binary_loop(KernelContext& ctx, const RtTensor& a, const RtTensor& b, F f) {
  std::vector<int64_t> shape = cpu::broadcast_shape({a.shape, b.shape}, ctx.node());
  RtTensor* y = ctx.output(0, a.dtype, shape);
  const T* pa = a.ptr<T>();
  const T* pb = b.ptr<T>();
  T* out = y->ptr<T>();
  const int64_t n = y->numel();
  if (a.shape == b.shape) {
    parallel_for(n, 1 << 15, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = f(pa[i], pb[i]);
    });
    return;
  }
  if (b.numel() == 1 && a.numel() == n) {
    const T bv = pb[0];
    parallel_for(n, 1 << 15, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = f(pa[i], bv);
    });
    return;
  }
  if (a.numel() == 1 && b.numel() == n) {
    const T av = pa[0];
    parallel_for(n, 1 << 15, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) out[i] = f(av, pb[i]);
    });
    return;
  }
  std::array<std::vector<int64_t>, 2> strides = {cpu::broadcast_strides(a.shape, shape),
                                                 cpu::broadcast_strides(b.shape, shape)};
  cpu::for_each_broadcast<2>(shape, strides, [&](int64_t o, const std::array<int64_t, 2>& off) {
    out[o] = f(pa[off[0]], pb[off[1]]);
  });
}

template <class F>
void binary_dispatch(KernelContext& ctx, F f) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  MATH_CHECK(ctx, a && b, "needs two inputs");
  MATH_CHECK(ctx, a->dtype == b->dtype, "input dtypes differ: " << dtype_name(a->dtype) << " and "
                                                                << dtype_name(b->dtype));
  switch (a->dtype) {
    case DType::Float: return binary_loop<float>(ctx, *a, *b, [&](float x, float y) { return static_cast<float>(f(x, y)); });
    case DType::Double: return binary_loop<double>(ctx, *a, *b, [&](double x, double y) { return static_cast<double>(f(x, y)); });
    case DType::Int64: return binary_loop<int64_t>(ctx, *a, *b, [&](int64_t x, int64_t y) { return static_cast<int64_t>(f(x, y)); });
    case DType::Int32: return binary_loop<int32_t>(ctx, *a, *b, [&](int32_t x, int32_t y) { return static_cast<int32_t>(f(x, y)); });
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(a->dtype));
  }
}

template <class T>
T int_div(KernelContext& ctx, T x, T y) {
  MATH_CHECK(ctx, y != 0, "integer division by zero");
  return x / y;  // truncation, as ONNX Runtime does
}

#define BINARY_KERNEL(NAME) \
  FUSEOPT_KERNEL(cpu_##NAME, "", #NAME, Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32})

BINARY_KERNEL(Add) { binary_dispatch(ctx, [](auto x, auto y) { return x + y; }); }
BINARY_KERNEL(Sub) { binary_dispatch(ctx, [](auto x, auto y) { return x - y; }); }
BINARY_KERNEL(Mul) { binary_dispatch(ctx, [](auto x, auto y) { return x * y; }); }
BINARY_KERNEL(Div) {
  binary_dispatch(ctx, [&](auto x, auto y) {
    if constexpr (std::is_integral_v<decltype(x)>) return int_div(ctx, x, y);
    else return x / y;
  });
}
BINARY_KERNEL(Mod) {
  bool fmod = ctx.node().attr_int("fmod", 0) != 0;
  binary_dispatch(ctx, [&](auto x, auto y) {
    using T = decltype(x);
    if constexpr (std::is_integral_v<T>) {
      MATH_CHECK(ctx, y != 0, "integer modulo by zero");
      T r = x % y;
      if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;  // result takes the divisor's sign
      return r;
    } else {
      T r = std::fmod(x, y);
      if (!fmod && r != 0 && ((r < 0) != (y < 0))) r += y;
      return r;
    }
  });
}

// Pow: the exponent may have another dtype (float base, int exponent...).
FUSEOPT_KERNEL(cpu_Pow, "", "Pow", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  MATH_CHECK(ctx, a && b, "needs two inputs");
  if (a->dtype == b->dtype) {
    binary_dispatch(ctx, [](auto x, auto y) {
      using T = decltype(x);
      if constexpr (std::is_integral_v<T>) return static_cast<T>(std::llround(std::pow(double(x), double(y))));
      else if constexpr (std::is_same_v<T, float>) {
        // Exact fast paths for the common squares and square roots.
        if (y == 2.f) return x * x;
        if (y == 1.f) return x;
        if (y == 0.5f) return std::sqrt(x);
        return std::pow(x, y);
      } else return std::pow(x, y);
    });
    return;
  }
  // Mixed dtypes: convert the exponent to the base dtype.
  RtTensor conv;
  conv.dtype = a->dtype;
  conv.shape = b->shape;
  conv.where = Backend::CPU;
  conv.data = ctx.scratch(static_cast<size_t>(b->numel()) * dtype_size(a->dtype));
  auto read = [&](int64_t i) -> double {
    switch (b->dtype) {
      case DType::Float: return b->ptr<float>()[i];
      case DType::Double: return b->ptr<double>()[i];
      case DType::Int64: return static_cast<double>(b->ptr<int64_t>()[i]);
      case DType::Int32: return b->ptr<int32_t>()[i];
      default: throw Error(ctx.node().label() + ": unsupported exponent dtype " + dtype_name(b->dtype));
    }
  };
  for (int64_t i = 0; i < b->numel(); ++i) {
    switch (a->dtype) {
      case DType::Float: conv.ptr<float>()[i] = static_cast<float>(read(i)); break;
      case DType::Double: conv.ptr<double>()[i] = read(i); break;
      case DType::Int64: conv.ptr<int64_t>()[i] = static_cast<int64_t>(read(i)); break;
      case DType::Int32: conv.ptr<int32_t>()[i] = static_cast<int32_t>(read(i)); break;
      default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(a->dtype));
    }
  }
  switch (a->dtype) {
    case DType::Float:
      return binary_loop<float>(ctx, *a, conv, [](float x, float y) {
        if (y == 2.f) return x * x;
        return std::pow(x, y);
      });
    case DType::Double: return binary_loop<double>(ctx, *a, conv, [](double x, double y) { return std::pow(x, y); });
    case DType::Int64:
      return binary_loop<int64_t>(ctx, *a, conv, [](int64_t x, int64_t y) {
        return static_cast<int64_t>(std::llround(std::pow(double(x), double(y))));
      });
    default:
      return binary_loop<int32_t>(ctx, *a, conv, [](int32_t x, int32_t y) {
        return static_cast<int32_t>(std::llround(std::pow(double(x), double(y))));
      });
  }
}

FUSEOPT_KERNEL(cpu_PRelu, "", "PRelu", Backend::CPU, {DType::Float, DType::Double}) {
  binary_dispatch(ctx, [](auto x, auto slope) { return x < 0 ? x * slope : x; });
}

// ---- variadic -----------------------------------------------------------------

// Folds inputs left to right with broadcasting: out = f(...f(f(x0, x1), x2)...).
template <class T, class F>
void variadic_loop(KernelContext& ctx, F f, bool mean) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const RtTensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i)) {
      ins.push_back(ctx.input(i));
      shapes.push_back(ctx.input(i)->shape);
      MATH_CHECK(ctx, ctx.input(i)->dtype == ins[0]->dtype, "input dtypes differ");
    }
  MATH_CHECK(ctx, !ins.empty(), "needs at least one input");
  std::vector<int64_t> shape = cpu::broadcast_shape(shapes, ctx.node());
  RtTensor* y = ctx.output(0, ins[0]->dtype, shape);
  T* out = y->ptr<T>();
  for (size_t k = 0; k < ins.size(); ++k) {
    std::array<std::vector<int64_t>, 1> strides = {cpu::broadcast_strides(ins[k]->shape, shape)};
    const T* in = ins[k]->ptr<T>();
    cpu::for_each_broadcast<1>(shape, strides, [&](int64_t o, const std::array<int64_t, 1>& off) {
      out[o] = k == 0 ? in[off[0]] : f(out[o], in[off[0]]);
    });
  }
  if (mean) {
    for (int64_t i = 0; i < y->numel(); ++i) out[i] = static_cast<T>(out[i] / static_cast<T>(ins.size()));
  }
}

template <class F>
void variadic_dispatch(KernelContext& ctx, F f, bool mean = false) {
  const RtTensor* a = nullptr;
  for (size_t i = 0; i < ctx.num_inputs() && !a; ++i) a = ctx.input(i);
  MATH_CHECK(ctx, a, "needs at least one input");
  switch (a->dtype) {
    case DType::Float: return variadic_loop<float>(ctx, [&](float x, float y) { return static_cast<float>(f(x, y)); }, mean);
    case DType::Double: return variadic_loop<double>(ctx, [&](double x, double y) { return static_cast<double>(f(x, y)); }, mean);
    case DType::Int64: return variadic_loop<int64_t>(ctx, [&](int64_t x, int64_t y) { return static_cast<int64_t>(f(x, y)); }, mean);
    case DType::Int32: return variadic_loop<int32_t>(ctx, [&](int32_t x, int32_t y) { return static_cast<int32_t>(f(x, y)); }, mean);
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(a->dtype));
  }
}

// NaN propagates through Max/Min, as in ONNX Runtime.
template <class T> T nan_max(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  return x > y ? x : y;
}
template <class T> T nan_min(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  return x < y ? x : y;
}

BINARY_KERNEL(Max) { variadic_dispatch(ctx, [](auto x, auto y) { return nan_max(x, y); }); }
BINARY_KERNEL(Min) { variadic_dispatch(ctx, [](auto x, auto y) { return nan_min(x, y); }); }
BINARY_KERNEL(Sum) { variadic_dispatch(ctx, [](auto x, auto y) { return x + y; }); }
FUSEOPT_KERNEL(cpu_Mean, "", "Mean", Backend::CPU, {DType::Float, DType::Double}) {
  variadic_dispatch(ctx, [](auto x, auto y) { return x + y; }, true);
}

// ---- Clip ---------------------------------------------------------------------

// Opset >= 11: min/max are optional scalar inputs; before: attributes.
template <class T>
void clip_typed(KernelContext& ctx) {
  const RtTensor* x = ctx.input(0);
  T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
  const Node& n = ctx.node();
  if (n.has_attr("min")) lo = static_cast<T>(n.attr_float("min", 0));
  if (n.has_attr("max")) hi = static_cast<T>(n.attr_float("max", 0));
  if (const RtTensor* m = ctx.num_inputs() > 1 ? ctx.host_input(1) : nullptr) {
    MATH_CHECK(ctx, m->numel() == 1 && m->dtype == x->dtype, "min must be a scalar of the input's dtype");
    lo = m->ptr<T>()[0];
  }
  if (const RtTensor* m = ctx.num_inputs() > 2 ? ctx.host_input(2) : nullptr) {
    MATH_CHECK(ctx, m->numel() == 1 && m->dtype == x->dtype, "max must be a scalar of the input's dtype");
    hi = m->ptr<T>()[0];
  }
  unary_loop<T>(ctx, [lo, hi](T v) {
    if constexpr (std::is_floating_point_v<T>) if (std::isnan(v)) return v;
    return v < lo ? lo : (v > hi ? hi : v);
  });
}

FUSEOPT_KERNEL(cpu_Clip, "", "Clip", Backend::CPU, {DType::Float, DType::Double, DType::Int64, DType::Int32}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "missing input");
  switch (x->dtype) {
    case DType::Float: return clip_typed<float>(ctx);
    case DType::Double: return clip_typed<double>(ctx);
    case DType::Int64: return clip_typed<int64_t>(ctx);
    case DType::Int32: return clip_typed<int32_t>(ctx);
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(x->dtype));
  }
}

}  // namespace
}  // namespace fuseopt
