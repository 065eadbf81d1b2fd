// Hopper (sm_90a) flash attention for fp16/bf16, head dim 64 or 128
// (FlashAttention-3 scheme, written for fuseopt; NOTES-perf.md v7):
//   block = a producer warpgroup (its first warp issues the TMA copies and
//   writes the key-padding flags) + NC consumer warpgroups of 64 query rows
//   each (setmaxnreg: NC = 2, the default, 40/232 registers; NC = 1, 64-row
//   blocks two per SM, for head dim 64 at short S_kv; NC = 3, a tested option).
//   Q and K/V tiles [128 keys] reach shared memory by TMA (cp.async.bulk.tensor,
//   128-byte swizzle, zero-filled past the end), K/V through a STAGES-deep
//   ring guarded by mbarriers (full: TMA bytes landed; K-empty / V-empty: all
//   consumer warps are done with the stage's K / V).
//   S = Q·Kᵀ: wgmma m64n128k16, A and B from shared memory (descriptors).
//   O += P·V: wgmma m64n(D)k16 (or 2 x m64n64 for D = 128), P from registers
//   (the S accumulator converted to fp16/bf16 is the A fragment), V as an
//   MN-major B (transpose bit), so V needs no transposed copy.
//   Within a warpgroup S(t+1) and PV(t) are issued back to back and the
//   softmax of S(t+1) runs while PV(t) is on the tensor cores; between
//   warpgroups a named-barrier ping-pong orders the MMA issue.
//   Online softmax in fp32: running max and sum per row; without per-element
//   checks one FFMA (scale·log2e folded) and one ex2 per score.
//   Persistent grid (blocks walk query-tile x head x batch items; the K/V ring
//   and its phases carry over) except under causal, where items differ in work.
// Semantics are the generic kernel's (fused_launch.cuh): key-padding mask
// replaced by mask_filter_value, causal bottom-right aligned (-inf), a row
// with every score -inf gives NaN, finfo.min fills give uniform rows.
// Only the sm_90a image holds the kernel body (CMakeLists.txt gives this
// file that target besides the project's sm_90); the host side checks at
// run time that the device is 9.0 and that the loaded image is sm_90a.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_attention_hopper_wgmma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FUSEOPT_HOPPER_DEVICE 1
#endif

namespace fuseopt::cuda_fused {

namespace {

constexpr int kBN = 128;        // keys per tile
constexpr float kLog2e = 1.4426950408889634f;

struct HopperParams {
  int H, Hkv, Sq, Skv;
  float scale, scale_log2, fill;
  int causal;
  int pingpong;  // the two consumer warpgroups take turns issuing their MMAs
  int n_items;   // query tiles x heads x batch
  const void* mask;
  DType mask_dtype;
  void* y;
};

// Shared-memory layout (bytes from a 1024-aligned base): every operand tile
// is a set of 64-column panels of [rows][128 B], the TMA 128-byte swizzle.
// NC consumer warpgroups of 64 query rows each: 2 (128-row blocks, one
// block per SM), 3 (192-row blocks, head dim 64: less K/V traffic per query
// row, three warpgroups to interleave) or 1 (64-row blocks, two blocks per
// SM). QB query buffers: with 2 the next work item's Q loads during this one.
template <int D, int STAGES, int NC, int QB>
struct Layout {
  static constexpr int kBM = 64 * NC;  // query rows per block
  static constexpr int kThreads = 128 * (NC + 1);
  static constexpr int kPanels = D / 64;
  static constexpr int kQBytes = kPanels * kBM * 128;
  static constexpr int kStageBytes = kPanels * kBN * 128;  // K or V of one stage
  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kOffQ + QB * kQBytes;
  static constexpr int kOffV = kOffK + STAGES * kStageBytes;
  static constexpr int kOffFlags = kOffV + STAGES * kStageBytes;  // STAGES x kBN bytes
  static constexpr int kOffAny = kOffFlags + STAGES * kBN;        // STAGES ints
  static constexpr int kOffBar = (kOffAny + STAGES * 4 + 7) / 8 * 8;
  static constexpr int kBytes = kOffBar + (2 * QB + 4 * STAGES) * 8;
  static constexpr int kAlloc = kBytes + 1024;  // slack to align the base
};

#if defined(FUSEOPT_HOPPER_DEVICE)
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
#if defined(FUSEOPT_HOPPER_WATCHDOG)
  // Debugging aid (-DFUSEOPT_HOPPER_WATCHDOG): a wait of over ~2 s traps
  // instead of hanging the device. Off in every build: it costs registers.
  const long long t0 = clock64();
#endif
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
#if defined(FUSEOPT_HOPPER_WATCHDOG)
    if (!done && clock64() - t0 > 4000000000ll) __trap();
#endif
  } while (!done);
}
// 4-d tile copy global -> shared, completing on mbarrier `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2,
                                         int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins registers written by an asynchronous MMA after the wait that completes it.
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// Shared-memory matrix descriptor, 128-byte swizzle; stride between 8-row
// groups 1024 B; `lbo` only matters for MN-major operands wider than 64.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t(1024 >> 4) << 32) |
         (uint64_t(1) << 62);
}
// Named barriers 1 and 2 (256 threads: one consumer warpgroup syncs, the other arrives).
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
#endif  // FUSEOPT_HOPPER_DEVICE

