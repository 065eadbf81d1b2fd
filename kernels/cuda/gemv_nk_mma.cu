// The [N, K] weight-streaming GEMV on tensor cores for 3-8 rows (gemv_nk_mma.h).
//
// A block owns one tile of 16 weight rows (Gated: 8 gate rows and the 8 up rows they
// multiply, so the epilogue has both) and its 8 warps split K. Each warp walks its K slice
// in chunks of 32: lane (g = lane / 4, c = lane % 4) loads 16 bytes of weight rows g and
// g + 8 and 16 bytes of X row g, all at k = chunk · 32 + 8c, and the warp issues two
// m16n8k16 MMAs. The MMA fragments want k pairs {2c, 2c+1} and {2c+8, 2c+9} of each 16-wide
// step; since a dot product does not care about the order of its k, lane c's 8 contiguous
// values are taken as its fragment k's of step 0 (the first 4) and step 1 (the last 4) for
// the weights and for X alike — the same bijection on both operands, so every product
// w[n, k] · x[m, k] is formed exactly once, with 16-byte loads and no shared-memory staging.
// Two buffers of 4 chunks (2 for Rms, which also loads the skip) keep the next loads in
// flight while the current ones multiply. The warps' 16 x 8 partial tiles are added in
// shared memory in warp order (bit-identical from run to run), then the epilogue applies
// the form's bias / activation / gate / RMS scale in fp32 and rounds once, as the CUDA-core
// kernels do.
// Persistent (session 17): the grid is at most two blocks an SM and a block walks tiles a
// grid apart, issuing the next tile's first loads before the current tile's reduction, so
// the stream does not drain between tiles (v21 measured GatedMatMul's 1 024 one-tile blocks
// at 24 µs where the M = 1 CUDA-core kernel streams the same 67 MB in 18).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/gemm_small_m_common.cuh"
#include "kernels/cuda/gemv_nk_mma.h"
#include "kernels/cuda/mma_sync.cuh"

