// SwiGLU (opset 28): Y = Swish_alpha(A) * B = A * sigmoid(alpha * A) * B, A and B of one shape
// (ONNX applies no broadcasting). Computed in double, stored as the input's float type. The
// CUDA kernel (kernels/cuda/swiglu.cu) shares the checks (kernels/common/swiglu_params.h).
#include <cmath>

#include "kernels/common/swiglu_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_SwiGLU, "", "SwiGLU", Backend::CPU, {DType::Float, DType::Double}) {
  const dm::SwiGluParams p = dm::resolve_swiglu(ctx);
  RtTensor* y = ctx.output(0, p.a->dtype, p.a->shape);
  auto loop = [&](const auto* a, const auto* b, auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    parallel_for(p.a->numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const double g = static_cast<double>(a[i]);
        out[i] = static_cast<T>(g / (1.0 + std::exp(-p.alpha * g)) * static_cast<double>(b[i]));
      }
    });
  };
  switch (p.a->dtype) {
    case DType::Float: return loop(p.a->ptr<float>(), p.b->ptr<float>(), y->ptr<float>());
    case DType::Double: return loop(p.a->ptr<double>(), p.b->ptr<double>(), y->ptr<double>());
    default: throw Error(ctx.node().label() + ": unsupported dtype " + dtype_name(p.a->dtype));
  }
}

}  // namespace
}  // namespace fuseopt