template <class T, int D, int STAGES, int NC, int QB, bool WIDE_PV>
__global__ void __launch_bounds__(128 * (NC + 1), NC == 1 ? 2 : 1)
    hopper_attention_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                            const __grid_constant__ CUtensorMap tm_v, const HopperParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  using L = Layout<D, STAGES, NC, QB>;
  constexpr int kPanels = L::kPanels;
  constexpr int kBM = L::kBM;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* sbase = smem_raw + (base - raw);
  const uint32_t sQ = base + L::kOffQ, sK = base + L::kOffK, sV = base + L::kOffV;
  uint8_t* flags = sbase + L::kOffFlags;
  int* stage_any = reinterpret_cast<int*>(sbase + L::kOffAny);
  const uint32_t bar = base + L::kOffBar;
  auto q_full = [&](int qb) { return bar + 8u * qb; };
  auto q_empty = [&](int qb) { return bar + 8u * (QB + qb); };
  auto k_full = [&](int s) { return bar + 8u * (2 * QB + s); };
  auto v_full = [&](int s) { return bar + 8u * (2 * QB + STAGES + s); };
  // K and V of a stage are released separately: K once the tile's scores
  // (and its key flags) are consumed, V once its P·V is done, so the next
  // K load starts about an iteration before V's.
  auto k_empty = [&](int s) { return bar + 8u * (2 * QB + 2 * STAGES + s); };
  auto v_empty = [&](int s) { return bar + 8u * (2 * QB + 3 * STAGES + s); };

  // Work items: (query tile, head, batch), query tile fastest so that the
  // blocks running at once share K/V in L2, heaviest (most keys under causal)
  // first within a head. A block takes items blockIdx.x, + gridDim.x, ...
  // (persistent when the grid is smaller than the item count); the K/V ring
  // and its phases run on across items (tile counter `tc`).
  const int q_tiles = (p.Sq + kBM - 1) / kBM;
  const int causal_off = p.Skv - p.Sq;
  struct Item {
    int q0, h, b, hk, n_tiles;
  };
  auto item = [&](int w) {
    Item it;
    const int hb = w / q_tiles;
    it.q0 = (q_tiles - 1 - (w - hb * q_tiles)) * kBM;
    it.h = hb % p.H;
    it.b = hb / p.H;
    it.hk = it.h / (p.H / p.Hkv);
    int kv_end = p.Skv;
    if (p.causal) {
      const int last_row = min(it.q0 + kBM, p.Sq) - 1;
      kv_end = max(0, min(p.Skv, last_row + causal_off + 1));
    }
    it.n_tiles = (kv_end + kBN - 1) / kBN;
    return it;
  };

  if (threadIdx.x == 0) {
    for (int qb = 0; qb < QB; ++qb) {
      mbar_init(q_full(qb), 1);
      mbar_init(q_empty(qb), 4 * NC);  // the consumer warps, once their last S of the item is done
    }
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(k_full(s), 32);  // the producer warp: its lanes wrote the key flags
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), 4 * NC);  // the consumer warps
      mbar_init(v_empty(s), 4 * NC);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    // ---------------- producer warpgroup ----------------
    // Registers: NC = 2: 128 x 40 + 256 x 232 <= 64K (one block per SM);
    // NC = 3: 128 x 24 + 384 x 160 <= 64K; NC = 1: 128 x 56 + 128 x 200 = 32K
    // (two blocks per SM).
    if constexpr (NC == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    else if constexpr (NC == 3) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    else asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    int tc = 0;
    for (int w = blockIdx.x, n = 0; w < p.n_items; w += gridDim.x, ++n) {
      const Item it = item(w);
      if (lane == 0) {
        const int qb = n % QB;
        if (n >= QB) mbar_wait(q_empty(qb), ((n / QB) - 1) & 1);
        mbar_arrive_tx(q_full(qb), L::kQBytes);
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn)
          tma_load(sQ + qb * L::kQBytes + pn * kBM * 128, &tm_q, q_full(qb), pn * 64, it.h, it.q0, it.b);
      }
      for (int t = 0; t < it.n_tiles; ++t, ++tc) {
        const int s = tc % STAGES;
        const uint32_t reuse_parity = ((tc / STAGES) - 1) & 1;
        if (tc >= STAGES) mbar_wait(k_empty(s), reuse_parity);
        const int k0 = t * kBN;
        // Per key: 2 = past S_kv (-inf), 1 = masked by the key-padding mask (filter value).
        int any = 0;
        for (int c = lane; c < kBN; c += 32) {
          const int j = k0 + c;
          const int f =
              j >= p.Skv ? 2 : (p.mask && !mask_keep(p.mask, p.mask_dtype, int64_t(it.b) * p.Skv + j)) ? 1 : 0;
          flags[s * kBN + c] = static_cast<uint8_t>(f);
          any |= f;
        }
        any = __any_sync(0xffffffffu, any);
        if (lane == 0) {
          stage_any[s] = any;
          mbar_arrive_tx(k_full(s), L::kStageBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
            tma_load(sK + s * L::kStageBytes + pn * kBN * 128, &tm_k, k_full(s), pn * 64, it.hk, k0, it.b);
          if (tc >= STAGES) mbar_wait(v_empty(s), reuse_parity);
          mbar_arrive_tx(v_full(s), L::kStageBytes);
#pragma unroll
          for (int pn = 0; pn < kPanels; ++pn)
            tma_load(sV + s * L::kStageBytes + pn * kBN * 128, &tm_v, v_full(s), pn * 64, it.hk, k0, it.b);
        } else {
          mbar_arrive(k_full(s));
        }
      }
    }
    return;
  }

  // ---------------- consumer warpgroups ----------------
  if constexpr (NC == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  else if constexpr (NC == 3) asm volatile("setmaxnreg.inc.sync.aligned.u32 160;\n" ::: "memory");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 200;\n" ::: "memory");
  const int ct = threadIdx.x - 128;
  const int cw = ct >> 7;  // consumer warpgroup: rows [64cw, 64cw+64) of the block
  const int warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  constexpr int kSN = kBN / 8;  // n8 blocks of S

  float sacc[kBN / 2];       // S of one tile, then P (fp32) in place
  float o[kPanels * 32];     // O: column 64*pn + 8j + 2*t4 + (c & 1) at o[pn*32 + 4j + c]
  uint32_t pf[kBN / 16][4];  // P as A fragments, one per 16 keys
  uint32_t q_base = sQ + cw * 64 * 128;  // this warpgroup's 64 rows of the item's Q buffer

  auto issue_s = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = make_desc(q_base + (kk / 4) * kBM * 128 + (kk % 4) * 32, 16);
      const uint64_t db = make_desc(sK + s * L::kStageBytes + (kk / 4) * kBN * 128 + (kk % 4) * 32, 16);
      hopper::Wgmma<T, kBN>::ss(sacc, da, db, kk > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int s) {
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      if constexpr (WIDE_PV) {
        // One m64n128 over both 64-column panels of V (leading byte offset = panel stride).
        const uint64_t db = make_desc(sV + s * L::kStageBytes + kk * 16 * 128, kBN * 128);
        hopper::Wgmma<T, 64 * kPanels>::rs(o, pf[kk], db, 1);
      } else {
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) {
          const uint64_t db = make_desc(sV + s * L::kStageBytes + pn * kBN * 128 + kk * 16 * 128, kBN * 128);
          hopper::Wgmma<T, 64>::rs(o + pn * 32, pf[kk], db, 1);
        }
      }
    }
    wgmma_commit();
  };
  auto pack_p = [&]() {
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      pf[kk][0] = pack2<T>(sacc[(2 * kk) * 4 + 0], sacc[(2 * kk) * 4 + 1]);
      pf[kk][1] = pack2<T>(sacc[(2 * kk) * 4 + 2], sacc[(2 * kk) * 4 + 3]);
      pf[kk][2] = pack2<T>(sacc[(2 * kk + 1) * 4 + 0], sacc[(2 * kk + 1) * 4 + 1]);
      pf[kk][3] = pack2<T>(sacc[(2 * kk + 1) * 4 + 2], sacc[(2 * kk + 1) * 4 + 3]);
    }
  };

  int tc = 0;
  for (int w = blockIdx.x, n = 0; w < p.n_items; w += gridDim.x, ++n) {
    const Item it = item(w);
    const int n_tiles = it.n_tiles;
    const int warp_row0 = it.q0 + cw * 64 + warp * 16;  // first query row of this warp
    const int row0 = warp_row0 + g;                     // this thread's rows: row0, row0 + 8
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kPanels * 32; ++i) o[i] = 0.f;

    // Scores of tile tt (ring slot s, in sacc) -> probabilities in place;
    // updates m, l and returns the factor the previous O must be scaled by.
    auto softmax = [&](int tt, int s, float (&corr)[2]) {
      const int k0 = tt * kBN;
      const bool diag = p.causal && k0 + kBN - 1 > warp_row0 + causal_off;
      float mx[2] = {-INFINITY, -INFINITY};
      if (!diag && !stage_any[s]) {
        // Every score of the tile is a plain score: max of the raw dot products,
        // then p = 2^(s·scale·log2e - m·log2e) as one FFMA.
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], sacc[i]);
        float nb[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          const float m_new = fmaxf(m[r], mx[r] * p.scale);  // finite: the tile has real scores
          corr[r] = ex2((m[r] - m_new) * kLog2e);
          m[r] = m_new;
          nb[r] = -m_new * kLog2e;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) {
          const float e = ex2(fmaf(sacc[i], p.scale_log2, nb[(i >> 1) & 1]));
          sacc[i] = e;
          sum[(i >> 1) & 1] += e;
        }
        l[0] = l[0] * corr[0] + sum[0];
        l[1] = l[1] * corr[1] + sum[1];
      } else {
        // Scores in natural units with the replacements of the contract.
#pragma unroll
        for (int j = 0; j < kSN; ++j) {
          const uint32_t f2 = *reinterpret_cast<const uint16_t*>(flags + s * kBN + j * 8 + 2 * t4);
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const uint32_t f = (f2 >> (8 * (c & 1))) & 0xffu;
            const int col = k0 + j * 8 + 2 * t4 + (c & 1);
            const int row = row0 + 8 * (c >> 1);
            float v = sacc[j * 4 + c] * p.scale;
            v = (f & 2u) ? -INFINITY : (f & 1u) ? p.fill : v;
            if (p.causal && col > row + causal_off) v = -INFINITY;
            sacc[j * 4 + c] = v;
            mx[c >> 1] = fmaxf(mx[c >> 1], v);
          }
        }
        float base_r[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
          mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
          const float m_new = fmaxf(m[r], mx[r]);
          // Nothing allowed yet: keep m = -inf and take no mass (avoids inf - inf).
          base_r[r] = m_new == -INFINITY ? 0.f : m_new;
          corr[r] = ex2((m[r] - base_r[r]) * kLog2e);
          m[r] = m_new;
        }
        float sum[2] = {0.f, 0.f};
