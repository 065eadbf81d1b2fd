// The [N, K] weight-streaming GEMVs that absorb their neighbour kernel
// (gemv_nk_fused.h): LayerNormLinear's norm as a prologue, GatedMatMul's gate
// as an epilogue. Same structure as gemm_small_m.cu's [N, K] kernel: a block
// owns 4 output columns, its 256 threads split K in 16-byte chunks, the block
// reduces (shuffles, then the 8 warps in order): one launch, no atomics,
// bit-identical on every run and graph replay.
//
// Norm prologue: a decode row is one 2-8 KB vector, so every block forms it
// itself (x + skip in fp32, statistics, gamma/beta) from L2 instead of a norm
// launch writing Z to memory for the GEMV to read back: at 768 blocks for
// Llama-1B's QKV that is 6 MB of L2 reads against the 12.6 MB of weights the
// kernel streams from HBM anyway, and the block's first weight loads are
// issued before the prologue so their latency hides behind it. Each thread
// keeps the chunks it later multiplies (c = tid, tid + 256, ...) in shared
// memory, so only the two statistics need the block.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/gemm_small_m_common.cuh"
#include "kernels/cuda/gemv_nk_fused.h"
#include "kernels/cuda/gemv_nk_mma.h"

namespace fuseopt::cuda_fused {

namespace {

using namespace small_m;

constexpr size_t kMaxRowSmem = 48u << 10;  // the staged rows (fp32): no opt-in needed

// Sum of v over the block, every thread gets it. red: kWarps floats of shared memory; the
// trailing barrier lets the caller reuse red.
__device__ __forceinline__ float block_total(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = red[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) s += red[w];  // fixed order: the same on every run
  __syncthreads();
  return s;
}

struct NormParams {
  const void* skip;
  int skip_rows;
  const void* gamma;
  const void* beta;
  void* sum;
  float eps;
  bool rms;
};

// Stages the normalised rows (rounded to T, kept as fp32) into zs [MR][K]: thread t
// handles chunks t, t + 256, ... of each row, the ones it multiplies afterwards.
template <class T, int MR>
__device__ void norm_prologue(const T* __restrict__ X, const NormParams& p, int M, int K, float* zs,
                              float* red) {
  const int tid = threadIdx.x, chunks = K / 8;
  const T* skip = static_cast<const T*>(p.skip);
  T* sum = static_cast<T*>(p.sum);
  const bool write_sum = sum != nullptr && blockIdx.x == 0;
  const float inv_k = 1.f / static_cast<float>(K);
  float mean[MR], rstd[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    float local = 0.f;
    if (m < M) {
      const T* xr = X + int64_t(m) * K;
      const T* sr = skip ? skip + int64_t(m % p.skip_rows) * K : nullptr;
      for (int c = tid; c < chunks; c += kThreads) {
        float z[8];
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(xr) + c), z);
        if (sr) {
          float s[8];
          unpack8<T>(__ldg(reinterpret_cast<const uint4*>(sr) + c), s);
#pragma unroll
          for (int e = 0; e < 8; ++e) z[e] += s[e];
        }
        if (write_sum) {
          Vec<T, 8> o;
#pragma unroll
          for (int e = 0; e < 8; ++e) o.v[e] = from_f<T>(z[e]);
          *reinterpret_cast<Vec<T, 8>*>(sum + int64_t(m) * K + c * 8) = o;
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          zs[m * K + c * 8 + e] = z[e];
          local += p.rms ? z[e] * z[e] : z[e];
        }
      }
    }
    const float total = block_total(local, red);  // every thread calls it (m < M is uniform)
    if (p.rms) {
      mean[m] = 0.f;
      rstd[m] = rsqrtf(total * inv_k + p.eps);
    } else {
      mean[m] = total * inv_k;
      float sq = 0.f;
      if (m < M)
        for (int c = tid; c < chunks; c += kThreads)
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float d = zs[m * K + c * 8 + e] - mean[m];
            sq += d * d;
          }
      rstd[m] = rsqrtf(block_total(sq, red) * inv_k + p.eps);
    }
  }
  const T* gamma = static_cast<const T*>(p.gamma);
  const T* beta = static_cast<const T*>(p.beta);
  for (int c = tid; c < chunks; c += kThreads) {
    float g[8], b[8];
    unpack8<T>(__ldg(reinterpret_cast<const uint4*>(gamma) + c), g);
    if (beta) unpack8<T>(__ldg(reinterpret_cast<const uint4*>(beta) + c), b);
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      if (m >= M) break;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        float* z = &zs[m * K + c * 8 + e];
        float v = (*z - mean[m]) * rstd[m] * g[e];
        if (beta) v += b[e];
        *z = to_f(from_f<T>(v));  // Z's rounding in the two-kernel path
      }
    }
  }
}

