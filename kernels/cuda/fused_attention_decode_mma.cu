// The decode step of fuseopt.Attention (S_q = 1, past/present) on tensor cores: the same job as
// fused_attention_decode_append.cu (append the new K/V row, split-KV attention, the splits of a
// (batch, kv head) merged through a thread-block cluster), with the scores and P·V as
// mma.sync m16n8k16 instead of per-thread FMAs.
//
// Why (session 17, ncu of the register kernel on a held cache at 8 x 2048, Llama-1B shapes):
// 47 us for 33.5 MB (0.7 TB/s, DRAM 15 %), 16 % achieved occupancy, ~8 cycles a warp per issued
// instruction: every key costs each of its 8 lanes ~40 dependent instructions (the 64-wide dot
// products of four query heads, their shuffle reductions, the softmax, 4 x 64 FMAs of P·V), and
// with 166 registers a thread too few warps hide that. The mask deferral (v22) moved it 5 %.
// Here the G query heads that share a kv head are the MMA's rows (m16: up to 16 heads, the
// rest zero), 16 keys its columns, so a 16-key tile is D / 8 MMAs for Q·Kᵀ and D / 8 for P·V.
//
// Grid: (splits, kv heads, batch); the splits of a (batch, kv head) are one cluster, up to 16
// (non-portable: batch 1 of a GQA model has few kv heads, and 8 splits left half the SMs idle).
// Block: 4 warps over keys [j0, j0 + chunk) of one (batch, kv head); warp w takes the 16-key
// tiles w, w + 4, ... and streams them through its own ring of STAGES shared-memory stages
// (cp.async, 16 bytes a copy, the next STAGES - 1 tiles requested while one is computed; a
// warp's ring is its own, so no block barrier inside the loop). K tiles feed ldmatrix as the B operand of Q·Kᵀ, V tiles
// ldmatrix.trans as the B operand of P·V; P goes from the score accumulators to the A operand
// in registers (FlashAttention-2's layout identity), rounded to T as the prefill kernels do.
// Online softmax per head in fp32. The key-padding mask of the split is read once into shared
// memory (loads issued eight at a time before any compare). With a held cache the first tiles
// of past rows are requested before the programmatic-launch wait (DecodeAppend::in_place), and so
// is a mask no kernel of the run writes (DecodeAppend::mask_stable); after the wait the query rows,
// the mask otherwise and the new row are requested together (one round trip, not three).
// The present: the new row (key Sp)
// and, where the present is a new tensor, every past row, stored from the stage it was copied
// to. Warps, then the cluster's splits, are merged in a fixed order (deterministic).
//
// Semantics as kernels/cpu/fused_attention.cc for S_q = 1, as the register kernel: a masked key
// scores mask_filter_value; a NaN score poisons the row; a row whose every score is -inf gives
// NaN (0/0), or 0 with masked_rows_zero.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cluster_launch.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 4, kThreads = kWarps * 32;
constexpr int kTile = 16;         // keys a warp tile: the MMA's n (two n8 halves) and P·V's k
constexpr int kMaxG = 16;         // query heads a kv head: the MMA's m
constexpr int kMaxChunk = 4096;   // keys a split: its keep bytes in shared memory
constexpr int kPortableCluster = 8;   // splits a (batch, kv head) on any cluster-capable GPU
constexpr int kMaxCluster = 16;       // with the non-portable size (Hopper allows 16)

struct MmaDecodeArgs {
  const void* q;  // [B, 1, H·D] rows at q_batch_stride
  int64_t q_batch_stride;
  const void* past_k;  // [B, Hkv, past_rows, D]
  const void* past_v;
  const void* new_k;  // row of batch b, kv head h at new_k + b·new_k_batch + h·D
  const void* new_v;
  int64_t new_k_batch, new_v_batch;
  void* present_k;  // [B, Hkv, present_rows, D] or nullptr
  void* present_v;
  const void* mask;  // [B, St] key padding, or nullptr
  DType mask_dtype;
  void* y;  // [B, 1, H·D]
  int H, Hkv, G, Sp, St, chunk;
  int64_t past_rows, present_rows;
  bool in_place;
  bool early_past;  // in place: the past tiles requested before the programmatic-launch wait
  bool early_mask;  // the mask is written by no kernel of the run: read before the wait too
  float scale, fill;
  bool rows_zero;
};