#pragma unroll
        for (int i = 0; i < kBN / 2; ++i) {
          const float e = ex2((sacc[i] - base_r[(i >> 1) & 1]) * kLog2e);
          sacc[i] = e;
          sum[(i >> 1) & 1] += e;
        }
        l[0] = l[0] * corr[0] + sum[0];
        l[1] = l[1] * corr[1] + sum[1];
      }
    };

    // Ping-pong (p.pingpong): the warpgroups issue their MMAs in turn, 0, 1,
    // .., NC-1, 0, .. (named barrier 1 + w = "warpgroup w may issue"), so one's
    // softmax runs while the others' MMAs occupy the tensor cores. Each
    // warpgroup has n_tiles + 1 issue points per item (S(0); S(t+1) with
    // PV(t); PV(last)); the last warpgroup opens the item's first turn and
    // does not hand on after its last.
    const bool pp = NC >= 2 && p.pingpong && n_tiles > 0;
    auto turn_begin = [&]() {
      if (pp) named_sync(1 + cw);
    };
    auto turn_end = [&](bool last) {
      if (pp && !(last && cw == NC - 1)) named_arrive(1 + (cw + 1) % NC);
    };
    if (pp && cw == NC - 1) named_arrive(1);

    const int qb = n % QB;
    q_base = sQ + qb * L::kQBytes + cw * 64 * 128;
    mbar_wait(q_full(qb), (n / QB) & 1);
    if (n_tiles > 0) {
      const int s = tc % STAGES;
      mbar_wait(k_full(s), (tc / STAGES) & 1);
      turn_begin();
      issue_s(s);
      turn_end(false);
      wgmma_wait<0>();
      fence_regs(sacc);
      float corr[2];
      softmax(0, s, corr);  // O is still zero: nothing to rescale
      __syncwarp();
      if (lane == 0) mbar_arrive(k_empty(s));
      pack_p();
    }
    // Steady state (unconditional, so that the compiler sees which wgmma group
    // each wait completes): S(t+1) and PV(t) in flight, softmax of S(t+1)
    // while PV(t) runs. The last tile's PV is the tail below.
    for (int t = 0; t + 1 < n_tiles; ++t) {
      const int s = (tc + t) % STAGES, s1 = (tc + t + 1) % STAGES;
      mbar_wait(k_full(s1), ((tc + t + 1) / STAGES) & 1);
      turn_begin();
      issue_s(s1);
      mbar_wait(v_full(s), ((tc + t) / STAGES) & 1);
      issue_pv(s);
      turn_end(false);
      float corr[2];
      wgmma_wait<1>();  // S(t+1) done; PV(t) may still run
      fence_regs(sacc);
      softmax(t + 1, s1, corr);
      __syncwarp();
      if (lane == 0) mbar_arrive(k_empty(s1));  // K(t+1) and its key flags are no longer read
      wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(v_empty(s));  // V(t) is no longer read
#pragma unroll
      for (int i = 0; i < kPanels * 32; ++i) o[i] *= corr[(i >> 1) & 1];
      pack_p();
    }
    // Every S of the item is done: the producer may load the next item's Q.
    __syncwarp();
    if (lane == 0) mbar_arrive(q_empty(qb));
    if (n_tiles > 0) {
      const int t = n_tiles - 1, s = (tc + t) % STAGES;
      mbar_wait(v_full(s), ((tc + t) / STAGES) & 1);
      turn_begin();
      issue_pv(s);
      turn_end(true);
      wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(v_empty(s));
    }
    tc += n_tiles;

    // Row sums across the quad, then O / l (l = 0: every score -inf, NaN like Softmax).
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float lr = l[r];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      inv[r] = 1.f / lr;
    }
    const int64_t y_stride = int64_t(p.H) * D;
    T* yb = static_cast<T*>(p.y) + int64_t(it.b) * p.Sq * y_stride + int64_t(it.h) * D;
