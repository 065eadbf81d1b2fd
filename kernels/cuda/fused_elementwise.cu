// Elementwise fused kernels: AddRelu, a residual added in place, bias + erf-GELU, bias + tanh or bias +
// squared ReLU after a GEMM (activations cuBLASLt has no epilogue for), and the
// broadcast of Gemm's C into the output.
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {

namespace {

// Every kernel here starts with pdl_begin() and is launched through
// pdl_launch (kernels/cuda/pdl.cuh): the bias+GELU pass after FFN1's GEMM is
// the launch PDL overlaps most often.
using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

constexpr int kThreads = 256;

int grid_for(int64_t work, int threads) {
  int64_t blocks = (work + threads - 1) / threads;
  // Grid-stride loops cover the rest; enough blocks to fill 132 SMs many times.
  return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

// Same-shape AddRelu, 16 bytes per thread per step.
template <class T, int N>
__global__ void add_relu_vec_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                                    int64_t nvec) {
  pdl_begin();
  using V = Vec<T, N>;
  const V* av = reinterpret_cast<const V*>(a);
  const V* bv = reinterpret_cast<const V*>(b);
  V* yv = reinterpret_cast<V*>(y);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec; i += int64_t(gridDim.x) * blockDim.x) {
    V x = av[i], z = bv[i], o;
#pragma unroll
    for (int k = 0; k < N; ++k) o.v[k] = from_f<T>(fmaxf(to_f(x.v[k]) + to_f(z.v[k]), 0.f));
    yv[i] = o;
  }
}

template <class T>
__global__ void add_relu_scalar_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                                       int64_t begin, int64_t n) {
  pdl_begin();
  for (int64_t i = begin + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f<T>(fmaxf(to_f(a[i]) + to_f(b[i]), 0.f));
}

template <class T>
__global__ void add_relu_bcast_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, int64_t n,
                                      BroadcastShape s) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      int64_t c = rem % s.out_dims[d];
      rem /= s.out_dims[d];
      ia += c * s.a_strides[d];
      ib += c * s.b_strides[d];
    }
    y[i] = from_f<T>(fmaxf(to_f(a[ia]) + to_f(b[ib]), 0.f));
  }
}

// The activation of the pass after the GEMM, in fp32.
enum class PassAct { GeluErf, Tanh, Relu2, QuickGelu, Silu };
template <class T, PassAct A> __device__ __forceinline__ float pass_act(float v) {
  if constexpr (A == PassAct::GeluErf) {
    return gelu_erf_for<T>(v);
  } else if constexpr (A == PassAct::QuickGelu) {
    // CLIP's x * sigmoid(1.702 x) in fp32 (the CPU reference's formula; expf, not __expf).
    return v * (1.f / (1.f + expf(-(v * 1.702f))));
  } else if constexpr (A == PassAct::Silu) {
    return v * (1.f / (1.f + expf(-v)));
  } else if constexpr (A == PassAct::Relu2) {
    // Squared ReLU on the fp32 value, one rounding; NaN stays NaN (the CPU reference's ReLU).
    return v > 0.f ? v * v : (v == v ? 0.f : v);
  } else {
    return tanhf(v);
  }
}

template <class T, PassAct A>
__global__ void bias_act_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t total, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    float v = to_f(y[i]);
    if (bias) v += to_f(bias[i % n]);
    y[i] = from_f<T>(pass_act<T, A>(v));
  }
}

// 16 bytes per vector; n % N == 0, so a vector never straddles two rows. Two
// vectors per thread and iteration, both loaded before either is computed:
// twice the bytes in flight per thread (one at a time left HBM half idle:
// 2.26 TB/s at 4096x3072 fp16, NOTES-perf.md).
template <class T, int N, PassAct A>
__global__ void bias_act_vec_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t nvec, int64_t nv_row) {
  pdl_begin();
  using V = Vec<T, N>;
  V* yv = reinterpret_cast<V*>(y);
  const V* bv = reinterpret_cast<const V*>(bias);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec; i += 2 * stride) {
    const int64_t j = i + stride;
    const bool second = j < nvec;
    V x[2], bb[2];
    x[0] = yv[i];
    if (second) x[1] = yv[j];
    if (bias) {
      bb[0] = bv[i % nv_row];
      if (second) bb[1] = bv[j % nv_row];
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (u == 1 && !second) break;
      V o;
#pragma unroll
      for (int k = 0; k < N; ++k) {
        float v = to_f(x[u].v[k]);
        if (bias) v += to_f(bb[u].v[k]);
        o.v[k] = from_f<T>(pass_act<T, A>(v));
      }
      yv[u == 0 ? i : j] = o;
    }
  }
}

template <class T>
__global__ void broadcast_2d_kernel(const T* __restrict__ c, int64_t cm, int64_t cn, T* __restrict__ y, int64_t M,
                                    int64_t N) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < M * N; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i / N, col = i % N;
    y[i] = c[(cm == 1 ? 0 : r) * cn + (cn == 1 ? 0 : col)];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// In place y += r (FusedMatMul's residual where the GEMM that ran could not add it in its
