// Weight-streaming GEMM for M <= 8 rows (gemm_small_m.h): a decode step's
// projections are GEMVs whose time is the weights' bytes over HBM bandwidth,
// so the kernel is built around keeping enough 16-byte weight loads in flight
// on every SM, with the K reduction done in the same launch.
//
// Row-major B [K, N] (ONNX MatMul weights): a block owns a 64-column tile
// (128 bytes of each weight row: 8 lanes x 16 B, full cache lines) and a
// slice of K; its 256 threads walk that slice 32 rows per step, 8 steps of
// loads in flight per thread (32 KB per block). A tile of 64 columns gives
// only N / 64 blocks (32 for N = 2048), so K is split over the blocks of a
// thread-block cluster (grid y = cluster y = S <= 8): each block reduces its
// part in shared memory (warp shuffles, then the 8 warps in order), and the
// cluster's blocks add the S parts in rank order through distributed shared
// memory. One launch, no scratch, no atomics: bit-identical on every run and
// graph replay. A's slice (at most 8 rows) is staged per block into shared
// memory while the first weight loads are in flight.
//
// B stored [N, K] (trans_b): each output column is one contiguous weight row,
// a plain GEMV: a block owns 4 columns, its threads split K in 16-byte
// chunks, and the block reduces (shuffles, then warps in order). No split
// across blocks is needed: N / 4 blocks.
//
// Launched with programmatic dependent launch (pdl.cuh's contract: every
// thread waits before its first global access) and, for [K, N], the cluster
// dimension attribute, which pdl_launch has no slot for: launch_ex below
// does what pdl_launch does with both attributes.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemm_small_m_common.cuh"
#include "kernels/cuda/gemv_nk_mma.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {

namespace {

namespace cg = cooperative_groups;
using namespace small_m;

constexpr int kTileN = 64;         // [K, N]: columns per block (8 chunks of 8)
constexpr int kRowsPerStep = 32;   // [K, N]: weight rows one load instruction of the block covers
constexpr int kUnroll = 8;         // [K, N]: independent 16-byte weight loads per thread in flight
constexpr int kMaxSplits = 8;      // portable cluster size
constexpr size_t kMaxSliceBytes = 64 << 10;  // A's fp32 slice per block, before K is split further

// Shared memory of the [K, N] kernel: per-warp sums, the block's part (read
// by the cluster), A's slice.
constexpr size_t kn_fixed_smem(int mr) { return size_t(kWarps + 1) * mr * kTileN * sizeof(float); }

template <class T, int MR>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_kn_kernel(const T* __restrict__ A, const T* __restrict__ B, const T* __restrict__ bias, T* __restrict__ Y,
                   const T* __restrict__ R, int M, int N, int K, int k_len, GemvAct act, float alpha, int gate_n, GateActivation gate,
                   WeightPrefetch wp) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* red = reinterpret_cast<float*>(smem_raw);  // [kWarps][MR][kTileN]
  float* part = red + kWarps * MR * kTileN;          // [MR][kTileN]
  float* xs = part + MR * kTileN;                    // [MR][k_len], fp32: no conversion per use
  cg::cluster_group cluster = cg::this_cluster();
  // A may be the previous kernel's output, Y a buffer it still reads: both after the wait; a
  // constant B's first loads before it (WeightPrefetch).
  if (!wp.early) cuda_pdl::pdl_begin();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int chunk = lane & 7;                 // 8-column chunk of the tile
  const int sub = warp * 4 + (lane >> 3);     // row within a 32-row step
  // Gated (gate_n > 0, B [K, 2 gate_n]): the tile is 32 gate columns (chunks
  // 0-3) and the 32 up columns they multiply (chunks 4-7, gate_n further on).
  const bool gated = gate_n > 0;
  const int n0 = blockIdx.x * (gated ? kTileN / 2 : kTileN);
  const int col = gated ? n0 + (chunk & 3) * 8 + (chunk >= 4 ? gate_n : 0) : n0 + chunk * 8;
  const bool col_ok = gated ? n0 + (chunk & 3) * 8 < gate_n : col < N;  // N % 8 == 0: all in or all out
  const int k_begin = blockIdx.y * k_len;
  const int rows = max(0, min(K - k_begin, k_len));
  const T* bp = B + (int64_t(k_begin) + sub) * N + col;