#pragma unroll
    for (int j = 0; j < kPanels * 8; ++j) {
      const int col = j * 8 + 2 * t4;
      if (row0 < p.Sq)
        *reinterpret_cast<uint32_t*>(yb + row0 * y_stride + col) = pack2<T>(o[j * 4 + 0] * inv[0], o[j * 4 + 1] * inv[0]);
      if (row0 + 8 < p.Sq)
        *reinterpret_cast<uint32_t*>(yb + (row0 + 8) * y_stride + col) =
            pack2<T>(o[j * 4 + 2] * inv[1], o[j * 4 + 3] * inv[1]);
    }
  }
#endif  // FUSEOPT_HOPPER_DEVICE
}

// Writes 1 when the image that runs is the sm_90a one (holds the kernel body).
__global__ void hopper_probe_kernel(int* out) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  *out = 1;
#else
  *out = 0;
#endif
}

// ---------------- host side ----------------

int g_pingpong = 1;  // attention_hopper_set_pingpong
int g_blocks = 0;    // attention_hopper_set_blocks: 0 = by shape, else the rows (64, 128, 192)
int g_persistent = 1;  // attention_hopper_set_persistent
int g_max_blocks = 0;  // its optional cap on the grid (tests: several items per block)
int g_wide_pv = 1;     // attention_hopper_set_wide_pv