namespace fuseopt::cuda_fused {

namespace {

using namespace small_m;

constexpr int kChunkK = 32;  // K per chunk: 4 lanes x 8 values, two k16 MMA steps

// 8 fp32 values rounded into one 16-byte operand chunk.
template <class T>
__device__ __forceinline__ uint4 pack8(const float* f) {
  return make_uint4(MmaType<T>::pack(f[0], f[1]), MmaType<T>::pack(f[2], f[3]), MmaType<T>::pack(f[4], f[5]),
                    MmaType<T>::pack(f[6], f[7]));
}

template <class T, GemvMmaForm F>
__global__ void __launch_bounds__(kThreads, 2) gemv_nk_mma_kernel(GemvMmaArgs a, int chunks_per_warp,
                                                                WeightPrefetch wp) {
  constexpr bool kGated = F == GemvMmaForm::Gated, kRms = F == GemvMmaForm::Rms;
  constexpr int U = kRms ? 2 : 4;         // chunks per buffer
  constexpr int kFeat = kGated ? 8 : 16;  // output columns per tile
  // Per tile parity, per warp: [weight row][x row] (two, so tile t + 1's partials can be
  // written while a slow thread still reads tile t's).
  __shared__ float red[2][kWarps][16 * 8];
  __shared__ float red_sq[2][kWarps][8];  // Rms: per warp, per x row
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int M = a.M, N = a.N, K = a.K;
  const int tiles = (N + kFeat - 1) / kFeat;
  const T* W = static_cast<const T*>(a.w);
  const bool row_in = g < M;  // this lane's X row exists
  const T* xr = static_cast<const T*>(a.x) + int64_t(row_in ? g : 0) * K + 8 * c;
  const T* skip = static_cast<const T*>(a.skip);
  const T* sr = skip ? skip + int64_t(row_in ? g % a.skip_rows : 0) * K + 8 * c : nullptr;
  const int total = (K + kChunkK - 1) / kChunkK;
  const int cb = warp * chunks_per_warp, ce = min(total, cb + chunks_per_warp);
  auto valid = [&](int ch) { return ch < ce && ch * kChunkK + 8 * c < K; };  // K % 8 == 0

  // The block walks tiles blockIdx.x, + gridDim.x, ... (persistent: the grid is at most two
  // blocks an SM), each warp its K slice of every tile, as one stream of steps of U chunks:
  // step i is tile i / steps_per_tile, chunks cb + (i % steps_per_tile) · U. Every warp has
  // the same steps (chunks past its slice load zeros), so the tile ends line up for the
  // block barrier; and the next tile's first loads are issued before this tile's partials
  // are reduced, so the weight stream never drains between tiles.
  const int steps_per_tile = (chunks_per_warp + U - 1) / U;
  const int my_tiles = blockIdx.x < tiles ? (tiles - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int steps = my_tiles * steps_per_tile;
  auto tile_of = [&](int i) { return blockIdx.x + (i / steps_per_tile) * gridDim.x; };
  auto chunk_of = [&](int i) { return cb + (i % steps_per_tile) * U; };

  struct Buf {
    uint4 lo[U], hi[U], x[U], s[U];
  };
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  auto load_w = [&](Buf& b, int i) {
    const int n0 = tile_of(i) * kFeat, ch0 = chunk_of(i);
    // Weight rows g and g + 8 of the tile (rows past N read as zeros, never stored).
    const int row_lo = n0 + g, row_hi = kGated ? N + n0 + g : n0 + 8 + g;
    const bool lo_ok = row_lo < N, hi_ok = kGated || row_hi < N;
    const T* wlo = W + int64_t(lo_ok ? row_lo : 0) * K + 8 * c;
    const T* whi = W + int64_t(hi_ok ? row_hi : 0) * K + 8 * c;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int ch = ch0 + u;
      const bool v = valid(ch);
      b.lo[u] = v && lo_ok ? __ldg(reinterpret_cast<const uint4*>(wlo + int64_t(ch) * kChunkK)) : zero;
      b.hi[u] = v && hi_ok ? __ldg(reinterpret_cast<const uint4*>(whi + int64_t(ch) * kChunkK)) : zero;
    }
  };
  auto load_x = [&](Buf& b, int i) {
    const int ch0 = chunk_of(i);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int ch = ch0 + u;
      const bool v = valid(ch) && row_in;
      b.x[u] = v ? __ldg(reinterpret_cast<const uint4*>(xr + int64_t(ch) * kChunkK)) : zero;
      if constexpr (kRms) b.s[u] = v && sr ? __ldg(reinterpret_cast<const uint4*>(sr + int64_t(ch) * kChunkK)) : zero;
    }
  };

