// The one CUDA LayerNorm: fuseopt.LayerNorm / RMSNorm / SkipLayerNorm and
// ONNX LayerNormalization (kernels/cuda/norm.cu) all run launch_norm. Long
// rows: one block per row, the row (x + skip + bias, in fp32) kept in shared
// memory, so the input is read once and the variance is computed two-pass
// (stable) from the cached row; rows beyond 200 KiB of fp32 re-read it per
// pass instead. Rows of at most 1024 elements (BERT-class hidden sizes,
// vectorisable): one warp per row with the row in registers, shuffles only,
// no shared memory or barriers (the block path used 32-thread blocks there,
// one wave of 1-warp blocks).
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/norm_warp.cuh"
#include "kernels/cuda/pdl.cuh"

#include <atomic>
#include <cstdlib>
#include <type_traits>

namespace fuseopt::cuda_fused {

// Benchmarks switch the warp-per-row path off to compare with the block path
// in one process (declared where used: tests/kernels/cuda_norm_warp_test.cc);
// On by default since measured on the H200 (NOTES-perf.md v4: 1.2-1.33x the
// block path at D = 768/1024); FUSEOPT_NORM_WARP_ROWS=0 turns it off for a run.
std::atomic<bool> g_norm_warp_rows{[] {
  const char* e = std::getenv("FUSEOPT_NORM_WARP_ROWS");
  return !(e && e[0] == '0' && e[1] == 0);
}()};
void set_norm_warp_rows(bool on) { g_norm_warp_rows.store(on); }

namespace {

using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

constexpr int kWarpRowsPerBlock = norm_warp::kRowsPerBlock;
using norm_warp::add_centred_squares;
// Rows up to this many bytes of fp32 are cached in shared memory by the block
// kernel; longer ones are re-read from global memory per pass.
constexpr size_t kMaxRowCacheBytes = 200 * 1024;

// One row of a launch_norm call seen as N-element vectors: the operands' row
// pointers and the per-element arithmetic every kernel below shares, so the
// block and warp kernels compute each element the same way.
template <class T, int N, bool Y32>
struct NormRow {
  using V = Vec<T, N>;
  using YT = std::conditional_t<Y32, float, T>;  // y's element type (NormArgs::y_fp32)
  const V* x;
  const V* skip;
  const V* bias;
  const V* gamma;
  const V* beta;
  V* sum;
  YT* y;  // this row's first element

  __device__ __forceinline__ NormRow(const NormArgs& a, int64_t row)
      : x(reinterpret_cast<const V*>(static_cast<const T*>(a.x) + row * a.D)),
        skip(a.skip ? reinterpret_cast<const V*>(static_cast<const T*>(a.skip) + (row % a.skip_rows) * a.D) : nullptr),
        bias(reinterpret_cast<const V*>(a.bias)),
        gamma(reinterpret_cast<const V*>(a.gamma)),
        beta(reinterpret_cast<const V*>(a.beta)),
        sum(a.sum ? reinterpret_cast<V*>(static_cast<T*>(a.sum) + row * a.D) : nullptr),
        y(static_cast<YT*>(a.y) + row * a.D) {}

  // z = (x + bias) + skip at vector i, in fp32 (the reference's order), and Sum
  // written when the call has one.
  __device__ __forceinline__ void load_z(int64_t i, float (&z)[N]) const {
    V xv = x[i];
    V sv, bv;
    if (skip) sv = skip[i];
    if (bias) bv = bias[i];
    V zout;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      z[k] = to_f(xv.v[k]);
      if (bias) z[k] += to_f(bv.v[k]);
      if (skip) z[k] += to_f(sv.v[k]);
      zout.v[k] = from_f<T>(z[k]);
    }
    if (sum) sum[i] = zout;
  }
  // z again for a later pass (no Sum write).
  __device__ __forceinline__ void reload_z(int64_t i, float (&z)[N]) const {
    V xv = x[i];
    V sv, bv;
    if (skip) sv = skip[i];
    if (bias) bv = bias[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      z[k] = to_f(xv.v[k]);
      if (bias) z[k] += to_f(bv.v[k]);
      if (skip) z[k] += to_f(sv.v[k]);
    }
  }
  // y = (z - mean) * rstd * gamma (+ beta) at vector i; no gamma: 1 (the session's RMSNorm
  // folded into a GatedMatMul whose weight holds gamma, on the rows the norm runs first).
  __device__ __forceinline__ void store_y(int64_t i, const float (&z)[N], float mean, float rstd) const {
    V g, bt;
    if (gamma) g = gamma[i];
    if (beta) bt = beta[i];
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[k] = gamma ? (z[k] - mean) * rstd * to_f(g.v[k]) : (z[k] - mean) * rstd;
      if (beta) v[k] += to_f(bt.v[k]);
    }
    if constexpr (Y32 && N % 4 == 0) {  // fp32 y: N/4 16-byte stores
#pragma unroll
      for (int q = 0; q < N / 4; ++q)
        reinterpret_cast<Vec<float, 4>*>(y + i * N)[q] = Vec<float, 4>{{v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]}};
    } else {
      Vec<YT, N> o;
#pragma unroll
      for (int k = 0; k < N; ++k) o.v[k] = from_f<YT>(v[k]);
      reinterpret_cast<Vec<YT, N>*>(y)[i] = o;
    }
  }
};