// NORM: A is the normalised X (prologue above); GATED: 2 x 4 weight rows per block (the
// gate's n0.. and the up projection's gate_n + n0..), Y = act(gate) * up. Rows of A past M
// contribute zeros and are never stored.
template <class T, int MR, bool NORM, bool GATED>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_nk_fused_kernel(const T* __restrict__ A, const T* __restrict__ B, const T* __restrict__ bias,
                         T* __restrict__ Y, int M, int N, int K, GemvAct act, GateActivation gate,
                         NormParams np, WeightPrefetch wp) {
  constexpr int R = GATED ? 2 * kColsT : kColsT;  // weight rows per block
  extern __shared__ __align__(16) float zs[];     // NORM: [MR][K]
  __shared__ float red[kWarps][MR * R];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * kColsT;  // N % 8 == 0: the block's 4 columns all exist
  const int chunks = K / 8;
  auto wrow = [&](int r) -> const T* {
    const int row = GATED ? (r < kColsT ? n0 + r : N + n0 + r - kColsT) : n0 + r;
    return B + int64_t(row) * K;
  };
  // The first chunk's weights are requested before the prologue, so its latency (L2
  // reads and two block reductions) hides behind them; where B is a constant, before the
  // programmatic-launch wait too (WeightPrefetch). One buffer: a second (the next chunk in
  // flight) spilled at 8 rows and cost occupancy; at K = 2048 a thread has one chunk anyway.
  uint4 bv[R];
  auto load_b = [&](int c) {
#pragma unroll
    for (int r = 0; r < R; ++r)
      bv[r] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(wrow(r)) + c) : make_uint4(0u, 0u, 0u, 0u);
  };
  if (wp.early) load_b(tid);
  cuda_pdl::pdl_begin();
  if (!wp.early) load_b(tid);
  if constexpr (NORM) norm_prologue<T, MR>(A, np, M, K, zs, &red[0][0]);

  float acc[MR][R];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;
  for (int c = tid; c < chunks; c += kThreads) {
    if (c != tid) load_b(c);
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      float a[8];
      if constexpr (NORM) {
#pragma unroll
        for (int e = 0; e < 8; ++e) a[e] = m < M ? zs[m * K + c * 8 + e] : 0.f;
      } else {
        const uint4 av = m < M ? __ldg(reinterpret_cast<const uint4*>(A + int64_t(m) * K) + c)
                               : make_uint4(0u, 0u, 0u, 0u);
        unpack8<T>(av, a);
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float b[8];
        unpack8<T>(bv[r], b);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(a[e], b[e], acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[m][r];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[m][r] = v;
    }
  __syncthreads();  // red may still be read by the prologue's last reduction
  if (lane == 0)
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int r = 0; r < R; ++r) red[warp][m * R + r] = acc[m][r];
  __syncthreads();
  if (tid >= M) return;
  float v[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float s = red[0][tid * R + r];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) s += red[w][tid * R + r];
    v[r] = s;
  }
  if constexpr (GATED) {
    Vec<T, kColsT> o;
#pragma unroll
    for (int j = 0; j < kColsT; ++j) {
      // P rounded to T, as the gate pass reads it from scratch.
      const float g = to_f(from_f<T>(v[j] + (bias ? to_f(bias[n0 + j]) : 0.f)));
      const float u = to_f(from_f<T>(v[kColsT + j] + (bias ? to_f(bias[N + n0 + j]) : 0.f)));
      o.v[j] = from_f<T>(gate_activate(gate, g) * u);
    }
    *reinterpret_cast<Vec<T, kColsT>*>(Y + int64_t(tid) * N + n0) = o;
  } else {
    store_out<T, kColsT>(Y + int64_t(tid) * N + n0, bias ? bias + n0 : nullptr, v, act, 1.f);
  }
}