  // The first 8 steps' weights are requested before A is staged, so the
  // staging's latency hides behind them.
  uint4 bv[kUnroll];
  auto load = [&](int r0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = r0 + sub + kRowsPerStep * u;
      bv[u] = col_ok && r < rows ? __ldg(reinterpret_cast<const uint4*>(bp + int64_t(r0 + kRowsPerStep * u) * N))
                                 : make_uint4(0u, 0u, 0u, 0u);
    }
  };
  load(0);
  if (wp.early) cuda_pdl::pdl_begin();
  // A's slice as fp32, row by row (16-byte loads where K allows; k_begin and
  // k_len are multiples of 32), several loads in flight per thread; rows past
  // M are zeros.
  if ((K & 7) == 0 && (reinterpret_cast<uintptr_t>(A) & 15) == 0) {
    const int vr = rows >> 3, total = MR * vr;
    for (int i0 = 0; i0 < total; i0 += 4 * kThreads) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * kThreads + tid, m = i / vr, q = i - m * vr;
        v[u] = i < total && m < M ? __ldg(reinterpret_cast<const uint4*>(A + int64_t(m) * K + k_begin) + q)
                                  : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = i0 + u * kThreads + tid, m = i / vr, q = i - m * vr;
        if (i < total) {
          float f[8];
          unpack8<T>(v[u], f);
          float4* d = reinterpret_cast<float4*>(xs + m * k_len + q * 8);
          d[0] = make_float4(f[0], f[1], f[2], f[3]);
          d[1] = make_float4(f[4], f[5], f[6], f[7]);
        }
      }
    }
  } else {
    const int total = MR * rows;
    for (int i0 = 0; i0 < total; i0 += 8 * kThreads) {
      T v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = i0 + u * kThreads + tid, m = i / rows, r = i - m * rows;
        v[u] = i < total && m < M ? A[int64_t(m) * K + k_begin + r] : from_f<T>(0.f);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = i0 + u * kThreads + tid, m = i / rows, r = i - m * rows;
        if (i < total) xs[m * k_len + r] = to_f(v[u]);
      }
    }
  }
  __syncthreads();

  float acc[MR][8];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.f;
  for (int r0 = 0; r0 < rows; r0 += kRowsPerStep * kUnroll) {
    if (r0 > 0) load(r0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int r = r0 + sub + kRowsPerStep * u;
      if (r < rows) {
        float b[8], x[MR];
        unpack8<T>(bv[u], b);
#pragma unroll
        for (int m = 0; m < MR; ++m) x[m] = xs[m * k_len + r];
#pragma unroll
        for (int m = 0; m < MR; ++m)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[m][j] = fmaf(x[m], b[j], acc[m][j]);
      }
    }
  }

  // The 4 lanes of a warp on the same chunk (lane, lane ^ 8, ^ 16, ^ 24);
  // then the warps, in order.
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float v = acc[m][j];
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      acc[m][j] = v;
    }
  if (lane < 8) {
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      float4* d = reinterpret_cast<float4*>(red + (warp * MR + m) * kTileN + chunk * 8);
      d[0] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      d[1] = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
    }
  }
  __syncthreads();
  for (int i = tid; i < MR * kTileN; i += kThreads) {
    float s = red[i];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += red[w * MR * kTileN + i];
    part[i] = s;
  }
  cluster.sync();  // every block's part is written and visible to the cluster

  // Output chunk c (row c / 8, columns n0 + 8 (c % 8)) is finished by block
  // rank c % S: the S parts added in rank order.
  const int S = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  if (gated) {
    // Output chunk c: row c / 4, columns n0 + 8 (c % 4) of Y [M, gate_n];
    // its gate sums at part chunk (row, c % 4), its up sums 4 chunks on.
    for (int c = rank + tid * S; c < MR * 4; c += kThreads * S) {
      const int m = c >> 2, q = c & 3, cn = n0 + q * 8;
      if (m >= M || cn >= gate_n) continue;
      float g[8], u[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) g[j] = u[j] = 0.f;
      for (int s = 0; s < S; ++s) {
        const float4* p = reinterpret_cast<const float4*>(cluster.map_shared_rank(part, s) + m * kTileN + q * 8);
        const float4 a = p[0], b = p[1], c0 = p[8], c1 = p[9];  // p[8]: 32 floats on, the up chunk
        g[0] += a.x, g[1] += a.y, g[2] += a.z, g[3] += a.w, g[4] += b.x, g[5] += b.y, g[6] += b.z, g[7] += b.w;
        u[0] += c0.x, u[1] += c0.y, u[2] += c0.z, u[3] += c0.w, u[4] += c1.x, u[5] += c1.y, u[6] += c1.z,
            u[7] += c1.w;
      }
      Vec<T, 8> o;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float gb = alpha * g[j] + (bias ? to_f(bias[cn + j]) : 0.f);
        const float ub = alpha * u[j] + (bias ? to_f(bias[gate_n + cn + j]) : 0.f);
        o.v[j] = from_f<T>(gate_activate(gate, gb) * ub);
      }
      *reinterpret_cast<Vec<T, 8>*>(Y + int64_t(m) * gate_n + cn) = o;
    }
  }
  for (int c = rank + tid * S; !gated && c < MR * 8; c += kThreads * S) {
    const int m = c >> 3, cn = n0 + (c & 7) * 8;
    if (m >= M || cn >= N) continue;
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 0.f;
    for (int s = 0; s < S; ++s) {
      const float4* p = reinterpret_cast<const float4*>(cluster.map_shared_rank(part, s)) + c * 2;
      const float4 a = p[0], b = p[1];
      v[0] += a.x, v[1] += a.y, v[2] += a.z, v[3] += a.w;
      v[4] += b.x, v[5] += b.y, v[6] += b.z, v[7] += b.w;
    }
    store_out<T, 8>(Y + int64_t(m) * N + cn, bias ? bias + cn : nullptr, v, act, alpha,
                    R ? R + int64_t(m) * N + cn : nullptr);
  }
  cluster.sync();  // no block leaves while another still reads its part
}