__device__ __forceinline__ void ldsm_x4(uint32_t* r, const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t* r, const void* p) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// 16 bytes global -> shared, L2 only; zeros where !valid (keys past the split).
__device__ __forceinline__ void cp16(void* smem, const void* g, bool valid) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(g), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int D, int STAGES>
struct Layout {
  static constexpr int kStride = D + 8;                        // elements a row: ldmatrix rows in distinct banks
  static constexpr int kTileElems = kTile * kStride;           // one K or V tile
  static constexpr int kWarpElems = STAGES * 2 * kTileElems;   // a warp's ring
  static constexpr size_t kRingBytes = size_t(kWarps) * kWarpElems * 2;
  // After the loop a warp's ring holds its partial: [kMaxG][D] sums, then [kMaxG][2] (max, sum).
  static_assert((kMaxG * D + kMaxG * 2) * 4 <= kWarpElems * 2, "a warp's partial fits its ring");
};

template <class T, int D, int STAGES>
__global__ void __launch_bounds__(kThreads) decode_mma_kernel(MmaDecodeArgs a) {
  using L = Layout<D, STAGES>;
  constexpr int KS = L::kStride, kPieces = D / 8;  // 16-byte pieces a row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ring = reinterpret_cast<T*>(smem_raw);
  uint8_t* keep_s = smem_raw + L::kRingBytes;
  __shared__ __align__(16) T q_s[kMaxG * KS];
  __shared__ float part[kMaxG * D];  // the block's partial, read by the cluster
  __shared__ float part_ml[kMaxG][2];
  cg::cluster_group cluster = cg::this_cluster();

  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
  const int G = a.G;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, cq = lane & 3;
  const int j0 = split * a.chunk, n = max(0, min(a.St, j0 + a.chunk) - j0);
  const int n_tiles = (n + kTile - 1) / kTile;
  const int my_tiles = warp < n_tiles ? (n_tiles - 1 - warp) / kWarps + 1 : 0;
  const int64_t bh = int64_t(b) * a.Hkv + hk;
  const T* pk = static_cast<const T*>(a.past_k) + bh * a.past_rows * D;
  const T* pv = static_cast<const T*>(a.past_v) + bh * a.past_rows * D;
  const T* nk = static_cast<const T*>(a.new_k) + b * a.new_k_batch + int64_t(hk) * D;
  const T* nv = static_cast<const T*>(a.new_v) + b * a.new_v_batch + int64_t(hk) * D;
  T* ok = a.present_k ? static_cast<T*>(a.present_k) + bh * a.present_rows * D : nullptr;
  T* ov = a.present_v ? static_cast<T*>(a.present_v) + bh * a.present_rows * D : nullptr;
  T* wring = ring + warp * L::kWarpElems;

  // This warp's tile t: keys k0 = (warp + t · kWarps) · kTile of the split, into stage t % STAGES.
  // past_only: not the new row (key Sp), which the previous kernel may still be writing.
  auto issue = [&](int t, bool past_only) {
    T* ks = wring + (t % STAGES) * 2 * L::kTileElems;
    T* vs = ks + L::kTileElems;
    const int k0 = (warp + t * kWarps) * kTile;
#pragma unroll
    for (int i = lane; i < kTile * kPieces; i += 32) {
      const int r = i / kPieces, pc = i % kPieces, jj = k0 + r, j = j0 + jj;
      const bool in = jj < n;
      // Keys before Sp are the past's; the new row is key Sp (a valid address where !in: not read).
      const bool past = in && j < a.Sp;
      if (past_only && in && !past) continue;
      cp16(ks + r * KS + pc * 8, (past ? pk + int64_t(j) * D : nk) + pc * 8, in);
      cp16(vs + r * KS + pc * 8, (past ? pv + int64_t(j) * D : nv) + pc * 8, in);
    }
  };
  // The split's keep bytes into shared memory (loads issued eight at a time before any compare).
  auto load_keep = [&] {
    for (int base = 0; base < n; base += kThreads * 8) {
      uint64_t raw[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = base + u * kThreads + tid;
        raw[u] = i < n && a.mask ? mask_load_raw(a.mask, a.mask_dtype, int64_t(b) * a.St + j0 + i) : 1;
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = base + u * kThreads + tid;
        if (i < n) keep_s[i] = mask_raw_keep(raw[u], a.mask_dtype) ? 1 : 0;
      }
    }
  };
  // The first STAGES - 1 tiles in flight (empty groups keep the group count uniform). A held
  // cache's past rows are this layer's cache from earlier steps, which no kernel of this step
  // writes, so those tiles are requested before the programmatic-launch wait and stream while the
  // previous kernel (the QKV projection) ends; the new row, its output, only after the wait.
  if (a.early_past) {
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) {
      if (t < my_tiles) issue(t, true);
      cp_commit();
    }
  }
  // A mask no kernel of the run writes (a graph input): its round trip overlaps the previous
  // kernel too, instead of following the wait (v24).
  if (a.early_mask) load_keep();
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any other global access
  if (!a.early_past) {
#pragma unroll
    for (int t = 0; t < STAGES - 1; ++t) {
      if (t < my_tiles) issue(t, false);
      cp_commit();
    }
  }
  bool new_row_early = false;
  if (const int jn = a.Sp - j0; a.early_past && jn >= 0 && jn < n && (jn / kTile) % kWarps == warp &&
                                jn / kTile / kWarps < STAGES - 1) {
    // The new row fell in one of this warp's early tiles: copy it now, the same lane for each
    // piece as issue(), and let it land before the loop (waited for below, after the q and
    // mask loads are in flight: one round trip for the three, not three).
    const int t = jn / kTile / kWarps, r = jn % kTile;
    T* ks = wring + (t % STAGES) * 2 * L::kTileElems;
    T* vs = ks + L::kTileElems;
    for (int i = r * kPieces; i < (r + 1) * kPieces; ++i)
      if (i % 32 == lane) {
        const int pc = i % kPieces;
        cp16(ks + r * KS + pc * 8, nk + pc * 8, true);
        cp16(vs + r * KS + pc * 8, nv + pc * 8, true);
      }
    cp_commit();
    new_row_early = true;
  }

  // While the tiles stream: the group's query rows (rows past G zero), loaded into registers
  // first so the mask's loads (when not read before the wait) are in flight with them.
  constexpr int kQLoads = (kMaxG * kPieces + kThreads - 1) / kThreads;
  uint4 qv[kQLoads];