// RMSNorm streamed through the GEMV (no beta): y[n] = rstd · Σ_k (x_k g_k) W[n, k] with rstd =
// 1 / sqrt(mean(x²) + eps), x = X (+ skip). The sum of squares is accumulated beside the dot
// products in the same pass and reduced with them, so a block never waits for statistics before
// its weights stream (the prologue kernel above does, which is why it lost: NOTES-perf.md v14);
// every block reads the row, skip and gamma once from L2 as it reads its weights. Z is never
// formed, so nothing is rounded between the norm and the product (the two-kernel path rounds Z
// to T): within the 16-bit tolerance of it, not bit-identical. Block 0 writes Sum (rounded).
template <class T, int MR>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_nk_rms_kernel(const T* __restrict__ X, const T* __restrict__ B, const T* __restrict__ bias,
                       T* __restrict__ Y, int M, int N, int K, GemvAct act, NormParams np, WeightPrefetch wp) {
  constexpr int W = kColsT + 1;  // per row: the kColsT dot products, then the sum of squares
  __shared__ float red[kWarps][MR * W];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n0 = blockIdx.x * kColsT;
  const int chunks = K / 8;
  uint4 bv[kColsT];
  auto load_b = [&](int c) {
#pragma unroll
    for (int r = 0; r < kColsT; ++r)
      bv[r] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(B + int64_t(n0 + r) * K) + c)
                         : make_uint4(0u, 0u, 0u, 0u);
  };
  if (wp.early) load_b(tid);
  cuda_pdl::pdl_begin();
  if (!wp.early) load_b(tid);
  const T* skip = static_cast<const T*>(np.skip);
  const T* gamma = static_cast<const T*>(np.gamma);
  T* sum = static_cast<T*>(np.sum);
  const bool write_sum = sum != nullptr && blockIdx.x == 0;
  float acc[MR][W];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int r = 0; r < W; ++r) acc[m][r] = 0.f;
  for (int c = tid; c < chunks; c += kThreads) {
    if (c != tid) load_b(c);
    float g[8];
    unpack8<T>(__ldg(reinterpret_cast<const uint4*>(gamma) + c), g);
#pragma unroll
    for (int m = 0; m < MR; ++m) {
      if (m >= M) break;
      float x[8];
      unpack8<T>(__ldg(reinterpret_cast<const uint4*>(X + int64_t(m) * K) + c), x);
      if (skip) {
        float sk[8];
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(skip + int64_t(m % np.skip_rows) * K) + c), sk);
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] += sk[e];
      }
      if (write_sum) {
        Vec<T, 8> o;
#pragma unroll
        for (int e = 0; e < 8; ++e) o.v[e] = from_f<T>(x[e]);
        *reinterpret_cast<Vec<T, 8>*>(sum + int64_t(m) * K + c * 8) = o;
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        acc[m][kColsT] = fmaf(x[e], x[e], acc[m][kColsT]);
        x[e] *= g[e];
      }
#pragma unroll
      for (int r = 0; r < kColsT; ++r) {
        float b[8];
        unpack8<T>(bv[r], b);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(x[e], b[e], acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int r = 0; r < W; ++r) {
      float v = acc[m][r];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[m][r] = v;
    }
  if (lane == 0)
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int r = 0; r < W; ++r) red[warp][m * W + r] = acc[m][r];
  __syncthreads();
  if (tid >= M) return;
  float v[W];
#pragma unroll
  for (int r = 0; r < W; ++r) {
    float t = red[0][tid * W + r];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) t += red[w][tid * W + r];  // fixed order: run-to-run identical
    v[r] = t;
  }
  const float rstd = rsqrtf(v[kColsT] / static_cast<float>(K) + np.eps);
#pragma unroll
  for (int r = 0; r < kColsT; ++r) v[r] *= rstd;
  store_out<T, kColsT>(Y + int64_t(tid) * N + n0, bias ? bias + n0 : nullptr, v, act, 1.f);
}

template <class T, int MR>
bool launch_rms_mr(const void* X, const void* B, const void* bias, void* Y, int M, int N, int K, GemvAct act,
                   const NormParams& np, cudaStream_t stream, bool b_const) {
  return launch_ex(gemv_nk_rms_kernel<T, MR>, dim3(static_cast<unsigned>(N / kColsT)), 0, 0, stream,
                   static_cast<const T*>(X), static_cast<const T*>(B), static_cast<const T*>(bias), static_cast<T*>(Y),
                   M, N, K, act, np, plan_weight_prefetch(b_const));
}