template <class T, int MR>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_nk_kernel(const T* __restrict__ A, const T* __restrict__ B, const T* __restrict__ bias, T* __restrict__ Y,
                   const T* __restrict__ R, int M, int N, int K, GemvAct act, float alpha, WeightPrefetch wp) {
  __shared__ float red[kWarps][MR * kColsT];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * kColsT;  // N % 8 == 0: the block's 4 columns all exist
  const int chunks = K / 8;
  // The first chunk's weights are requested before the wait where B is a constant
  // (WeightPrefetch); the loop's shape is the original one (registers as before).
  uint4 bv[kColsT];
  auto load_b = [&](int c) {
#pragma unroll
    for (int j = 0; j < kColsT; ++j)
      bv[j] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(B + int64_t(n0 + j) * K) + c)
                         : make_uint4(0u, 0u, 0u, 0u);
  };
  if (wp.early) load_b(tid);
  cuda_pdl::pdl_begin();
  if (!wp.early) load_b(tid);
  float acc[MR][kColsT];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int j = 0; j < kColsT; ++j) acc[m][j] = 0.f;
  for (int c = tid; c < chunks; c += kThreads) {
    uint4 av[MR];
    if (c != tid) load_b(c);
#pragma unroll
    for (int m = 0; m < MR; ++m)
      av[m] = m < M ? __ldg(reinterpret_cast<const uint4*>(A + int64_t(m) * K) + c) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      float a[8];
      unpack8<T>(av[m], a);
#pragma unroll
      for (int j = 0; j < kColsT; ++j) {
        float b[8];
        unpack8<T>(bv[j], b);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][j] = fmaf(a[e], b[e], acc[m][j]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int j = 0; j < kColsT; ++j) {
      float v = acc[m][j];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[m][j] = v;
    }
  if (lane == 0) {
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int j = 0; j < kColsT; ++j) red[warp][m * kColsT + j] = acc[m][j];
  }
  __syncthreads();
  if (tid < M) {
    float v[kColsT];
#pragma unroll
    for (int j = 0; j < kColsT; ++j) {
      float s = red[0][tid * kColsT + j];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) s += red[w][tid * kColsT + j];
      v[j] = s;
    }
    store_out<T, kColsT>(Y + int64_t(tid) * N + n0, bias ? bias + n0 : nullptr, v, act, alpha,
                         R ? R + int64_t(tid) * N + n0 : nullptr);
  }
}

