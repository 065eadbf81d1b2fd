// QuantizeLinear / DequantizeLinear on the CPU reference backend (per tensor
// or per axis; see kernels/common/quantize_params.h). Quantize divides in
// float and rounds half to even, as the ONNX reference does.
#include <cmath>

#include "kernels/common/quantize_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

template <class F> void visit_qint(KernelContext& ctx, DType t, F&& f) {
  switch (t) {
    case DType::Int8: return f(int8_t{});
    case DType::UInt8: return f(uint8_t{});
    case DType::Int16: return f(int16_t{});
    case DType::UInt16: return f(uint16_t{});
    case DType::Int32: return f(int32_t{});
    default: throw Error(ctx.node().label() + ": unsupported quantized type " + dtype_name(t));
  }
}

FUSEOPT_KERNEL(cpu_DequantizeLinear, "", "DequantizeLinear", Backend::CPU,
               {DType::Int8, DType::UInt8, DType::Int16, DType::UInt16, DType::Int32}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = dm::opt_input(ctx, 1);
  MATH_CHECK(ctx, x && scale, "needs x and x_scale");
  MATH_CHECK(ctx, scale->dtype == DType::Float, "x_scale must be float, got " << dtype_name(scale->dtype));
  const RtTensor* zp = dm::opt_input(ctx, 2);
  const dm::QuantParams p = dm::resolve_quant(ctx, *x, *scale, zp, false);
  float* y = ctx.output(0, DType::Float, x->shape)->ptr<float>();
  const float* s = scale->ptr<float>();
  visit_qint(ctx, x->dtype, [&](auto tag) {
    using Q = decltype(tag);
    const Q* px = x->ptr<Q>();
    const Q* pz = zp ? zp->ptr<Q>() : nullptr;
    for (int64_t i = 0; i < p.n; ++i) {
      const int64_t c = (i / p.inner) % p.channels;
      const float z = pz ? static_cast<float>(pz[c]) : 0.f;
      y[i] = (static_cast<float>(px[i]) - z) * s[c];
    }
  });
}

FUSEOPT_KERNEL(cpu_QuantizeLinear, "", "QuantizeLinear", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* scale = dm::opt_input(ctx, 1);
  MATH_CHECK(ctx, x && scale, "needs x and y_scale");
  MATH_CHECK(ctx, scale->dtype == DType::Float, "y_scale must be float, got " << dtype_name(scale->dtype));
  const RtTensor* zp = dm::opt_input(ctx, 2);
  const dm::QuantParams p = dm::resolve_quant(ctx, *x, *scale, zp, true);
  RtTensor* y = ctx.output(0, p.qtype, x->shape);
  const float* px = x->ptr<float>();
  const float* s = scale->ptr<float>();
  double lo, hi;
  dm::quant_range(p.qtype, &lo, &hi);
  visit_qint(ctx, p.qtype, [&](auto tag) {
    using Q = decltype(tag);
    const Q* pz = zp ? zp->ptr<Q>() : nullptr;
    Q* py = y->ptr<Q>();
    for (int64_t i = 0; i < p.n; ++i) {
      const int64_t c = (i / p.inner) % p.channels;
      double v = std::nearbyint(static_cast<double>(px[i] / s[c])) + (pz ? static_cast<double>(pz[c]) : 0.0);
      v = std::isnan(v) ? 0.0 : std::min(std::max(v, lo), hi);
      py[i] = static_cast<Q>(v);
    }
  });
}

}  // namespace
}  // namespace fuseopt