int sm_count() {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  if (cached[dev] == 0) cudaDeviceGetAttribute(&cached[dev], cudaDevAttrMultiProcessorCount, dev);
  return cached[dev];
}

// Head dim 64: rows per block by shape (measured, NOTES-perf.md: 64-row
// blocks, two per SM, win at S_kv 128 and 512, except 512 with a padding
// mask and no causal, 31.6 vs 34.5 us; 192-row blocks lose everywhere).
int default_rows_d64(const AttentionArgs& a) {
  if (a.Skv <= 256) return 64;
  if (a.Skv <= 1024) return a.mask && !a.causal ? 128 : 64;
  return 128;
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// View of Q, K or V as a 4-d tensor [B][seq][heads][D] (innermost last), one
// box = 64 head-dim columns x `rows` positions of one head.
bool make_map(CUtensorMap* map, DType dt, const void* base, int heads, int seq, int batch, int D,
              int64_t seq_stride, int64_t batch_stride, int rows) {
  auto encode = encode_fn();
  if (!encode) return false;
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(seq), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(D) * 2, cuuint64_t(seq_stride) * 2, cuuint64_t(batch_stride) * 2};
  const cuuint32_t box[4] = {64, 1, cuuint32_t(rows), 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  return encode(map, dt == DType::Float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class T, int D, int STAGES, int NC, int QB, bool WIDE_PV>
bool launch_t(const AttentionArgs& a, cudaStream_t stream) {
  using L = Layout<D, STAGES, NC, QB>;
  constexpr int kBM = L::kBM;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  static bool configured = false;
  if (!configured) {
    if (cudaFuncSetAttribute(hopper_attention_kernel<T, D, STAGES, NC, QB, WIDE_PV>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             L::kAlloc) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    configured = true;
  }
  CUtensorMap tq, tk, tv;
  if (!make_map(&tq, a.dtype, a.q, a.H, a.Sq, a.B, D, a.q_seq_stride, a.q_batch_stride, kBM) ||
      !make_map(&tk, a.dtype, a.k, a.Hkv, a.Skv, a.B, D, a.k_seq_stride, a.k_batch_stride, kBN) ||
      !make_map(&tv, a.dtype, a.v, a.Hkv, a.Skv, a.B, D, a.v_seq_stride, a.v_batch_stride, kBN))
    return false;
  HopperParams p;
  p.H = a.H;
  p.Hkv = a.Hkv;
  p.Sq = a.Sq;
  p.Skv = a.Skv;
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  p.fill = a.mask_filter_value;
  p.causal = a.causal ? 1 : 0;
  p.pingpong = g_pingpong;
  p.mask = a.mask;
  p.mask_dtype = a.mask_dtype;
  p.y = a.y;
  const int64_t items = int64_t((a.Sq + kBM - 1) / kBM) * a.H * a.B;
  if (items >= (int64_t(1) << 31)) return false;
  p.n_items = static_cast<int>(items);
  // Persistent: as many blocks as fit at once (one or two per SM), each
  // walking the items; otherwise one block per item. Causal items differ in
  // work (the static walk would leave SMs idle at the end): one block per
  // item there, unless a test caps the grid.
  int grid = p.n_items;
  if (g_persistent && (!a.causal || g_max_blocks > 0)) {
    int fit = sm_count() * (NC == 1 ? 2 : 1);
    if (g_max_blocks > 0 && g_max_blocks < fit) fit = g_max_blocks;
    if (fit > 0 && fit < grid) grid = fit;
  }
  hopper_attention_kernel<T, D, STAGES, NC, QB, WIDE_PV><<<grid, L::kThreads, L::kAlloc, stream>>>(tq, tk, tv, p);
  return true;
}

// -1: not yet known for the device; 0: no; 1: yes.
int g_device_ok[64];
bool g_device_init = false;
int g_mode = -1;
// On by default: correct on every test shape and faster than the mma.sync
// kernel on every benchmark shape (NOTES-perf.md, "Hopper attention").
constexpr bool kDefaultOn = true;

// 0 = off, 1 = forced on (wherever it is correct), -1 = default.
int switch_state() {
  if (g_mode >= 0) return g_mode;
  static const int env = [] {
    const char* e = std::getenv("FUSEOPT_HOPPER_ATTENTION");
    if (!e || !*e) return -1;
    return std::strcmp(e, "0") == 0 ? 0 : 1;
  }();
  return env;
}

// Default choice: where the kernel measured faster than the mma.sync one,
// i.e. everywhere except short causal sequences with a padding mask
// (32x12x128x64: 18.5 vs 17.4 us).
bool default_takes(const AttentionArgs& a) { return kDefaultOn && !(a.causal && a.mask && a.Skv <= 128); }

bool takes(const AttentionArgs& a) {
  const int st = switch_state();
  return st == 1 || (st < 0 && default_takes(a));
}

// Compute capability 9.0 and the sm_90a image loaded (probed once per
// device, outside stream capture).
bool device_ok(cudaStream_t stream) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  if (!g_device_init) {
    for (int& v : g_device_ok) v = -1;
    g_device_init = true;
  }
  if (g_device_ok[dev] >= 0) return g_device_ok[dev] == 1;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) {
    g_device_ok[dev] = 0;
    return false;
  }
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return false;
  int* d = nullptr;
  int h = 0;
  bool ok = cudaMalloc(&d, sizeof(int)) == cudaSuccess;
  if (ok) {
    hopper_probe_kernel<<<1, 1>>>(d);
    ok = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
  }
  (void)cudaGetLastError();
  g_device_ok[dev] = ok && h == 1 ? 1 : 0;
  return g_device_ok[dev] == 1;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

bool args_fit(const AttentionArgs& a) {
  if (a.dtype != DType::Float16 && a.dtype != DType::BFloat16) return false;
  if (a.Dh != a.Dv || (a.Dh != 64 && a.Dh != 128)) return false;
  if (a.bias) return false;
  if (!(a.scale > 0.f) || !std::isfinite(a.scale)) return false;
  if (a.B <= 0 || a.Sq <= 0 || a.Skv <= 0 || a.H <= 0 || a.Hkv <= 0 || a.H % a.Hkv != 0) return false;
  if (a.B > 65535 || a.H > 65535) return false;
  // TMA: 16-byte aligned base addresses and strides.
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.y)) return false;
  for (int64_t s : {a.q_batch_stride, a.q_seq_stride, a.k_batch_stride, a.k_seq_stride, a.v_batch_stride,
                    a.v_seq_stride})
    if (s % 8 != 0 || s <= 0) return false;
  return true;
}

}  // namespace