// 1/sqrt(reduced / D + eps): the row's rstd from its reduced mean square or
// centred sum of squares.
__device__ __forceinline__ float norm_rstd(float reduced, float inv_d, float eps) {
  return rsqrtf(reduced * inv_d + eps);
}

// The optional fp32 statistics outputs of one row (one thread writes them).
__device__ __forceinline__ void store_stats(const NormArgs& a, int64_t row, float mean, float rstd) {
  if (a.mean) a.mean[row] = mean;
  if (a.inv_std) a.inv_std[row] = rstd;
}

// One block per row. CACHED: the row (x + skip + bias, in fp32) is kept in
// dynamic shared memory, so the input is read once; otherwise (rows beyond
// kMaxRowCacheBytes: ONNX LayerNormalization over several axes) z is
// recomputed from global memory in each pass. Same arithmetic either way.
template <class T, int N, bool CACHED, bool Y32>
__global__ void norm_block_kernel(NormArgs a) {
  extern __shared__ float row_cache[];
  __shared__ float red[32];
  pdl_begin();  // launched through pdl_launch: nothing global is touched before this
  const int64_t row = blockIdx.x;
  const int64_t D = a.D;
  const int64_t nv = D / N;
  const NormRow<T, N, Y32> r(a, row);
  auto z_again = [&](int64_t i, float (&z)[N]) {  // z of vector i in the later passes
    if constexpr (CACHED) {
#pragma unroll
      for (int k = 0; k < N; ++k) z[k] = row_cache[i * N + k];
    } else {
      r.reload_z(i, z);
    }
  };

  float local = 0.f;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float z[N];
    r.load_z(i, z);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if constexpr (CACHED) row_cache[i * N + k] = z[k];
      local += a.rms ? z[k] * z[k] : z[k];
    }
  }
  const float inv_d = 1.f / static_cast<float>(D);
  float mean = 0.f, rstd;
  if (a.rms) {
    rstd = norm_rstd(block_sum(local, red), inv_d, a.eps);
  } else {
    mean = block_sum(local, red) * inv_d;
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float z[N];
      z_again(i, z);
      add_centred_squares(sq, z, mean);
    }
    rstd = norm_rstd(block_sum(sq, red), inv_d, a.eps);
  }
  if (threadIdx.x == 0) store_stats(a, row, mean, rstd);
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float z[N];
    z_again(i, z);
    r.store_y(i, z, mean, rstd);
  }
}

// One warp per row; lane l holds vectors l, l+32, ... (VPL of them) in fp32
// registers. Same arithmetic order per element as norm_block_kernel.
template <class T, int N, int VPL, bool Y32>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock) norm_warp_kernel(NormArgs a) {
  pdl_begin();  // before the early return: see kernels/cuda/pdl.cuh
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const int64_t D = a.D;
  const int nv = static_cast<int>(D / N);
  const NormRow<T, N, Y32> r(a, row);

  float z[VPL][N];
  float local = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) {
      r.load_z(i, z[j]);
#pragma unroll
      for (int k = 0; k < N; ++k) local += a.rms ? z[j][k] * z[j][k] : z[j][k];
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) z[j][k] = 0.f;
    }
  }
  const float inv_d = 1.f / static_cast<float>(D);
  float mean = 0.f, rstd;
  if (a.rms) {
    rstd = norm_rstd(warp_sum(local), inv_d, a.eps);
  } else {
    mean = warp_sum(local) * inv_d;
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < VPL; ++j)
      if (lane + 32 * j < nv) add_centred_squares(sq, z[j], mean);
    rstd = norm_rstd(warp_sum(sq), inv_d, a.eps);
  }
  if (lane == 0) store_stats(a, row, mean, rstd);
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) r.store_y(i, z[j], mean, rstd);
  }
}