template <class T>
bool launch_rms_t(const void* X, const void* B, const void* bias, void* Y, int M, int N, int K, GemvAct act,
                  const NormParams& np, cudaStream_t stream, bool b_const) {
  if (M == 1) return launch_rms_mr<T, 1>(X, B, bias, Y, M, N, K, act, np, stream, b_const);
  if (M == 2) return launch_rms_mr<T, 2>(X, B, bias, Y, M, N, K, act, np, stream, b_const);
  if (M <= 4) return launch_rms_mr<T, 4>(X, B, bias, Y, M, N, K, act, np, stream, b_const);
  return launch_rms_mr<T, 8>(X, B, bias, Y, M, N, K, act, np, stream, b_const);
}

template <class T, int MR, bool NORM, bool GATED>
bool launch_mr(const void* A, const void* B, const void* bias, void* Y, int M, int N, int K, GemvAct act,
               GateActivation gate, const NormParams& np, cudaStream_t stream, bool b_const) {
  const size_t smem = NORM ? size_t(MR) * K * sizeof(float) : 0;
  if (smem > kMaxRowSmem) return false;
  return launch_ex(gemv_nk_fused_kernel<T, MR, NORM, GATED>, dim3(static_cast<unsigned>(N / kColsT)), smem, 0,
                   stream, static_cast<const T*>(A), static_cast<const T*>(B), static_cast<const T*>(bias),
                   static_cast<T*>(Y), M, N, K, act, gate, np, plan_weight_prefetch(b_const));
}

template <class T, bool NORM, bool GATED>
bool launch_t(const void* A, const void* B, const void* bias, void* Y, int M, int N, int K, GemvAct act,
              GateActivation gate, const NormParams& np, cudaStream_t stream, bool b_const) {
  if (M == 1) return launch_mr<T, 1, NORM, GATED>(A, B, bias, Y, M, N, K, act, gate, np, stream, b_const);
  if (M == 2) return launch_mr<T, 2, NORM, GATED>(A, B, bias, Y, M, N, K, act, gate, np, stream, b_const);
  if (M <= 4) return launch_mr<T, 4, NORM, GATED>(A, B, bias, Y, M, N, K, act, gate, np, stream, b_const);
  return launch_mr<T, 8, NORM, GATED>(A, B, bias, Y, M, N, K, act, gate, np, stream, b_const);
}

// What the entry points ask: the small-M kernel's switch for this row count (B [N, K]),
// a 16-bit type, sizes the chunking covers, 16-byte aligned rows.
// FUSEOPT_GEMV_FUSED picks the fusions (bits of kFuse*): "0" none (the plain GEMV and the
// neighbour kernel), "norm" the norm prologue (LayerNorm and RMSNorm), "rms" the streamed RMSNorm,
// "gate" the gate epilogue, "all" all three (the streamed RMSNorm first where both apply);
// unset: gate + rms. Session 9's H200 A/B (Llama-1B-shaped decode step, batch 1, NOTES-perf.md
// v14): the norm prologue made the step slower (0.868 -> 0.920 ms at 128 cached tokens, 1.100 ->
// 1.164 at 2048: every one of the 768 blocks re-reads the same row, gamma and skip before its
// first product), the gate epilogue is neutral (0.880 / 1.090 ms) and saves the P scratch and a
// launch. The streamed RMSNorm: session 11 (NOTES-perf.md v16).
constexpr int kFuseNorm = 1, kFuseGate = 2, kFuseRms = 4;
std::atomic<int> g_fused_override{-1};

int fused_mask() {
  static const int env = [] {
    const char* e = std::getenv("FUSEOPT_GEMV_FUSED");
    const std::string v = e ? e : "";
    if (v == "0") return 0;
    if (v == "norm") return kFuseNorm;
    if (v == "rms") return kFuseRms;
    if (v == "gate") return kFuseGate;
    if (v == "all") return kFuseNorm | kFuseGate | kFuseRms;
    return kFuseGate | kFuseRms;
  }();
  const int o = g_fused_override.load(std::memory_order_relaxed);
  return o >= 0 ? o : env;
}

bool shape_applies(int fusion, DType dt, int64_t M, int64_t N, int64_t K, std::initializer_list<const void*> ptrs) {
  // The default takes rows 3-8 on the tensor-core GEMV for small weights, never the gated form.
  if ((fused_mask() & fusion) == 0 || !gemm_small_m_applies(M, true, fusion == kFuseGate ? -1 : N * K)) return false;
  if (dt != DType::Float16 && dt != DType::BFloat16) return false;
  if (M < 1 || M > kGemvMaxM || K < 8 || K % 8 != 0 || N < 8 || N % 8 != 0) return false;
  if (N > (int64_t(1) << 29) || K > (int64_t(1) << 30) || N * K > (int64_t(1) << 39)) return false;
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

std::atomic<long long> g_launches{0};

bool counted(bool launched) {
  if (launched) g_launches.fetch_add(1, std::memory_order_relaxed);
  return launched;
}

}  // namespace