void attention_set_hopper(int mode) { g_mode = mode < 0 ? -1 : mode == 0 ? 0 : 1; }
void attention_hopper_set_pingpong(bool on) { g_pingpong = on ? 1 : 0; }
void attention_hopper_set_blocks(int rows) { g_blocks = rows == 64 || rows == 128 || rows == 192 ? rows : 0; }
void attention_hopper_set_persistent(bool on, int max_blocks) {
  g_persistent = on ? 1 : 0;
  g_max_blocks = max_blocks > 0 ? max_blocks : 0;
}
void attention_hopper_set_wide_pv(bool on) { g_wide_pv = on ? 1 : 0; }

bool hopper_attention_applies(const AttentionArgs& a) { return args_fit(a) && takes(a) && device_ok(nullptr); }

bool launch_hopper_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (!args_fit(a) || !takes(a) || !device_ok(stream)) return false;
  // 64-row blocks (two per SM) where 128-row blocks would leave SMs idle or
  // the sequence is too short to hide a block's prologue (default_rows_d64).
  const int rows = a.Dh == 128 ? 128 : g_blocks > 0 ? g_blocks : default_rows_d64(a);
  if (a.dtype == DType::Float16) {
    if (a.Dh == 128)
      return g_wide_pv ? launch_t<__half, 128, 3, 2, 1, true>(a, stream)
                       : launch_t<__half, 128, 3, 2, 1, false>(a, stream);
    return rows == 64    ? launch_t<__half, 64, 2, 1, 2, false>(a, stream)
           : rows == 192 ? launch_t<__half, 64, 4, 3, 2, false>(a, stream)
                         : launch_t<__half, 64, 4, 2, 2, false>(a, stream);
  }
  if (a.Dh == 128)
    return g_wide_pv ? launch_t<__nv_bfloat16, 128, 3, 2, 1, true>(a, stream)
                     : launch_t<__nv_bfloat16, 128, 3, 2, 1, false>(a, stream);
  return rows == 64    ? launch_t<__nv_bfloat16, 64, 2, 1, 2, false>(a, stream)
         : rows == 192 ? launch_t<__nv_bfloat16, 64, 4, 3, 2, false>(a, stream)
                       : launch_t<__nv_bfloat16, 64, 4, 2, 2, false>(a, stream);
}

}  // namespace fuseopt::cuda_fused
