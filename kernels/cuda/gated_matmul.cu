// Y[r, j] = act(P[r, j]) * P[r, N + j]: the gate/up product of fuseopt.GatedMatMul
// after its one packed GEMM. Math in fp32 whatever the storage type; the CPU
// reference is kernels/cpu/fused_gated_matmul.cc (SiLU as x * sigmoid(x)).
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gated_matmul.h"

namespace fuseopt::cuda_fused {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

template <GateActivation A>
__device__ __forceinline__ float gate_act(float x) {
  if constexpr (A == GateActivation::Silu) return x / (1.f + expf(-x));
  if constexpr (A == GateActivation::Gelu) return gelu_erf(x);
  if constexpr (A == GateActivation::GeluTanh)
    return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  // Relu: NaN stays NaN, like the CPU kernel.
  return x > 0.f ? x : (x == x ? 0.f : x);
}

template <class T, GateActivation A>
__global__ void gated_kernel(const T* __restrict__ p, T* __restrict__ y, int64_t total, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n;
    const T* row = p + r * 2 * n;
    y[i] = from_f<T>(gate_act<A>(to_f(row[j])) * to_f(row[n + j]));
  }
}

template <class T>
void launch_typed(GateActivation act, const T* p, T* y, int64_t total, int64_t n, cudaStream_t s) {
  const int grid = grid_for(total);
  switch (act) {
    case GateActivation::Silu: gated_kernel<T, GateActivation::Silu><<<grid, kThreads, 0, s>>>(p, y, total, n); break;
    case GateActivation::Gelu: gated_kernel<T, GateActivation::Gelu><<<grid, kThreads, 0, s>>>(p, y, total, n); break;
    case GateActivation::GeluTanh:
      gated_kernel<T, GateActivation::GeluTanh><<<grid, kThreads, 0, s>>>(p, y, total, n);
      break;
    case GateActivation::Relu: gated_kernel<T, GateActivation::Relu><<<grid, kThreads, 0, s>>>(p, y, total, n); break;
  }
}

}  // namespace

void launch_gated_activation(DType dt, GateActivation act, const void* p, void* y, int64_t rows, int64_t n,
                             cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total == 0) return;
  FUSED_DISPATCH_FLOAT(dt, T, { launch_typed<T>(act, static_cast<const T*>(p), static_cast<T*>(y), total, n, stream); });
  FUSED_LAUNCH_CHECK("GatedMatMul gate*up");
}

}  // namespace fuseopt::cuda_fused