bool launch_norm_gemv_nk(const NormGemvArgs& a, cudaStream_t stream) {
  const NormArgs& n = a.norm;
  if (!n.x || !n.gamma || !a.w || !a.y || (n.skip && n.skip_rows < 1) || n.bias || n.mean || n.inv_std) return false;
  const NormParams np{n.skip, static_cast<int>(n.skip_rows), n.gamma, n.beta, n.sum, n.eps, n.rms};
  const int M = int(n.rows), N = int(a.N), K = int(n.D);
  const std::initializer_list<const void*> ptrs = {n.x, n.skip, n.gamma, n.beta, a.w, a.bias, a.y, n.sum};
  // RMSNorm without beta: streamed through the GEMV (no shared-memory row, any K).
  if (n.rms && !n.beta && shape_applies(kFuseRms, n.dtype, n.rows, a.N, n.D, ptrs)) {
    if (M >= kGemvMmaMinM) {  // 3-8 rows: the tensor-core form
      GemvMmaArgs g;
      g.x = n.x;
      g.w = a.w;
      g.bias = a.bias;
      g.y = a.y;
      g.M = M;
      g.N = N;
      g.K = K;
      g.act = a.act;
      g.skip = n.skip;
      g.skip_rows = static_cast<int>(n.skip_rows);
      g.gamma = n.gamma;
      g.sum = n.sum;
      g.eps = n.eps;
      g.w_const = a.w_const;
      if (launch_gemv_nk_mma(n.dtype, GemvMmaForm::Rms, g, stream)) return counted(true);
    }
    if (!gemm_small_m_cuda_core_ok(M)) return false;  // rows 3-8 by default: norm kernel + GEMM
    if (n.dtype == DType::Float16)
      return counted(launch_rms_t<__half>(n.x, a.w, a.bias, a.y, M, N, K, a.act, np, stream, a.w_const));
    return counted(launch_rms_t<__nv_bfloat16>(n.x, a.w, a.bias, a.y, M, N, K, a.act, np, stream, a.w_const));
  }
  if (!shape_applies(kFuseNorm, n.dtype, n.rows, a.N, n.D, ptrs) || !gemm_small_m_cuda_core_ok(M)) return false;
  if (n.dtype == DType::Float16)
    return counted(launch_t<__half, true, false>(n.x, a.w, a.bias, a.y, M, N, K, a.act, GateActivation::Silu, np,
                                                 stream, a.w_const));
  return counted(launch_t<__nv_bfloat16, true, false>(n.x, a.w, a.bias, a.y, M, N, K, a.act, GateActivation::Silu,
                                                      np, stream, a.w_const));
}

bool launch_gated_gemv_nk(DType dt, GateActivation act, const void* A, const void* W, const void* bias, void* Y,
                          int64_t M, int64_t N, int64_t K, cudaStream_t stream, bool b_const) {
  if (!shape_applies(kFuseGate, dt, M, 2 * N, K, {A, W, bias, Y})) return false;
  if (N % 8 != 0) return false;  // the up half starts on a 16-byte boundary of bias
  if (M >= kGemvMmaMinM) {  // 3-8 rows: the tensor-core form
    GemvMmaArgs g;
    g.x = A;
    g.w = W;
    g.bias = bias;
    g.y = Y;
    g.M = int(M);
    g.N = int(N);
    g.K = int(K);
    g.gate = act;
    g.w_const = b_const;
    if (launch_gemv_nk_mma(dt, GemvMmaForm::Gated, g, stream)) return counted(true);
  }
  if (!gemm_small_m_cuda_core_ok(M)) return false;
  const NormParams np{};
  if (dt == DType::Float16)
    return counted(launch_t<__half, false, true>(A, W, bias, Y, int(M), int(N), int(K), GemvAct::None, act, np,
                                                 stream, b_const));
  return counted(launch_t<__nv_bfloat16, false, true>(A, W, bias, Y, int(M), int(N), int(K), GemvAct::None, act,
                                                      np, stream, b_const));
}

void set_gemv_nk_fused(int mask) { g_fused_override.store(mask < 0 ? -1 : (mask & 7), std::memory_order_relaxed); }

long long gemv_nk_fused_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
