// fuseopt.EmbedLayerNorm kernels (embed_layer_norm.h). Rows of at most 1024
// elements in whole 16-byte vectors (BERT-class hidden sizes): one warp per
// row, lane l holding vectors l, l+32, ... in fp32 registers, as
// norm_warp_kernel in fused_norm.cu does for the other norms; each table row
// is read straight from the table by its id, so nothing but the output is
// written (the unfused graph wrote and re-read every gathered row and the
// sum). Other rows: one block per row with the summed row cached in shared
// memory (fp32), up to kMaxRowCacheBytes; longer rows are refused with an
// Error (no embedding table is that wide).
//
// Arithmetic, the same in both kernels and in the CPU kernel: z = t0 + t1
// (+ t2) in fp32 in lookup order; mean = sum(z) / D; var = sum((z - mean)^2) / D
// (two passes over the cached row, stable); y = (z - mean) * rsqrt(var + eps)
// * gamma (+ beta), rounded once to T.
#include "kernels/cuda/embed_layer_norm.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/norm_warp.cuh"
#include "kernels/cuda/pdl.cuh"

#include <atomic>

namespace fuseopt::cuda_fused {

namespace {
std::atomic<bool> g_embed_warp_rows{true};
}
void set_embed_warp_rows(bool on) { g_embed_warp_rows.store(on); }

namespace {

using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

constexpr int kWarpRowsPerBlock = norm_warp::kRowsPerBlock;
using norm_warp::add_centred_squares;
constexpr size_t kMaxRowCacheBytes = 200 * 1024;

// The lookup's table row for output row `row`, or nullptr (a zero row) when
// its id is out of range; `reporter` threads record that id (index_errors.h).
template <class T>
__device__ __forceinline__ const T* table_row(const EmbedLayerNormArgs& a, const EmbedLookup& l, int64_t row,
                                             bool reporter) {
  int64_t off = 0, rem = row;
  for (int d = a.rank - 1; d >= 0; --d) {
    const int64_t n = a.dims[d];
    off += (rem % n) * l.strides[d];
    rem /= n;
  }
  const int64_t v = l.ids32 ? static_cast<int64_t>(static_cast<const int32_t*>(l.ids)[off])
                            : static_cast<const int64_t*>(l.ids)[off];
  const int64_t k = v < 0 ? v + l.rows : v;
  if (k < 0 || k >= l.rows) {
    if (reporter) cuda::report_bad_index(a.err, v, l.rows);
    return nullptr;
  }
  return static_cast<const T*>(l.table) + k * a.D;
}

// One output row: its table rows and the per-vector arithmetic both kernels share.
template <class T, int N>
struct EmbedRow {
  using V = Vec<T, N>;
  const V* src[kEmbedMaxLookups];
  int n;
  const V* gamma;
  const V* beta;
  V* y;

  __device__ __forceinline__ EmbedRow(const EmbedLayerNormArgs& a, int64_t row, bool reporter)
      : n(a.num_lookups),
        gamma(reinterpret_cast<const V*>(a.gamma)),
        beta(reinterpret_cast<const V*>(a.beta)),
        y(reinterpret_cast<V*>(static_cast<T*>(a.y) + row * a.D)) {
#pragma unroll
    for (int j = 0; j < kEmbedMaxLookups; ++j)
      src[j] = j < n ? reinterpret_cast<const V*>(table_row<T>(a, a.lookups[j], row, reporter)) : nullptr;
  }

  // z = t0 + t1 (+ t2) at vector i, in fp32, lookup order (a bad id adds nothing).
  __device__ __forceinline__ void load_z(int64_t i, float (&z)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) z[k] = 0.f;
#pragma unroll
    for (int j = 0; j < kEmbedMaxLookups; ++j) {
      if (j >= n || !src[j]) continue;
      const V v = src[j][i];
#pragma unroll
      for (int k = 0; k < N; ++k) z[k] += to_f(v.v[k]);
    }
  }

  __device__ __forceinline__ void store_y(int64_t i, const float (&z)[N], float mean, float rstd) const {
    V g = gamma[i], b, o;
    if (beta) b = beta[i];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float v = (z[k] - mean) * rstd * to_f(g.v[k]);
      if (beta) v += to_f(b.v[k]);
      o.v[k] = from_f<T>(v);
    }
    y[i] = o;
  }
};

// One warp per row, VPL vectors of N elements per lane in registers.
template <class T, int N, int VPL>
__global__ void __launch_bounds__(32 * kWarpRowsPerBlock) embed_warp_kernel(EmbedLayerNormArgs a) {
  pdl_begin();  // before the early return: see kernels/cuda/pdl.cuh
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpRowsPerBlock + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  const int nv = static_cast<int>(a.D / N);
  const EmbedRow<T, N> r(a, row, lane == 0);
  float z[VPL][N];
  float local = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) {
      r.load_z(i, z[j]);
#pragma unroll
      for (int k = 0; k < N; ++k) local += z[j][k];
    } else {
#pragma unroll
      for (int k = 0; k < N; ++k) z[j][k] = 0.f;
    }
  }
  const float inv_d = 1.f / static_cast<float>(a.D);
  const float mean = warp_sum(local) * inv_d;
  float sq = 0.f;