// gate_n > 0: GatedMatMul, N = 2 gate_n columns of B, Y [M, gate_n].
template <class T, int MR>
bool launch_kn(GemvAct act, const T* A, const T* B, const T* bias, T* Y, const T* R, int M, int N, int K, float alpha,
               cudaStream_t stream, bool b_const, int gate_n = 0, GateActivation gate = GateActivation::Silu) {
  const DeviceInfo info = device_info();
  if (!info.clusters || info.sms <= 0) return false;
  const int tiles = gate_n > 0 ? (gate_n + kTileN / 2 - 1) / (kTileN / 2) : (N + kTileN - 1) / kTileN;
  // Enough blocks for blocks_per_sm() per SM, at least one 32-row step each,
  // and A's slice within kMaxSliceBytes where the split allows.
  int S = std::clamp((info.sms * blocks_per_sm() + tiles - 1) / tiles, 1, kMaxSplits);
  S = std::min(S, (K + kRowsPerStep - 1) / kRowsPerStep);
  while (S < kMaxSplits && size_t((K + S - 1) / S) * MR * sizeof(float) > kMaxSliceBytes) ++S;
  const int k_len = ((K + S - 1) / S + kRowsPerStep - 1) / kRowsPerStep * kRowsPerStep;  // 16-byte A rows
  S = (K + k_len - 1) / k_len;  // no empty split
  const size_t smem = kn_fixed_smem(MR) + size_t(k_len) * MR * sizeof(float);
  if (smem > (200u << 10)) return false;
  auto kernel = gemv_kn_kernel<T, MR>;
  // Past 48 KB needs the opt-in, per function and device: set on every call
  // (not cached, so a second GPU gets it too; graph replays do not come here).
  if (smem > (48u << 10) &&
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return launch_ex(kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(S)), smem,
                   static_cast<unsigned>(S), stream, A, B, bias, Y, R, M, N, K, k_len, act, alpha, gate_n, gate,
                   plan_weight_prefetch(b_const));
}

template <class T, int MR>
bool launch_nk(GemvAct act, const T* A, const T* B, const T* bias, T* Y, const T* R, int M, int N, int K,
               float alpha, cudaStream_t stream, bool b_const) {
  return launch_ex(gemv_nk_kernel<T, MR>, dim3(static_cast<unsigned>(N / kColsT)), 0, 0, stream, A, B, bias, Y, R, M,
                   N, K, act, alpha, plan_weight_prefetch(b_const));
}

template <class T, int MR>
bool launch_mr(GemvAct act, const void* A, const void* B, const void* bias, void* Y, const void* R, int M, int N,
               int K, bool trans_b, float alpha, cudaStream_t stream, bool b_const) {
  const T* a = static_cast<const T*>(A);
  const T* b = static_cast<const T*>(B);
  const T* bs = static_cast<const T*>(bias);
  T* y = static_cast<T*>(Y);
  const T* r = static_cast<const T*>(R);
  return trans_b ? launch_nk<T, MR>(act, a, b, bs, y, r, M, N, K, alpha, stream, b_const)
                 : launch_kn<T, MR>(act, a, b, bs, y, r, M, N, K, alpha, stream, b_const);
}