#pragma unroll
  for (int u = 0; u < kQLoads; ++u) {
    const int i = tid + u * kThreads, r = i / kPieces, pc = i % kPieces;
    qv[u] = make_uint4(0u, 0u, 0u, 0u);
    if (i < kMaxG * kPieces && r < G)
      qv[u] = *reinterpret_cast<const uint4*>(static_cast<const T*>(a.q) + b * a.q_batch_stride +
                                              int64_t(hk * G + r) * D + pc * 8);
  }
  if (!a.early_mask) load_keep();
#pragma unroll
  for (int u = 0; u < kQLoads; ++u) {
    const int i = tid + u * kThreads, r = i / kPieces, pc = i % kPieces;
    if (i < kMaxG * kPieces) *reinterpret_cast<uint4*>(q_s + r * KS + pc * 8) = qv[u];
  }
  if (new_row_early) cp_wait<0>();
  __syncthreads();

  uint32_t qf[D / 16][4];  // A fragments of Q, one per k16 step
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(qf[kk], q_s + (lane & 15) * KS + kk * 16 + (lane >> 4) * 8);

  // Rows g (c 0, 1) and g + 8 (c 2, 3) of the accumulators: heads g and g + 8.
  float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
  for (int nb = 0; nb < D / 8; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nb][c] = 0.f;

  for (int t = 0; t < my_tiles; ++t) {
    if (t + STAGES - 1 < my_tiles) issue(t + STAGES - 1, false);
    cp_commit();
    cp_wait<STAGES - 1>();  // this lane's copies of tile t have landed
    __syncwarp();           // and every lane's
    const T* ks = wring + (t % STAGES) * 2 * L::kTileElems;
    const T* vs = ks + L::kTileElems;
    const int k0 = (warp + t * kWarps) * kTile;
    if (ok) {
      // The present: in place only the new row (the past rows are there), else every row. Each
      // lane stores the pieces it copied (visible to it after its wait).
#pragma unroll
      for (int i = lane; i < kTile * kPieces; i += 32) {
        const int r = i / kPieces, pc = i % kPieces, jj = k0 + r, j = j0 + jj;
        if (jj < n && (!a.in_place || j == a.Sp)) {
          *reinterpret_cast<uint4*>(ok + int64_t(j) * D + pc * 8) = *reinterpret_cast<const uint4*>(ks + r * KS + pc * 8);
          *reinterpret_cast<uint4*>(ov + int64_t(j) * D + pc * 8) = *reinterpret_cast<const uint4*>(vs + r * KS + pc * 8);
        }
      }
    }
    // S = Q · Kᵀ: [16 heads, 16 keys] as two n8 halves.
    float s[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int c = 0; c < 4; ++c) s[nb][c] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2)
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        uint32_t bf[4];
        ldsm_x4(bf, ks + (nb * 8 + (lane & 7)) * KS + kk * 16 + (lane >> 3) * 8);
        mma16816<T>(s[nb], qf[kk], bf);
        mma16816<T>(s[nb], qf[kk + 1], bf + 2);
      }
    // Scale; a masked key scores the fill value; a key past the split takes no mass.
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int key = k0 + nb * 8 + 2 * cq + (c & 1);
        s[nb][c] = key >= n ? -INFINITY : keep_s[key] ? s[nb][c] * a.scale : a.fill;
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the quad holds the row's 16 keys
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[r], mx);  // NaN skipped, as fmaxf on the CPU side
      base[r] = m_new == -INFINITY ? 0.f : m_new;  // nothing above -inf yet: no mass
      const float corr = __expf(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= corr;
#pragma unroll
      for (int nb = 0; nb < D / 8; ++nb) {
        o[nb][2 * r] *= corr;
        o[nb][2 * r + 1] *= corr;
      }
    }
    float p[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        p[nb][c] = __expf(s[nb][c] - base[c >> 1]);
        l[c >> 1] += p[nb][c];
      }
    // The score accumulators are P's A fragment: (g, keys 2c..) then (g + 8, ...), two k halves.
    const uint32_t pf[4] = {MmaType<T>::pack(p[0][0], p[0][1]), MmaType<T>::pack(p[0][2], p[0][3]),
                            MmaType<T>::pack(p[1][0], p[1][1]), MmaType<T>::pack(p[1][2], p[1][3])};