#pragma unroll
  for (int j = 0; j < VPL; ++j)
    if (lane + 32 * j < nv) add_centred_squares(sq, z[j], mean);
  const float rstd = rsqrtf(warp_sum(sq) * inv_d + a.eps);
#pragma unroll
  for (int j = 0; j < VPL; ++j) {
    const int i = lane + 32 * j;
    if (i < nv) r.store_y(i, z[j], mean, rstd);
  }
}

// One block per row, the summed row cached in dynamic shared memory (fp32).
template <class T, int N>
__global__ void embed_block_kernel(EmbedLayerNormArgs a) {
  extern __shared__ float row_cache[];
  __shared__ float red[32];
  pdl_begin();
  const int64_t row = blockIdx.x;
  const int64_t nv = a.D / N;
  const EmbedRow<T, N> r(a, row, threadIdx.x == 0);
  float local = 0.f;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float z[N];
    r.load_z(i, z);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      row_cache[i * N + k] = z[k];
      local += z[k];
    }
  }
  const float inv_d = 1.f / static_cast<float>(a.D);
  const float mean = block_sum(local, red) * inv_d;
  float sq = 0.f;
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float z[N];
#pragma unroll
    for (int k = 0; k < N; ++k) z[k] = row_cache[i * N + k];
    add_centred_squares(sq, z, mean);
  }
  const float rstd = rsqrtf(block_sum(sq, red) * inv_d + a.eps);
  for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
    float z[N];
#pragma unroll
    for (int k = 0; k < N; ++k) z[k] = row_cache[i * N + k];
    r.store_y(i, z, mean, rstd);
  }
}

template <class T, int N, int VPL>
void launch_warp_t(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  const int64_t blocks = (a.rows + kWarpRowsPerBlock - 1) / kWarpRowsPerBlock;
  pdl_launch(embed_warp_kernel<T, N, VPL>, dim3(static_cast<unsigned>(blocks)), dim3(32 * kWarpRowsPerBlock), 0,
             stream, a);
}

// The smallest vectors-per-lane count covering the row (at most 32 fp32
// values per lane, as the norm's warp path); false when the row is longer.
template <class T, int N>
bool try_launch_warp(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  return norm_warp::with_lane_vectors<N>(a.D / N,
                                         [&](auto vpl) { launch_warp_t<T, N, decltype(vpl)::value>(a, stream); });
}

template <class T, int N>
void launch_block_t(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  const int64_t nv = a.D / N;
  int threads = static_cast<int>(((nv / 4 + 31) / 32) * 32);  // about four vectors a thread
  if (threads > 512) threads = 512;
  if (threads < 32) threads = 32;
  const size_t smem = static_cast<size_t>(a.D) * sizeof(float);
  if (smem > 48 * 1024)
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(embed_block_kernel<T, N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "EmbedLayerNorm");
  pdl_launch(embed_block_kernel<T, N>, dim3(static_cast<unsigned>(a.rows)), dim3(threads), smem, stream, a);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

void launch_embed_layer_norm(const EmbedLayerNormArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.D == 0) return;
  FUSE_CHECK(a.gamma && a.y && a.num_lookups >= 1 && a.num_lookups <= kEmbedMaxLookups,
             "EmbedLayerNorm CUDA kernel: missing operands");
  FUSE_CHECK(a.rank >= 0 && a.rank <= kEmbedMaxRank, "EmbedLayerNorm CUDA kernel: index rank " << a.rank << " > "
                                                                                             << kEmbedMaxRank);
  FUSE_CHECK(a.rows < (int64_t(1) << 31), "EmbedLayerNorm CUDA kernel: too many rows");
  FUSE_CHECK(static_cast<size_t>(a.D) * sizeof(float) <= kMaxRowCacheBytes,
             "EmbedLayerNorm CUDA kernel: rows of " << a.D << " elements exceed the " << kMaxRowCacheBytes / 1024
                                                    << " KiB row cache");
  FUSED_DISPATCH_FLOAT(a.dtype, T, {
    constexpr int N = 16 / sizeof(T);
    bool vec = a.D % N == 0 && aligned16(a.gamma) && aligned16(a.y) && (!a.beta || aligned16(a.beta));
    for (int j = 0; j < a.num_lookups; ++j) vec = vec && aligned16(a.lookups[j].table);
    if (vec && g_embed_warp_rows.load(std::memory_order_relaxed) && try_launch_warp<T, N>(a, stream)) {
      // launched
    } else if (vec) {
      launch_block_t<T, N>(a, stream);
    } else {
      launch_block_t<T, 1>(a, stream);
    }
  });
  FUSED_LAUNCH_CHECK("EmbedLayerNorm");
}

}  // namespace fuseopt::cuda_fused
