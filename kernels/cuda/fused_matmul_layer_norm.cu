// Y = LayerNorm(gelu(h)) · gamma (+ beta) over the rows of a GEMM output h: the
// row half of fuseopt.FusedMatMulLayerNorm (kernels/cuda/fused_matmul_layer_norm.h).
// Each row is read once: the GELU'd row stays on chip (registers for rows up
// to 1024 elements, one warp per row, shuffles only; shared memory beyond,
// one block per row), so the variance is computed two-pass from it, as the
// CPU reference and the LayerNorm kernels do (kernels/cuda/fused_norm.cu).
// GELU and statistics in fp32; one rounding to the storage type at the end.
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/fused_matmul_layer_norm.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {
namespace {

using cuda::block_sum;
using cuda::warp_sum;
// The row kernel follows its GEMM directly: its launch overlaps the GEMM's tail.
using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

constexpr int kWarpRowsPerBlock = 4;
// fp32 values of the row one lane holds in the warp kernel (32 lanes x 32 = 1024 elements).
constexpr int kMaxRegFloats = 32;
constexpr size_t kMaxRowSmem = 200 * 1024;

template <class T, LnGelu G>
__device__ __forceinline__ float gelu(float x) {
  if constexpr (G == LnGelu::Tanh) return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  else return gelu_erf_for<T>(x);  // the fast erf for 16-bit storage, as the erf-GELU pass
}

// One warp per row; lane l holds vectors l, l + 32, ... (VPL of them) in fp32 registers.
template <class T, int V, int VPL, LnGelu G>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock) gelu_ln_warp_kernel(GeluLayerNormArgs a) {
  using Vt = Vec<T, V>;
  pdl_begin();  // before the early return: see kernels/cuda/pdl.cuh
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const int nv = static_cast<int>(a.D / V);
  const Vt* h = reinterpret_cast<const Vt*>(static_cast<const T*>(a.h) + row * a.D);
  const Vt* gamma = reinterpret_cast<const Vt*>(a.gamma);
  const Vt* beta = reinterpret_cast<const Vt*>(a.beta);
  Vt* y = reinterpret_cast<Vt*>(static_cast<T*>(a.y) + row * a.D);

  float z[VPL][V];
  float local = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) {
      const Vt hv = h[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        z[j][k] = gelu<T, G>(to_f(hv.v[k]));
        local += z[j][k];
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) z[j][k] = 0.f;
    }
  }
  const float inv_d = 1.f / static_cast<float>(a.D);
  const float mean = warp_sum(local) * inv_d;
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    if (lane + 32 * j < nv) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = z[j][k] - mean;
        sq += d * d;
      }
    }
  const float rstd = rsqrtf(warp_sum(sq) * inv_d + a.eps);
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) {
      const Vt g = gamma[i];
      Vt bt, o;
      if (beta) bt = beta[i];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        float v = (z[j][k] - mean) * rstd * to_f(g.v[k]);
        if (beta) v += to_f(bt.v[k]);
        o.v[k] = from_f<T>(v);
      }
      y[i] = o;
    }
  }
}

// One block per row, the GELU'd row in shared memory (fp32). Each thread reads
// back only the elements it wrote, so the passes need no barrier of their own.
template <class T, int V, LnGelu G>
__global__ void gelu_ln_block_kernel(GeluLayerNormArgs a) {
  extern __shared__ float row_cache[];
  __shared__ float red[32];
  using Vt = Vec<T, V>;
  pdl_begin();
  const int64_t row = blockIdx.x;
  const int64_t nv = a.D / V;
  const Vt* h = reinterpret_cast<const Vt*>(static_cast<const T*>(a.h) + row * a.D);
  const Vt* gamma = reinterpret_cast<const Vt*>(a.gamma);
  const Vt* beta = reinterpret_cast<const Vt*>(a.beta);
  Vt* y = reinterpret_cast<Vt*>(static_cast<T*>(a.y) + row * a.D);

  float local = 0.f;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    const Vt hv = h[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float z = gelu<T, G>(to_f(hv.v[k]));
      row_cache[i * V + k] = z;
      local += z;
    }
  }
  const float inv_d = 1.f / static_cast<float>(a.D);
  const float mean = block_sum(local, red) * inv_d;
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = row_cache[i * V + k] - mean;
      sq += d * d;
    }
  }
  const float rstd = rsqrtf(block_sum(sq, red) * inv_d + a.eps);
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    const Vt g = gamma[i];
    Vt bt, o;
    if (beta) bt = beta[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = (row_cache[i * V + k] - mean) * rstd * to_f(g.v[k]);
      if (beta) v += to_f(bt.v[k]);
      o.v[k] = from_f<T>(v);
    }
    y[i] = o;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