#pragma unroll
    for (int nb = 0; nb < D / 8; nb += 2) {
      uint32_t bf[4];
      ldsm_x4_trans(bf, vs + ((lane & 7) + ((lane >> 3) & 1) * 8) * KS + nb * 8 + (lane >> 4) * 8);
      mma16816<T>(o[nb], pf, bf);
      mma16816<T>(o[nb + 1], pf, bf + 2);
    }
    __syncwarp();  // the stage is refilled STAGES - 1 tiles later
  }
  cp_wait<0>();  // only empty groups can be left; the ring becomes the warp's partial
  __syncwarp();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  float* wsum = reinterpret_cast<float*>(wring);
  float* wml = wsum + kMaxG * D;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = g + 8 * r;
    if (h >= G) continue;
#pragma unroll
    for (int nb = 0; nb < D / 8; ++nb) {
      wsum[h * D + nb * 8 + 2 * cq] = o[nb][2 * r];
      wsum[h * D + nb * 8 + 2 * cq + 1] = o[nb][2 * r + 1];
    }
    if (cq == 0) {
      wml[2 * h] = m[r];
      wml[2 * h + 1] = l[r];
    }
  }
  __syncthreads();
  // The warps: every part rescaled to the common max and added, in warp order.
  auto warp_sum = [&](int w) { return reinterpret_cast<const float*>(ring + w * L::kWarpElems); };
  for (int i = tid; i < G * D; i += kThreads) {
    const int h = i / D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, warp_sum(w)[kMaxG * D + 2 * h]);
    const float base = M == -INFINITY ? 0.f : M;
    float x = 0.f, Ls = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* ws = warp_sum(w);
      const float f = __expf(ws[kMaxG * D + 2 * h] - base);
      x = fmaf(f, ws[i], x);
      Ls = fmaf(f, ws[kMaxG * D + 2 * h + 1], Ls);
    }
    part[i] = x;
    if (i % D == 0) {
      part_ml[h][0] = M;
      part_ml[h][1] = Ls;
    }
  }
  cluster.sync();  // every split's partial is in its shared memory, visible to the cluster

  // Each rank merges a slice of the G · D outputs over all ranks, rank 0 first.
  const int outs = G * D, per = (outs + splits - 1) / splits;
  for (int i = split * per + tid; i < min(outs, (split + 1) * per); i += kThreads) {
    const int h = i / D;
    float M = -INFINITY;
    for (int r = 0; r < splits; ++r) M = fmaxf(M, cluster.map_shared_rank(&part_ml[h][0], r)[0]);
    const float base = M == -INFINITY ? 0.f : M;
    float x = 0.f, Ls = 0.f;
    for (int r = 0; r < splits; ++r) {
      const float* ml = cluster.map_shared_rank(&part_ml[h][0], r);
      const float f = __expf(ml[0] - base);
      x = fmaf(f, cluster.map_shared_rank(part, r)[i], x);
      Ls = fmaf(f, ml[1], Ls);
    }
    // Ls == 0 (every score -inf): 0/0 = NaN, as Softmax gives, or 0 with masked_rows_zero.
    const bool zero = a.rows_zero && M == -INFINITY;
    static_cast<T*>(a.y)[(int64_t(b) * a.H + int64_t(hk) * G) * D + i] = from_f<T>(zero ? 0.f : x / Ls);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

// Stages a warp's ring holds: three at head dim 64 (with the keep bytes and static arrays
// ~62 KB a block: three blocks an SM), two at 128 (~82 KB: two blocks an SM).
template <int D>
constexpr int kStages = D == 64 ? 3 : 2;

template <class T, int D>
bool launch_d(const MmaDecodeArgs& a, int splits, int B, cudaStream_t stream) {
  using L = Layout<D, kStages<D>>;
  const size_t smem = L::kRingBytes + ((size_t(a.chunk) + 15) / 16) * 16;
  return launch_x_cluster(decode_mma_kernel<T, D, kStages<D>>, dim3(splits, a.Hkv, B), kThreads, smem, stream, a);
}

std::atomic<long long> g_launches{0};

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Splits a (batch, kv head): ~2 blocks an SM over the pairs, at most `cap` (the cluster), each
// split whole 16-key tiles of at most kMaxChunk keys. false: the cache is too long for `cap`.
bool plan_splits(int64_t St, int64_t pairs, int cap, int* splits_out, int* chunk_out) {
  const int64_t sms = sm_count();
  int64_t splits = std::clamp<int64_t>((2 * sms + pairs - 1) / pairs, 1, cap);
  splits = std::min<int64_t>(splits, (St + kTile - 1) / kTile);
  const int64_t chunk = ((St + splits - 1) / splits + kTile - 1) / kTile * kTile;
  splits = (St + chunk - 1) / chunk;
  if (chunk > kMaxChunk) return false;
  *splits_out = int(splits);
  *chunk_out = int(chunk);
  return true;
}

// FUSEOPT_DECODE_CLUSTER: the most splits a (batch, kv head), "8" (portable) or unset / "16"
// (Hopper's non-portable size: at batch 1 a GQA model has few kv heads, and 8 splits each left
// half the H200's SMs idle at 2048 cached tokens, NOTES-perf.md v22).
int max_cluster() {
  static const int v = [] {
    const char* e = std::getenv("FUSEOPT_DECODE_CLUSTER");
    return e && std::string(e) == "8" ? kPortableCluster : kMaxCluster;
  }();
  return v;
}

// FUSEOPT_DECODE_PREFETCH: "0" requests a held cache's past tiles only after the
// programmatic-launch wait; unset / "1" before it (the kernel comment says why that is safe).
bool early_past_enabled() {
  static const bool v = [] {
    const char* e = std::getenv("FUSEOPT_DECODE_PREFETCH");
    return !(e && std::string(e) == "0");
  }();
  return v;
}

// FUSEOPT_DECODE_EARLY_MASK: "0" reads a stable mask after the programmatic-launch wait, as
// any other; unset / "1" before it (DecodeAppend::mask_stable).
bool early_mask_enabled() {
  static const bool v = [] {
    const char* e = std::getenv("FUSEOPT_DECODE_EARLY_MASK");
    return !(e && std::string(e) == "0");
  }();
  return v;
}

}  // namespace