template <class T, int N, int VPL, bool Y32>
void launch_norm_warp_t(const NormArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
  FUSE_CHECK(blocks < (int64_t(1) << 31), "LayerNorm CUDA kernel: too many rows");
  pdl_launch(norm_warp_kernel<T, N, VPL, Y32>, dim3(static_cast<unsigned>(blocks)), dim3(32 * kWarpRowsPerBlock), 0, stream,
             a);
}

// Picks the smallest vectors-per-lane count covering the row, keeping at most
// 32 fp32 values per lane in registers; false when the row is too long.
template <class T, int N, bool Y32>
bool try_launch_norm_warp(const NormArgs& a, cudaStream_t stream) {
  return norm_warp::with_lane_vectors<N>(
      a.D / N, [&](auto vpl) { launch_norm_warp_t<T, N, decltype(vpl)::value, Y32>(a, stream); });
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

constexpr int64_t kFewRows = 256;  // about two rows per SM on a 132-SM H200

template <class T, int N, bool Y32>
void launch_norm_t(const NormArgs& a, cudaStream_t stream) {
  int64_t nv = a.D / N;
  // About four vectors per thread: several loads in flight per thread and
  // small blocks, so many rows are resident per SM (run 2: one vector per
  // thread in 512-thread blocks reached 2.1-2.4 TB/s).
  int threads = static_cast<int>(((nv / 4 + 31) / 32) * 32);
  // Few rows (a decode step: 1-8 rows of 2048; short prefill) leave most SMs
  // idle, so each row's latency is the kernel's: one vector per thread
  // instead (decode budget, NOTES-perf.md v12: 64 threads per row took 6.3 us
  // for one 2048-wide row, 33 times per Llama-1B step).
  if (a.rows < kFewRows) threads = static_cast<int>(((nv + 31) / 32) * 32);
  if (threads > 512) threads = 512;
  if (threads < 32) threads = 32;
  size_t smem = static_cast<size_t>(a.D) * sizeof(float);
  FUSE_CHECK(a.rows < (int64_t(1) << 31), "LayerNorm CUDA kernel: too many rows");
  if (smem > kMaxRowCacheBytes) {
    pdl_launch(norm_block_kernel<T, N, false, Y32>, dim3(static_cast<unsigned>(a.rows)), dim3(threads), 0, stream, a);
    return;
  }
  if (smem > 48 * 1024)
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(norm_block_kernel<T, N, true, Y32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "LayerNorm");
  pdl_launch(norm_block_kernel<T, N, true, Y32>, dim3(static_cast<unsigned>(a.rows)), dim3(threads), smem, stream, a);
}

// T inputs, y in T or fp32 (Y32): the warp-per-row kernel where the row vectorises and fits a
// warp's registers, else the block kernel (vectorised or element-wise).
template <class T, bool Y32>
void launch_norm_as(const NormArgs& a, cudaStream_t stream) {
  constexpr int N = 16 / sizeof(T);
  bool vec = a.D % N == 0;
  for (const void* p : {a.x, a.skip, a.bias, a.gamma, a.beta, static_cast<const void*>(a.y),
                        static_cast<const void*>(a.sum)})
    if (p && !aligned16(p)) vec = false;
  if (vec && g_norm_warp_rows.load(std::memory_order_relaxed) && try_launch_norm_warp<T, N, Y32>(a, stream)) {
    // launched
  } else if (vec)
    launch_norm_t<T, N, Y32>(a, stream);
  else
    launch_norm_t<T, 1, Y32>(a, stream);
}

}  // namespace

void launch_norm(const NormArgs& a, cudaStream_t stream) {
  if (a.rows == 0) return;
  FUSE_CHECK(a.D > 0 && a.x && a.y, "LayerNorm CUDA kernel: missing operands");
  FUSE_CHECK(!a.skip || a.skip_rows > 0, "SkipLayerNorm CUDA kernel: skip_rows must be positive");
  FUSE_CHECK(!a.y_fp32 || a.dtype != DType::Float, "LayerNorm CUDA kernel: y_fp32 is for 16-bit inputs");
  FUSED_DISPATCH_FLOAT(a.dtype, T, {
    if constexpr (std::is_same_v<T, float>)
      launch_norm_as<T, false>(a, stream);
    else if (a.y_fp32)
      launch_norm_as<T, true>(a, stream);
    else
      launch_norm_as<T, false>(a, stream);
  });
  FUSED_LAUNCH_CHECK("LayerNorm");
}

}  // namespace fuseopt::cuda_fused
