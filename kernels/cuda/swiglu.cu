// SwiGLU (opset 28) on the GPU: one grid-stride pass, Y = A * sigmoid(alpha * A) * B computed in
// fp32 for fp16/bf16. The CPU reference is kernels/cpu/swiglu.cc (shared checks:
// kernels/common/swiglu_params.h). Models that spell the same thing as MatMuls + Sigmoid/Mul get
// fuseopt.GatedMatMul from the passes instead; this runs the ONNX op as written.
#include "kernels/common/swiglu_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T>
__global__ void swiglu_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n,
                              float alpha) {
  CUDA_GRID_STRIDE(i, n) {
    const float g = float(load_c(a[i]));
    y[i] = store_c<T>(static_cast<compute_t<T>>(g / (1.f + expf(-alpha * g)) * float(load_c(b[i]))));
  }
}

FUSEOPT_KERNEL(CudaSwiGLU, "", "SwiGLU", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const dm::SwiGluParams p = dm::resolve_swiglu(ctx);
  RtTensor* y = ctx.output(0, p.a->dtype, p.a->shape);
  const int64_t n = p.a->numel();
  if (n == 0) return;
  dispatch_float(ctx, p.a->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_kernel<T><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(p.a->ptr<T>(), p.b->ptr<T>(), y->ptr<T>(), n,
                                                                    p.alpha);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