bool decode_mma_enabled() {
  const char* e = std::getenv("FUSEOPT_DECODE_MMA");
  if (e && *e) return std::string(e) != "0";
  return kDecodeMmaDefault;
}

bool launch_decode_mma(const DecodeAppend& d, cudaStream_t stream) {
  if (!decode_mma_enabled()) return false;
  if (d.dt != DType::Float16 && d.dt != DType::BFloat16) return false;
  if (d.Dh != d.Dv || (d.Dh != 64 && d.Dh != 128) || d.Hkv <= 0 || d.H % d.Hkv != 0) return false;
  const int64_t G = d.H / d.Hkv, St = d.Sp + 1;
  if (G > kMaxG || d.B <= 0 || d.B >= 65536 || d.Hkv >= 65536 || d.Sp < 0 || St >= (int64_t(1) << 30)) return false;
  if (d.Sp > 0 && (!d.past_k || !d.past_v)) return false;
  const void* ptrs[] = {d.q, d.past_k, d.past_v, d.new_k, d.new_v, d.y};
  for (const void* p : ptrs)
    if (p && !aligned16(p)) return false;
  if (!d.q || !d.new_k || !d.new_v || !d.y) return false;
  if ((d.present_k && !aligned16(d.present_k)) || (d.present_v && !aligned16(d.present_v))) return false;
  if (!d.present_k != !d.present_v) return false;
  if (d.q_batch_stride % 8 || d.new_k_batch % 8 || d.new_v_batch % 8) return false;
  if (d.in_place && (d.present_k != d.past_k || d.present_v != d.past_v || d.present_rows != d.past_rows ||
                     d.past_rows < St))
    return false;
  MmaDecodeArgs a{};
  a.q = d.q;
  a.q_batch_stride = d.q_batch_stride;
  a.past_k = d.past_k;
  a.past_v = d.past_v;
  a.new_k = d.new_k;
  a.new_v = d.new_v;
  a.new_k_batch = d.new_k_batch;
  a.new_v_batch = d.new_v_batch;
  a.present_k = d.present_k;
  a.present_v = d.present_v;
  a.mask = d.mask;
  a.mask_dtype = d.mask_dtype;
  a.y = d.y;
  a.H = int(d.H);
  a.Hkv = int(d.Hkv);
  a.G = int(G);
  a.Sp = int(d.Sp);
  a.St = int(St);
  a.past_rows = d.past_rows > 0 ? d.past_rows : d.Sp;
  a.present_rows = d.present_rows > 0 ? d.present_rows : St;
  a.in_place = d.in_place;
  a.early_past = d.in_place && early_past_enabled();
  a.early_mask = d.mask && d.mask_stable && early_mask_enabled();
  a.scale = d.scale;
  a.fill = d.fill;
  a.rows_zero = d.rows_zero;
  const int B = int(d.B);
  // The portable 8 splits, unless a block would then walk more tiles than its warps request
  // before the loop (4 · (STAGES - 1)): those wait a memory round trip each, so the non-portable
  // 16 where allowed (H200, batch 1 at 2048 cached tokens: 7.15 -> 6.95 us; at 128, where 8
  // splits already fit that window, 16 cost 0.2 us of cluster merge). Should the device refuse
  // 16, the portable 8.
  int first_cap = kPortableCluster;
  if (max_cluster() > kPortableCluster) {
    int splits = 0, chunk = 0;
    const int early_tiles = kWarps * ((d.Dh == 64 ? kStages<64> : kStages<128>) - 1);
    if (!plan_splits(St, d.B * d.Hkv, kPortableCluster, &splits, &chunk) || chunk / kTile > early_tiles)
      first_cap = max_cluster();
  }
  bool launched = false;
  for (int cap : {first_cap, kPortableCluster}) {
    int splits = 0, chunk = 0;
    if (!plan_splits(St, d.B * d.Hkv, cap, &splits, &chunk)) return false;
    a.chunk = chunk;
    if (d.dt == DType::Float16)
      launched = d.Dh == 64 ? launch_d<__half, 64>(a, splits, B, stream) : launch_d<__half, 128>(a, splits, B, stream);
    else
      launched = d.Dh == 64 ? launch_d<__nv_bfloat16, 64>(a, splits, B, stream)
                            : launch_d<__nv_bfloat16, 128>(a, splits, B, stream);
    if (launched || splits <= kPortableCluster) break;
  }
  if (launched) g_launches.fetch_add(1, std::memory_order_relaxed);
  return launched;
}

long long decode_mma_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