  // Rms: the B operand is (x + skip) ∘ gamma, rounded to T; the sum of squares of x + skip
  // (fp32, unrounded) rides beside it and scales the row at the end. Block 0 writes x + skip
  // while it walks its first tile.
  float sq = 0.f;
  T* const sum_out = kRms && a.sum && blockIdx.x == 0 ? static_cast<T*>(a.sum) : nullptr;
  const T* gamma = static_cast<const T*>(a.gamma);
  auto rms_operand = [&](const uint4& xv, const uint4& sv, int ch, bool first_tile) -> uint4 {
    if (!valid(ch) || !row_in) return zero;
    const int64_t k = int64_t(ch) * kChunkK + 8 * c;
    float x[8], gm[8];
    unpack8<T>(xv, x);
    if (sr) {
      float s[8];
      unpack8<T>(sv, s);
#pragma unroll
      for (int e = 0; e < 8; ++e) x[e] += s[e];
    }
    if (sum_out && first_tile) {
      Vec<T, 8> o;
#pragma unroll
      for (int e = 0; e < 8; ++e) o.v[e] = from_f<T>(x[e]);
      *reinterpret_cast<Vec<T, 8>*>(sum_out + int64_t(g) * K + k) = o;
    }
    unpack8<T>(__ldg(reinterpret_cast<const uint4*>(gamma + k)), gm);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sq = fmaf(x[e], x[e], sq);
      x[e] *= gm[e];
    }
    return pack8<T>(x);
  };

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  auto multiply = [&](const Buf& b, int i) {
    const int ch0 = chunk_of(i);
    const bool first_tile = i < steps_per_tile;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      uint4 xv = b.x[u];
      if constexpr (kRms) xv = rms_operand(b.x[u], b.s[u], ch0 + u, first_tile);
      const uint32_t a0[4] = {b.lo[u].x, b.hi[u].x, b.lo[u].y, b.hi[u].y};
      const uint32_t b0[2] = {xv.x, xv.y};
      mma16816<T>(acc, a0, b0);
      const uint32_t a1[4] = {b.lo[u].z, b.hi[u].z, b.lo[u].w, b.hi[u].w};
      const uint32_t b1[2] = {xv.z, xv.w};
      mma16816<T>(acc, a1, b1);
    }
  };

  const T* bias = static_cast<const T*>(a.bias);
  T* Y = static_cast<T*>(a.y);
  const T* res = kRms ? nullptr : static_cast<const T*>(a.residual);
  // Tile i / steps_per_tile is complete in every warp's accumulators: add the warps' partial
  // tiles in warp order (bit-identical from run to run), apply the epilogue, start over.
  auto finish_tile = [&](int i) {
    const int t = i / steps_per_tile, par = t & 1, n0 = tile_of(i) * kFeat;
    // C fragment: (weight row g, x rows 2c, 2c + 1), (weight row g + 8, the same x rows).
    red[par][warp][g * 8 + 2 * c] = acc[0];
    red[par][warp][g * 8 + 2 * c + 1] = acc[1];
    red[par][warp][(g + 8) * 8 + 2 * c] = acc[2];
    red[par][warp][(g + 8) * 8 + 2 * c + 1] = acc[3];
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] = 0.f;
    if constexpr (kRms) {
      sq += __shfl_xor_sync(0xffffffffu, sq, 1);
      sq += __shfl_xor_sync(0xffffffffu, sq, 2);
      if (c == 0) red_sq[par][warp][g] = sq;
      sq = 0.f;
    }
    __syncthreads();
    auto total_of = [&](int row, int m) {
      float s = red[par][0][row * 8 + m];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) s += red[par][w][row * 8 + m];  // warp order
      return s;
    };
    if constexpr (kGated) {
      if (tid < M) {  // thread m: the 8 gate columns of x row m
        Vec<T, 8> o;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          // P rounded to T, as the gate pass reads it from scratch.
          const float gt = to_f(from_f<T>(total_of(j, tid) + (bias ? to_f(bias[n0 + j]) : 0.f)));
          const float up = to_f(from_f<T>(total_of(8 + j, tid) + (bias ? to_f(bias[N + n0 + j]) : 0.f)));
          o.v[j] = from_f<T>(gate_activate(a.gate, gt) * up);
        }
        *reinterpret_cast<Vec<T, 8>*>(Y + int64_t(tid) * N + n0) = o;
      }
    } else {
      // Thread 2m + h: x row m, columns n0 + 8h .. + 7 (N % 8 == 0: all or none exist).
      const int m = tid >> 1, h = tid & 1, cn = n0 + 8 * h;
      if (tid < 16 && m < M && cn < N) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = total_of(8 * h + j, m);
        if constexpr (kRms) {
          float ss = red_sq[par][0][m];
#pragma unroll
          for (int w = 1; w < kWarps; ++w) ss += red_sq[par][w][m];
          const float rstd = rsqrtf(ss / static_cast<float>(K) + a.eps);
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] *= rstd;
        }
        store_out<T, 8>(Y + int64_t(m) * N + cn, bias ? bias + cn : nullptr, v, a.act, kRms ? 1.f : a.alpha,
                        res ? res + int64_t(m) * N + cn : nullptr);
      }
    }
  };

  if (steps == 0) {
    cuda_pdl::pdl_begin();
    return;
  }
  Buf b0, b1;
  if (wp.early) load_w(b0, 0);
  cuda_pdl::pdl_begin();  // PDL (pdl.cuh): X, skip and the outputs only after the wait
  if (!wp.early) load_w(b0, 0);
  load_x(b0, 0);
  for (int i = 0; i < steps; i += 2) {
    if (i + 1 < steps) {
      load_w(b1, i + 1);
      load_x(b1, i + 1);
    }
    multiply(b0, i);
    if (i % steps_per_tile == steps_per_tile - 1) finish_tile(i);
    if (i + 1 >= steps) break;
    if (i + 2 < steps) {
      load_w(b0, i + 2);
      load_x(b0, i + 2);
    }
    multiply(b1, i + 1);
    if ((i + 1) % steps_per_tile == steps_per_tile - 1) finish_tile(i + 1);
  }
}