enum class Path { Warp, BlockVec, BlockScalar };
struct Choice {
  Path path = Path::BlockScalar;
  int vpl = 0;  // vectors per lane (warp path)
};

// 16-byte vectors when D and every pointer allow them; then one warp per row
// when the row fits the lane registers, else one block per row.
template <class T>
Choice choose(const GeluLayerNormArgs& a) {
  constexpr int V = 16 / sizeof(T);
  bool vec = a.D % V == 0;
  for (const void* p : {a.h, a.gamma, a.beta, static_cast<const void*>(a.y)})
    if (p && !aligned16(p)) vec = false;
  if (!vec) return {Path::BlockScalar, 0};
  const int64_t nv = a.D / V;
  for (int vpl : {1, 2, 4, 8})
    if (vpl * V <= kMaxRegFloats && nv <= 32 * vpl) return {Path::Warp, vpl};
  return {Path::BlockVec, 0};
}

template <class T, int V, LnGelu G>
void launch_block(const GeluLayerNormArgs& a, cudaStream_t stream) {
  const int64_t nv = a.D / V;
  // About four vectors per thread, as the LayerNorm block kernel (fused_norm.cu).
  int threads = static_cast<int>(((nv / 4 + 31) / 32) * 32);
  threads = threads > 512 ? 512 : threads < 32 ? 32 : threads;
  const size_t smem = static_cast<size_t>(a.D) * sizeof(float);
  FUSE_CHECK(smem <= kMaxRowSmem, "FusedMatMulLayerNorm CUDA kernel: a row of " << a.D
                                                                                << " elements is too long (at most "
                                                                                << kMaxRowSmem / sizeof(float) << ")");
  if (smem > 48 * 1024)
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(gelu_ln_block_kernel<T, V, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "FusedMatMulLayerNorm");
  FUSE_CHECK(a.rows < (int64_t(1) << 31), "FusedMatMulLayerNorm CUDA kernel: too many rows");
  pdl_launch(gelu_ln_block_kernel<T, V, G>, dim3(static_cast<unsigned>(a.rows)), dim3(threads), smem, stream, a);
}

template <class T, LnGelu G>
void launch_typed(const GeluLayerNormArgs& a, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const Choice c = choose<T>(a);
  if (c.path == Path::BlockScalar) return launch_block<T, 1, G>(a, stream);
  if (c.path == Path::BlockVec) return launch_block<T, V, G>(a, stream);
  const int64_t blocks = (a.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
  FUSE_CHECK(blocks < (int64_t(1) << 31), "FusedMatMulLayerNorm CUDA kernel: too many rows");
  const dim3 grid(static_cast<unsigned>(blocks)), block(32 * kWarpRowsPerBlock);
  switch (c.vpl) {
    case 1: pdl_launch(gelu_ln_warp_kernel<T, V, 1, G>, grid, block, 0, stream, a); break;
    case 2: pdl_launch(gelu_ln_warp_kernel<T, V, 2, G>, grid, block, 0, stream, a); break;
    case 4: pdl_launch(gelu_ln_warp_kernel<T, V, 4, G>, grid, block, 0, stream, a); break;
    default:
      if constexpr (8 * V <= kMaxRegFloats) pdl_launch(gelu_ln_warp_kernel<T, V, 8, G>, grid, block, 0, stream, a);
      break;
  }
}

}  // namespace

void launch_gelu_layer_norm(const GeluLayerNormArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.D == 0) return;
  FUSE_CHECK(a.h && a.gamma && a.y, "FusedMatMulLayerNorm CUDA kernel: missing operands");
  FUSED_DISPATCH_FLOAT(a.dtype, T, {
    if (a.gelu == LnGelu::Tanh) launch_typed<T, LnGelu::Tanh>(a, stream);
    else launch_typed<T, LnGelu::Erf>(a, stream);
  });
  FUSED_LAUNCH_CHECK("FusedMatMulLayerNorm");
}

const char* gelu_layer_norm_kernel_name(const GeluLayerNormArgs& a) {
  Choice c;
  FUSED_DISPATCH_FLOAT(a.dtype, T, { c = choose<T>(a); });
  return c.path == Path::Warp ? "warp" : c.path == Path::BlockVec ? "block_vec" : "block_scalar";
}

}  // namespace fuseopt::cuda_fused