// epilogue): y is read and written by the same thread, so neither pointer is __restrict__.
template <class T, int N>
__global__ void add_in_place_vec_kernel(T* y, const T* r, int64_t nvec) {
  pdl_begin();
  using V = Vec<T, N>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec; i += int64_t(gridDim.x) * blockDim.x) {
    V a = reinterpret_cast<const V*>(y)[i], b = reinterpret_cast<const V*>(r)[i], o;
#pragma unroll
    for (int k = 0; k < N; ++k) o.v[k] = from_f<T>(to_f(a.v[k]) + to_f(b.v[k]));
    reinterpret_cast<V*>(y)[i] = o;
  }
}

template <class T>
__global__ void add_in_place_scalar_kernel(T* y, const T* r, int64_t begin, int64_t n) {
  pdl_begin();
  for (int64_t i = begin + blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f<T>(to_f(y[i]) + to_f(r[i]));
}

}  // namespace

void launch_add_in_place(DType dt, void* y, const void* r, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  FUSED_DISPATCH_FLOAT(dt, T, {
    T* py = static_cast<T*>(y);
    const T* pr = static_cast<const T*>(r);
    constexpr int N = 16 / sizeof(T);
    int64_t head = 0;
    if (aligned16(y) && aligned16(r)) {
      const int64_t nvec = n / N;
      if (nvec > 0)
        pdl_launch(add_in_place_vec_kernel<T, N>, dim3(grid_for(nvec, kThreads)), dim3(kThreads), 0, stream, py, pr,
                   nvec);
      head = nvec * N;
    }
    if (head < n)
      pdl_launch(add_in_place_scalar_kernel<T>, dim3(grid_for(n - head, kThreads)), dim3(kThreads), 0, stream, py, pr,
                 head, n);
  });
  FUSED_LAUNCH_CHECK("residual add");
}

void launch_add_relu(DType dt, const void* a, const void* b, void* y, int64_t n, const BroadcastShape* bcast,
                     cudaStream_t stream) {
  if (n == 0) return;
  FUSED_DISPATCH_FLOAT(dt, T, {
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    T* py = static_cast<T*>(y);
    if (bcast) {
      pdl_launch(add_relu_bcast_kernel<T>, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, stream, pa, pb, py, n, *bcast);
    } else {
      constexpr int N = 16 / sizeof(T);
      int64_t head = 0;
      if (aligned16(a) && aligned16(b) && aligned16(y)) {
        int64_t nvec = n / N;
        if (nvec > 0)
          pdl_launch(add_relu_vec_kernel<T, N>, dim3(grid_for(nvec, kThreads)), dim3(kThreads), 0, stream, pa, pb, py,
                     nvec);
        head = nvec * N;
      }
      if (head < n)
        pdl_launch(add_relu_scalar_kernel<T>, dim3(grid_for(n - head, kThreads)), dim3(kThreads), 0, stream, pa, pb, py,
                   head, n);
    }
  });
  FUSED_LAUNCH_CHECK("AddRelu");
}

namespace {

template <PassAct A>
void launch_bias_act(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  int64_t total = rows * n;
  if (total == 0) return;
  FUSED_DISPATCH_FLOAT(dt, T, {
    constexpr int N = 16 / sizeof(T);
    if (n % N == 0 && aligned16(y) && (!bias || aligned16(bias))) {
      const int64_t nvec = total / N;
      pdl_launch(bias_act_vec_kernel<T, N, A>, dim3(grid_for((nvec + 1) / 2, kThreads)), dim3(kThreads), 0, stream,
                 static_cast<T*>(y), static_cast<const T*>(bias), nvec, n / N);
    } else {
      pdl_launch(bias_act_kernel<T, A>, dim3(grid_for(total, kThreads)), dim3(kThreads), 0, stream, static_cast<T*>(y),
                 static_cast<const T*>(bias), total, n);
    }
  });
}

}  // namespace

void launch_bias_gelu_erf(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  launch_bias_act<PassAct::GeluErf>(dt, y, bias, rows, n, stream);
  FUSED_LAUNCH_CHECK("bias+GELU(erf)");
}

void launch_bias_tanh(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  launch_bias_act<PassAct::Tanh>(dt, y, bias, rows, n, stream);
  FUSED_LAUNCH_CHECK("bias+tanh");
}

void launch_bias_relu2(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  launch_bias_act<PassAct::Relu2>(dt, y, bias, rows, n, stream);
  FUSED_LAUNCH_CHECK("bias+relu2");
}

void launch_bias_quick_gelu(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  launch_bias_act<PassAct::QuickGelu>(dt, y, bias, rows, n, stream);
  FUSED_LAUNCH_CHECK("bias+quick_gelu");
}

void launch_bias_silu(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream) {
  launch_bias_act<PassAct::Silu>(dt, y, bias, rows, n, stream);
  FUSED_LAUNCH_CHECK("bias+silu");
}

void launch_broadcast_2d(DType dt, const void* c, int64_t cm, int64_t cn, void* y, int64_t M, int64_t N,
                         cudaStream_t stream) {
  if (M * N == 0) return;
  FUSED_DISPATCH_FLOAT(dt, T, {
    pdl_launch(broadcast_2d_kernel<T>, dim3(grid_for(M * N, kThreads)), dim3(kThreads), 0, stream,
               static_cast<const T*>(c), cm, cn, static_cast<T*>(y), M, N);
  });
  FUSED_LAUNCH_CHECK("Gemm C broadcast");
}

}  // namespace fuseopt::cuda_fused
