// Y[r, j] = act(P[r, j]) * P[r, N + j]: the gate/up product of fuseopt.GatedMatMul
// after its one packed GEMM. Math in fp32 whatever the storage type; the CPU
// reference is kernels/cpu/fused_gated_matmul.cc (SiLU as x * sigmoid(x)).
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {
namespace {

// Launched with programmatic dependent launch (kernels/cuda/pdl.cuh): the
// gate pass follows its GEMM directly, so its launch overlaps the GEMM's tail.
using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

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
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / n, j = i - r * n;
    const T* row = p + r * 2 * n;
    y[i] = from_f<T>(gate_act<A>(to_f(row[j])) * to_f(row[n + j]));
  }
}

// 16-byte vectors of gate and up (n % V == 0 and 16-byte aligned rows, so a
// vector never straddles the gate/up boundary or a row). The scalar kernel
// above did a 64-bit division and 2-byte accesses per element: ≈ 90 µs for
// Llama-1B's [2048, 16384] gate at 1×2048, against ≈ 25 µs for its 96 MB at
// the copy ceiling. One row index per vector, 32-bit when it fits.
template <class T, int V, GateActivation A, class I>
__global__ void gated_vec_kernel(const T* __restrict__ p, T* __restrict__ y, I nvec, I nv_row) {
  pdl_begin();
  using Vt = Vec<T, V>;
  const Vt* pv = reinterpret_cast<const Vt*>(p);
  Vt* yv = reinterpret_cast<Vt*>(y);
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < nvec; i += I(gridDim.x) * blockDim.x) {
    const I r = i / nv_row, j = i - r * nv_row;
    const Vt g = pv[r * 2 * nv_row + j], u = pv[r * 2 * nv_row + nv_row + j];
    Vt o;
#pragma unroll
    for (int k = 0; k < V; ++k) o.v[k] = from_f<T>(gate_act<A>(to_f(g.v[k])) * to_f(u.v[k]));
    yv[i] = o;
  }
}

template <class T, GateActivation A>
void launch_act(const T* p, T* y, int64_t total, int64_t n, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool aligned = reinterpret_cast<uintptr_t>(p) % 16 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  if (n % V == 0 && aligned) {
    const int64_t nvec = total / V, nv_row = n / V;
    // 2·nvec bounds the largest index read (the up half of the last row).
    if (2 * nvec < (int64_t(1) << 31))
      pdl_launch(gated_vec_kernel<T, V, A, int32_t>, dim3(grid_for(nvec)), dim3(kThreads), 0, s, p, y, int32_t(nvec),
                 int32_t(nv_row));
    else
      pdl_launch(gated_vec_kernel<T, V, A, int64_t>, dim3(grid_for(nvec)), dim3(kThreads), 0, s, p, y, nvec, nv_row);
    return;
  }
  pdl_launch(gated_kernel<T, A>, dim3(grid_for(total)), dim3(kThreads), 0, s, p, y, total, n);
}

template <class T>
void launch_typed(GateActivation act, const T* p, T* y, int64_t total, int64_t n, cudaStream_t s) {
  switch (act) {
    case GateActivation::Silu: launch_act<T, GateActivation::Silu>(p, y, total, n, s); break;
    case GateActivation::Gelu: launch_act<T, GateActivation::Gelu>(p, y, total, n, s); break;
    case GateActivation::GeluTanh: launch_act<T, GateActivation::GeluTanh>(p, y, total, n, s); break;
    case GateActivation::Relu: launch_act<T, GateActivation::Relu>(p, y, total, n, s); break;
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