// M rounded up to 1, 2, 4 or 8 (the rows past M are zeros, never stored).
template <class T>
bool launch_t(GemvAct act, const void* A, const void* B, const void* bias, void* Y, const void* R, int M, int N,
              int K, bool trans_b, float alpha, cudaStream_t stream, bool b_const) {
  if (M == 1) return launch_mr<T, 1>(act, A, B, bias, Y, R, M, N, K, trans_b, alpha, stream, b_const);
  if (M == 2) return launch_mr<T, 2>(act, A, B, bias, Y, R, M, N, K, trans_b, alpha, stream, b_const);
  if (M <= 4) return launch_mr<T, 4>(act, A, B, bias, Y, R, M, N, K, trans_b, alpha, stream, b_const);
  return launch_mr<T, 8>(act, A, B, bias, Y, R, M, N, K, trans_b, alpha, stream, b_const);
}

template <class T>
bool launch_gated_t(GateActivation gate, const void* A, const void* W, const void* bias, void* Y, int M, int N,
                    int K, cudaStream_t stream, bool b_const) {
  const T* a = static_cast<const T*>(A);
  const T* w = static_cast<const T*>(W);
  const T* b = static_cast<const T*>(bias);
  T* y = static_cast<T*>(Y);
  if (M == 1) return launch_kn<T, 1>(GemvAct::None, a, w, b, y, nullptr, M, 2 * N, K, 1.f, stream, b_const, N, gate);
  if (M == 2) return launch_kn<T, 2>(GemvAct::None, a, w, b, y, nullptr, M, 2 * N, K, 1.f, stream, b_const, N, gate);
  if (M <= 4) return launch_kn<T, 4>(GemvAct::None, a, w, b, y, nullptr, M, 2 * N, K, 1.f, stream, b_const, N, gate);
  return launch_kn<T, 8>(GemvAct::None, a, w, b, y, nullptr, M, 2 * N, K, 1.f, stream, b_const, N, gate);
}

std::atomic<int> g_override{-1};
std::atomic<long long> g_launches{0};

bool counted(bool launched) {
  if (launched) g_launches.fetch_add(1, std::memory_order_relaxed);
  return launched;
}

// 0 off, 1 every shape it handles, 2 where it measured faster than cuBLASLt (default).
int small_m_mode() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0) return o;
  static const int env = [] {
    const char* e = std::getenv("FUSEOPT_GEMV");
    if (e && std::strcmp(e, "0") == 0) return 0;
    if (e && std::strcmp(e, "1") == 0) return 1;
    return 2;
  }();
  return env;
}

// The default's shapes. Rows 1-2 (session 8, H200 micro-benchmark bench [gemm_small_m],
// Llama-1B decode GEMMs): B stored [N, K] beat cuBLASLt on all four (QKV 4.4 vs 7.2 us, o-proj
// 4.0 vs 6.2, down-proj 10.7 vs 12.8, gate+up 16.3 vs 18.5); B [K, N] lost everywhere (the
// 64-column tiles' cluster reduction). Rows 3-8: the CUDA-core kernel lost to cuBLASLt (QKV 10.3
// vs 7.5 us), so they go to the tensor-core GEMV (gemv_nk_mma.h) or nowhere. It beat cuBLASLt on
// the smaller weights once persistent (session 17, M = 8: o-proj [2048, 2048] 4.8 vs 7.3 us, QKV
// [3072, 2048] 6.5 vs 7.6; cuBLASLt's fixed cost dominates a weight that small) and tied or lost
// on the larger ones (down-proj [2048, 8192] 12.95 both, the gated [2 x 8192, 2048] 21.4 vs 19.7
// with the gate pass), so the default takes rows 3-8 for weights up to kMmaDefaultMaxWeight
// elements and not the gated form. The runtime stores constant weights [N, K] for 16-bit CUDA
// sessions (session_setup.cc, weight layout) so decode steps get here.
constexpr int64_t kMmaDefaultMaxWeight = int64_t(1) << 23;  // 8 Mi elements: 16 MiB in 16-bit