std::atomic<int> g_max_blocks{0};  // set_gemv_mma_max_blocks (tests)

template <class T, GemvMmaForm F>
bool launch_form(const GemvMmaArgs& a, cudaStream_t stream) {
  const int feat = F == GemvMmaForm::Gated ? 8 : 16;
  const int64_t tiles = (int64_t(a.N) + feat - 1) / feat;
  // Persistent: at most two blocks an SM (their residency), each walking tiles a grid apart.
  int64_t blocks = std::min<int64_t>(tiles, int64_t(2) * std::max(1, sm_count()));
  if (const int cap = g_max_blocks.load(std::memory_order_relaxed); cap > 0) blocks = std::min<int64_t>(blocks, cap);
  const int total = (a.K + kChunkK - 1) / kChunkK, per_warp = (total + kWarps - 1) / kWarps;
  return launch_ex(gemv_nk_mma_kernel<T, F>, dim3(static_cast<unsigned>(blocks)), 0, 0, stream, a, per_warp,
                   plan_weight_prefetch(a.w_const));
}

template <class T>
bool launch_t(GemvMmaForm form, const GemvMmaArgs& a, cudaStream_t stream) {
  switch (form) {
    case GemvMmaForm::Gated: return launch_form<T, GemvMmaForm::Gated>(a, stream);
    case GemvMmaForm::Rms: return launch_form<T, GemvMmaForm::Rms>(a, stream);
    default: return launch_form<T, GemvMmaForm::Plain>(a, stream);
  }
}

std::atomic<int> g_override{-1};
std::atomic<long long> g_launches{0};

}  // namespace

bool gemv_mma_enabled() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0) return o != 0;
  static const bool env = [] {
    const char* e = std::getenv("FUSEOPT_GEMV_MMA");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return env;
}

void set_gemv_mma_max_blocks(int blocks) { g_max_blocks.store(std::max(0, blocks), std::memory_order_relaxed); }

void set_gemv_mma(int mode) { g_override.store(mode < 0 ? -1 : (mode ? 1 : 0), std::memory_order_relaxed); }

bool launch_gemv_nk_mma(DType dt, GemvMmaForm form, const GemvMmaArgs& a, cudaStream_t stream) {
  if (!gemv_mma_enabled() || (dt != DType::Float16 && dt != DType::BFloat16)) return false;
  if (a.M < kGemvMmaMinM || a.M > kGemvMaxM || a.K < 8 || a.K % 8 != 0 || a.N < 8 || a.N % 8 != 0) return false;
  if (!a.x || !a.w || !a.y || (form == GemvMmaForm::Rms && !a.gamma)) return false;
  if (form == GemvMmaForm::Rms && a.skip && a.skip_rows < 1) return false;
  const void* ptrs[] = {a.x, a.w, a.bias, a.y, a.skip, a.gamma, a.sum};
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  const bool launched = dt == DType::Float16 ? launch_t<__half>(form, a, stream)
                                             : launch_t<__nv_bfloat16>(form, a, stream);
  if (launched) g_launches.fetch_add(1, std::memory_order_relaxed);
  return launched;
}

long long gemv_nk_mma_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
