// The Hopper (sm_90a) flash-attention kernel itself: the warp-specialised kernel (its types —
// launch parameters, shared-memory layout, register split — in fused_attention_hopper_layout.cuh,
// its producer warpgroup's body in _producer.cuh, its consumers' per-tile softmax in _softmax.cuh).
// Included by fused_attention_hopper.cu only (the one file compiled for sm_90a; its top comment
// describes the design). The host side there builds the TMA maps and picks the variant.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper_layout.cuh"
#include "kernels/cuda/fused_attention_hopper_producer.cuh"
#include "kernels/cuda/fused_attention_hopper_softmax.cuh"
#include "kernels/cuda/fused_attention_hopper_sync.cuh"
#include "kernels/cuda/fused_attention_hopper_wgmma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused::hopper {

template <class T, int D, int BN, int STAGES, int NC, int QB, bool WIDE_PV, bool MASKED>
__global__ void __launch_bounds__(128 * (NC + 1), blocks_per_sm(NC))
    hopper_attention_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                            const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_y,
                            const HopperParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  // Launched with programmatic dependent launch (kernels/cuda/pdl.cuh, fused_attention_hopper.cu):
  // no TMA copy, key-flag read or output write before the previous kernel has completed. The TMA
  // descriptors (the host's, in parameter space) are fetched before that wait.
  if (threadIdx.x == 0) {
    prefetch_tmap(&tm_q);
    prefetch_tmap(&tm_k);
    prefetch_tmap(&tm_v);
    if (Layout<D, BN, STAGES, NC, QB>::kTmaStore) prefetch_tmap(&tm_y);
  }
  cuda_pdl::pdl_begin();
  // The key flags are written 32 keys a pass of the producer warp.
  static_assert(!MASKED || BN % 32 == 0, "a masked key tile is whole 32-key passes");
  using L = Layout<D, BN, STAGES, NC, QB>;
  constexpr int kBN = BN;
  constexpr int kPanels = L::kPanels;
  constexpr int kBM = L::kBM;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  unsigned char* sbase = smem_raw + (base - raw);
  const uint32_t sQ = base + L::kOffQ, sK = base + L::kOffK, sV = base + L::kOffV;
  uint8_t* flags = sbase + L::kOffFlags;
  int* stage_any = reinterpret_cast<int*>(sbase + L::kOffAny);
  const Barriers<QB, STAGES> bars{base + L::kOffBar};

  // Work items: (query tile, head, batch), query tile fastest so that the
  // blocks running at once share K/V in L2, heaviest (most keys under causal)
  // first within a head. A block takes items blockIdx.x, + gridDim.x, ...
  // (persistent when the grid is smaller than the item count); the K/V ring
  // and its phases run on across items (tile counter `tc`). With
  // heaviest_first (causal, a block per item) the heads go fastest instead:
  // every head's last query tile, then every head's one before, ..., so the
  // blocks the hardware starts first are the longest and the short ones fill
  // the tail (longest-processing-time order; within a head the blocks still
  // run close together). A persistent causal grid (snake) takes that order
  // in rounds of gridDim.x items, every other round in reverse block order
  // (block b: items b, 2G-1-b, 2G+b, ...), so each block's heavy and light
  // items even out.
  auto work = [&](int n) {
    const int G = gridDim.x, b = blockIdx.x;
    return n * G + (p.snake && (n & 1) ? G - 1 - b : b);
  };
  const int q_tiles = (p.Sq + kBM - 1) / kBM;
  const int causal_off = p.Skv - p.Sq;
  // The varlen path (MASKED with p.kv_prefix): item w's batch key count when its mask is a prefix,
  // else -1 (key flags). Each role reads it an item ahead, so that the load is in flight during
  // the current item rather than stalling the next one's start. (Its batch as item's below.)
  auto prefix_of = [&](int w) -> int {
    if (!MASKED || !p.kv_prefix || w >= p.n_items) return -1;
    const int n_hb = p.n_items / q_tiles;
    return __ldg(p.kv_prefix + (p.heaviest_first ? w % n_hb : w / q_tiles) / p.H);
  };
  // pre: prefix_of(w) (MASKED), else ignored.
  auto item = [&](int w, int pre = -1) {
    Item it;
    const int n_hb = p.n_items / q_tiles;
    const int hb = p.heaviest_first ? w % n_hb : w / q_tiles;
    const int qi = p.heaviest_first ? w / n_hb : w - hb * q_tiles;  // 0: the last query tile
    it.q0 = (q_tiles - 1 - qi) * kBM;
    it.h = hb % p.H;
    it.b = hb / p.H;
    it.hk = it.h / (p.H / p.Hkv);
    int kv_end = p.Skv;
    if (p.causal) {
      const int last_row = min(it.q0 + kBM, p.Sq) - 1;
      kv_end = max(0, min(p.Skv, last_row + causal_off + 1));
    }
    it.n_tiles = (kv_end + kBN - 1) / kBN;
    it.kv_len = p.Skv;
    it.flagged = MASKED;
    if (MASKED && pre >= 1) {  // a count below 1 is no prefix
      // The batch's first pre keys only (ceil is monotone: the tiles of min(kv_end, pre) keys).
      it.flagged = false;
      it.kv_len = min(pre, p.Skv);
      it.n_tiles = min(it.n_tiles, (it.kv_len + kBN - 1) / kBN);
    }
    return it;
  };

  // Every batch a prefix (the counts all >= 1: all-ones masks, right padding everywhere): no item
  // reads flags, and the producer is the unmasked one (one thread issues the copies, K's barrier
  // takes its one arrival). Each warp reads the counts, its lanes in parallel, and votes.
  bool all_prefix = false;
  if constexpr (MASKED) {
    if (p.kv_prefix) {
      const int batches = p.n_items / (q_tiles * p.H);
      bool ok = true;
      for (int b = threadIdx.x & 31; b < batches; b += 32) ok &= __ldg(p.kv_prefix + b) >= 1;
      all_prefix = __all_sync(0xffffffffu, ok);
    }
  }

  if (threadIdx.x == 0) {
    for (int qb = 0; qb < QB; ++qb) {
      mbar_init(bars.q_full(qb), 1);
      mbar_init(bars.q_empty(qb), 4 * NC);  // the consumer warps, once their last S of the item is done
    }
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bars.k_full(s), MASKED && !all_prefix ? 32 : 1);  // the flag producer's lanes wrote the key flags
      mbar_init(bars.v_full(s), 1);
      mbar_init(bars.k_empty(s), 4 * NC);  // the consumer warps
      mbar_init(bars.v_empty(s), 4 * NC);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    // ---------------- producer warpgroup ----------------
    // Registers (Regs): NC = 2: 40 / 232 (24 / 240 with the unmasked 176-key tile); NC = 3:
    // 24 / 160; NC = 1: 56 / 200 (two blocks per SM). ptxas allocates each side of setmaxnreg
    // to its own count; with a mask the producer (item walk, mask words, flags) spills (ptxas,
    // session 37: NC = 2 6 bytes stored / 2 loaded at 40 / 232, none at 56 / 224; NC = 3 102 / 174
    // at 24 / 160). Measured (NOTES-perf.md v34, H100): neither
    // is faster — 56 / 224 won with a mask and lost 1-3 % without one at 4 x 16 x 2048 x 128;
    // 56 / 152 made the 192-row kernel slower (40.0 vs 35.1 us). Without a mask no variant
    // spills (v36).
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs<NC, BN, MASKED>::kProducer) : "memory");
    // Its body: fused_attention_hopper_producer.cuh (one thread's copies, or the warp's key flags).
    if (!MASKED || all_prefix) {
      if (threadIdx.x == 0) produce_copies<L>(p, &tm_q, &tm_k, &tm_v, base, bars, work, item, prefix_of);
    } else {
      if (threadIdx.x < 32)
        produce_flags<L>(p, &tm_q, &tm_k, &tm_v, base, flags, stage_any, bars, work, item, prefix_of);
    }
    return;
  }

  // ---------------- consumer warpgroups ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs<NC, BN, MASKED>::kConsumer) : "memory");
  const int ct = threadIdx.x - 128;
  const int cw = ct >> 7;  // consumer warpgroup: rows [64cw, 64cw+64) of the block
  const int warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  // Three consumer warpgroups have 160 registers each, too few for S, P and O (128) plus the
  // softmax's own: there P·V(t) completes before the softmax of S(t+1) (the other warpgroups'
  // MMAs keep the tensor cores busy meanwhile), so P's registers are free during it.
  constexpr bool kSerialPV = NC == 3;

  float sacc[kBN / 2];       // S of one tile, then P (fp32) in place
  float o[kPanels * 32];     // O: column 64*pn + 8j + 2*t4 + (c & 1) at o[pn*32 + 4j + c]
  uint32_t pf[kBN / 16][4];  // P as A fragments, one per 16 keys
  // Descriptors built once and stepped by constants (desc_add): Q's per item (its buffer and this
  // warpgroup's 64 rows), K's and V's at ring slot 0.
  uint64_t desc_q = 0;
  const uint64_t desc_k0 = make_desc(sK, 16), desc_v0 = make_desc(sV, kBN * 128);

  auto issue_s = [&](int s) {
    wgmma_fence();
    const uint64_t dk = desc_add(desc_k0, uint32_t(s) * L::kStageBytes);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc_add(desc_q, (kk / 4) * kBM * 128 + (kk % 4) * 32);
      const uint64_t db = desc_add(dk, (kk / 4) * kBN * 128 + (kk % 4) * 32);
      hopper::Wgmma<T, kBN>::ss(sacc, da, db, kk > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int s) {
    wgmma_fence();
    const uint64_t dv = desc_add(desc_v0, uint32_t(s) * L::kStageBytes);
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      if constexpr (WIDE_PV) {
        // One m64n128 over both 64-column panels of V (leading byte offset = panel stride).
        hopper::Wgmma<T, 64 * kPanels>::rs(o, pf[kk], desc_add(dv, kk * 16 * 128), 1);
      } else {
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn)
          hopper::Wgmma<T, 64>::rs(o + pn * 32, pf[kk], desc_add(dv, pn * kBN * 128 + kk * 16 * 128), 1);
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

  // Ping-pong between the consumer warpgroups (below): block-wide; the last warpgroup opens the
  // block's first turn.
  const bool pp = NC >= 2 && p.pingpong;
  if (pp && cw == NC - 1) named_arrive(1);
  int tc = 0;
  int pre_next = prefix_of(work(0));
  for (int n = 0, w = work(0); w < p.n_items; w = work(++n)) {
    const Item it = item(w, pre_next);
    pre_next = prefix_of(work(n + 1));
    const int n_tiles = it.n_tiles;
    const int warp_row0 = it.q0 + cw * 64 + warp * 16;  // first query row of this warp
    const int row0 = warp_row0 + g;                     // this thread's rows: row0, row0 + 8
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kPanels * 32; ++i) o[i] = 0.f;

    // Scores of tile tt (ring slot s, in sacc) -> probabilities in place (tile_softmax,
    // fused_attention_hopper_softmax.cuh); updates m, l and returns the factor the previous O must
    // be scaled by.
    auto softmax = [&](int tt, int s, float (&corr)[2]) {
      tile_softmax<L, MASKED>(p, flags, stage_any, tt, s, warp_row0, lane, sacc, m, l, corr, it.flagged, it.kv_len);
    };

    // Ping-pong (p.pingpong): the warpgroups issue their MMAs in turn, 0, 1,
    // .., NC-1, 0, .. (named barrier 1 + w = "warpgroup w may issue"), so one's
    // softmax runs while the others' MMAs occupy the tensor cores. Each
    // warpgroup has n_tiles + 1 issue points per item (S(0); S(t+1) with
    // PV(t); PV(last)), one empty turn for an item without keys. The turns run
    // on across items: the last warpgroup hands on right after issuing its last
    // P·V, so warpgroup 0 issues the next item's S(0) while the others finish
    // this item's P·V and stores. (Until session 33 the last warpgroup opened
    // each item's first turn only once it had reached that item, after its
    // stores, so both drained at every item boundary: 2-5 % slower with 128-row
    // blocks, NOTES-perf.md v37.) Only the block's last turn hands on to no
    // one, so no arrival is left pending at exit.
    const bool last_item = work(n + 1) >= p.n_items;
    auto turn_begin = [&]() {
      if (pp) named_sync(1 + cw);
    };
    auto turn_end = [&](bool last) {
      if (pp && !(last && last_item && cw == NC - 1)) named_arrive(1 + (cw + 1) % NC);
    };

    const int qb = n % QB;
    desc_q = make_desc(sQ + qb * L::kQBytes + cw * 64 * 128, 16);
    mbar_wait(bars.q_full(qb), (n / QB) & 1);
    // The ring position of the item's tile t: slot and phase (unsigned: no signed-division code).
    auto slot = [&](int t) { return int((unsigned(tc) + unsigned(t)) % STAGES); };
    auto phase = [&](int t) { return ((unsigned(tc) + unsigned(t)) / STAGES) & 1u; };
    // corr: the factor O must be scaled by before the next P·V is added (from the last softmax).
    // Applied after that iteration's S is issued, so the multiplications run beside its MMAs
    // rather than between P·V's completion and the next issue (FlashAttention-3's order).
    float corr[2] = {1.f, 1.f};
    auto rescale_o = [&]() {
#pragma unroll
      for (int i = 0; i < kPanels * 32; ++i) o[i] *= corr[(i >> 1) & 1];
    };
    if (n_tiles > 0) {
      const int s = slot(0);
      mbar_wait(bars.k_full(s), phase(0));
      turn_begin();
      issue_s(s);
      turn_end(false);
      wgmma_wait<0>();
      fence_regs(sacc);
      softmax(0, s, corr);  // O is still zero: its rescale multiplies zeros
      __syncwarp();
      if (lane == 0) mbar_arrive(bars.k_empty(s));
      pack_p();
    } else {
      turn_begin();  // no keys (causal, S_q > S_kv): an empty turn keeps the order
      turn_end(true);
    }
    // Steady state (unconditional, so that the compiler sees which wgmma group
    // each wait completes): S(t+1) and PV(t) in flight, softmax of S(t+1)
    // while PV(t) runs. The last tile's PV is the tail below.
    for (int t = 0; t + 1 < n_tiles; ++t) {
      const int s = slot(t), s1 = slot(t + 1);
      mbar_wait(bars.k_full(s1), phase(t + 1));
      turn_begin();
      issue_s(s1);
      rescale_o();  // by softmax(t)'s factor; S(t+1) does not touch O
      mbar_wait(bars.v_full(s), phase(t));
      issue_pv(s);
      turn_end(false);
      if constexpr (kSerialPV) {
        wgmma_wait<0>();  // S(t+1) and PV(t) done: P(t)'s registers are free for the softmax
        fence_regs(sacc);
        fence_regs(o);
        __syncwarp();
        if (lane == 0) mbar_arrive(bars.v_empty(s));  // V(t) is no longer read
      } else {
        wgmma_wait<1>();  // S(t+1) done; PV(t) may still run
        fence_regs(sacc);
      }
      softmax(t + 1, s1, corr);
      __syncwarp();
      if (lane == 0) mbar_arrive(bars.k_empty(s1));  // K(t+1) and its key flags are no longer read
      if constexpr (!kSerialPV) {
        wgmma_wait<0>();
        fence_regs(o);
        __syncwarp();
        if (lane == 0) mbar_arrive(bars.v_empty(s));  // V(t) is no longer read
      }
      pack_p();
    }
    // Every S of the item is done: the producer may load the next item's Q.
    __syncwarp();
    if (lane == 0) mbar_arrive(bars.q_empty(qb));
    if (n_tiles > 0) {
      const int t = n_tiles - 1, s = slot(t);
      rescale_o();
      mbar_wait(bars.v_full(s), phase(t));
      turn_begin();
      issue_pv(s);
      turn_end(true);
      wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(bars.v_empty(s));
    }
    tc += n_tiles;

    // Row sums across the quad, then O / l (l = 0: every score -inf, NaN like Softmax, or 0
    // with rows_zero; m is the row's max, the same in the four threads of the quad). A sink
    // joins the row here (join_sink: m and l are in natural units), so such a row is then 0.
    const float sink = p.sinks ? p.sinks[it.h] : -INFINITY;
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float lr = l[r];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      const float keep = p.sinks ? join_sink(m[r], sink, lr) : 1.f;
      inv[r] = p.rows_zero && m[r] == -INFINITY ? 0.f : keep / lr;
    }
    // A plain if (the condition is a constant where kTmaStore is false, and the branch is dropped).
    if (L::kTmaStore && p.tma_store) {
      // The epilogue through shared memory (FlashAttention-3's): the warpgroup writes its 64 rows
      // of O / l into its staging panel with the 128-byte swizzle (16-byte chunk j of a row at
      // chunk j ^ row % 8: a warp's 8 rows fall on all 32 banks) and one thread stores the panel
      // by TMA, which skips rows past S_q. The 4-byte stores straight from the registers (8 rows
      // x 16 bytes a warp instruction) held the warps at every item's end; the TMA store runs
      // while the warpgroup starts its next item. Its issuer waits until the previous store has
      // read the panel before the warpgroup writes it again (an item later: no wait in practice).
      const uint32_t sO = base + L::kOffOut + uint32_t(cw) * 64 * 128;  // + pn * kBM * 128: panel pn
      const bool issuer = (ct & 127) == 0;
      if (issuer) bulk_wait_read();
      warpgroup_bar(1 + NC + cw);
      const int lr = warp * 16 + g;  // this thread's rows in the panel: lr, lr + 8 (same lr % 8)
#pragma unroll
      for (int j = 0; j < kPanels * 8; ++j) {
        const uint32_t at = sO + uint32_t(j / 8) * (kBM * 128) + uint32_t(lr) * 128 +
                            ((uint32_t(j % 8) ^ uint32_t(lr & 7)) << 4) + uint32_t(t4) * 4;
        const uint32_t v0 = pack2<T>(o[j * 4 + 0] * inv[0], o[j * 4 + 1] * inv[0]);
        const uint32_t v1 = pack2<T>(o[j * 4 + 2] * inv[1], o[j * 4 + 3] * inv[1]);
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at), "r"(v0) : "memory");
        asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + 8 * 128), "r"(v1) : "memory");
      }
      fence_async_shared();
      warpgroup_bar(1 + NC + cw);
      if (issuer) {
#pragma unroll
        for (int pn = 0; pn < kPanels; ++pn) tma_store(&tm_y, sO + pn * (kBM * 128), pn * 64, it.h, it.q0 + cw * 64, it.b);
        bulk_commit();
      }
    } else {
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
  }
  // The last TMA store has written Y before the block ends (and with it the grid).
  if constexpr (L::kTmaStore) {
    if ((ct & 127) == 0) bulk_wait_all();
  }
#endif  // FUSEOPT_HOPPER_DEVICE
}

}  // namespace fuseopt::cuda_fused::hopper