bool small_m_default_applies(int64_t M, bool trans_b, int64_t weight_elems) {
  if (!trans_b) return false;
  if (M <= 2) return true;
  return weight_elems > 0 && weight_elems <= kMmaDefaultMaxWeight && gemv_mma_enabled();
}

}  // namespace

bool gemm_small_m_enabled() { return small_m_mode() != 0; }
bool gemm_small_m_applies(int64_t M, bool trans_b, int64_t weight_elems) {
  const int mode = small_m_mode();
  return mode == 1 || (mode == 2 && small_m_default_applies(M, trans_b, weight_elems));
}
bool gemm_small_m_cuda_core_ok(int64_t M) { return small_m_mode() == 1 || M < kGemvMmaMinM; }
void set_gemm_small_m(int mode) { g_override.store(mode < 0 ? -1 : (mode ? 1 : 0), std::memory_order_relaxed); }
long long gemm_small_m_launch_count() { return g_launches.load(std::memory_order_relaxed); }

bool launch_gemm_small_m(DType dt, GemvAct act, const void* A, const void* B, const void* bias, void* Y, int64_t M,
                         int64_t N, int64_t K, bool trans_b, cudaStream_t stream, float alpha, bool b_const,
                         const void* residual) {
  if (!gemm_small_m_applies(M, trans_b, N * K)) return false;
  if (dt != DType::Float16 && dt != DType::BFloat16) return false;
  if (M < 1 || M > kGemvMaxM || K < 1 || N < 8 || N % 8 != 0) return false;
  if (N > (int64_t(1) << 30) || K > (int64_t(1) << 30) || N * K > (int64_t(1) << 40)) return false;
  if (!aligned16(B) || !aligned16(Y) || (bias && !aligned16(bias)) || (residual && !aligned16(residual))) return false;
  // [N, K]: 16-byte chunks along K, of A's rows too.
  if (trans_b && (K % 8 != 0 || !aligned16(A))) return false;
  if (trans_b && M >= kGemvMmaMinM) {
    GemvMmaArgs g;
    g.x = A;
    g.w = B;
    g.bias = bias;
    g.y = Y;
    g.M = int(M);
    g.N = int(N);
    g.K = int(K);
    g.act = act;
    g.alpha = alpha;
    g.residual = residual;
    g.w_const = b_const;
    if (launch_gemv_nk_mma(dt, GemvMmaForm::Plain, g, stream)) return counted(true);
  }
  if (!gemm_small_m_cuda_core_ok(M)) return false;  // rows 3-8 by default: cuBLASLt, not the CUDA-core kernel
  if (dt == DType::Float16)
    return counted(
        launch_t<__half>(act, A, B, bias, Y, residual, int(M), int(N), int(K), trans_b, alpha, stream, b_const));
  return counted(launch_t<__nv_bfloat16>(act, A, B, bias, Y, residual, int(M), int(N), int(K), trans_b, alpha,
                                         stream, b_const));
}

bool launch_gated_small_m(DType dt, GateActivation act, const void* A, const void* W, const void* bias, void* Y,
                          int64_t M, int64_t N, int64_t K, cudaStream_t stream, bool b_const) {
  // W [K, 2N] only: slower than cuBLASLt + the gate pass at every measured shape, so only
  // when asked for (FUSEOPT_GEMV=1, tests).
  if (small_m_mode() != 1 || (dt != DType::Float16 && dt != DType::BFloat16)) return false;
  if (M < 1 || M > kGemvMaxM || K < 1 || N < 8 || N % 8 != 0) return false;
  if (N > (int64_t(1) << 29) || K > (int64_t(1) << 30) || N * K > (int64_t(1) << 39)) return false;
  if (!aligned16(W) || !aligned16(Y) || (bias && !aligned16(bias))) return false;
  if (dt == DType::Float16)
    return counted(launch_gated_t<__half>(act, A, W, bias, Y, int(M), int(N), int(K), stream, b_const));
  return counted(launch_gated_t<__nv_bfloat16>(act, A, W, bias, Y, int(M), int(N), int(K), stream, b_const));
}

}  // namespace fuseopt::cuda_fused
