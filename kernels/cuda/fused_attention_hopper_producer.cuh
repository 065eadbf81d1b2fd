// The Hopper attention kernel's producer warpgroup (hopper_attention_kernel's threads 0-127, after
// their setmaxnreg.dec): the TMA copies of Q, K and V into the ring, issued by one thread, and with a
// key-padding mask the producer warp's per-key flags. Included by fused_attention_hopper_kernel.cuh
// only; its types are in fused_attention_hopper_layout.cuh.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper_layout.cuh"
#include "kernels/cuda/fused_attention_hopper_sync.cuh"

namespace fuseopt::cuda_fused::hopper {

#if defined(FUSEOPT_HOPPER_DEVICE)
// The copies (one thread): an item's Q into buffer qb once the consumers are done with
// its previous item; K / V of key tile k0 into ring slot s (their bytes announced on the
// full barrier first).
template <class L, int QB, int STAGES>
__device__ __forceinline__ void copy_q(const CUtensorMap* tm_q, uint32_t sQ, const Barriers<QB, STAGES>& bars,
                                       const Item& it, int n) {
  const int qb = n % QB;
  if (n >= QB) mbar_wait(bars.q_empty(qb), ((n / QB) - 1) & 1);
  mbar_arrive_tx(bars.q_full(qb), L::kQBytes);
#pragma unroll
  for (int pn = 0; pn < L::kPanels; ++pn)
    tma_load(sQ + qb * L::kQBytes + pn * L::kBM * 128, tm_q, bars.q_full(qb), pn * 64, it.h, it.q0, it.b);
}
template <class L>
__device__ __forceinline__ void copy_kv(uint32_t base, const CUtensorMap* map, uint32_t full, const Item& it, int s,
                                        int k0) {
#pragma unroll
  for (int pn = 0; pn < L::kPanels; ++pn)
    tma_load(base + s * L::kStageBytes + pn * L::kBN * 128, map, full, pn * 64, it.hk, k0, it.b);
}

// Without a mask, or with one where every batch is a prefix (the varlen path: prefix_of(w), item
// w's key count, read an item ahead; -1 without a mask): one thread (threadIdx.x 0) issues every
// copy, Q per item and K / V per key tile, in few registers. work(n): the block's n-th work item
// (none left from p.n_items on); item(w, pre): that item's rows, head, batch and key tiles.
template <class L, int QB, int STAGES, class Work, class ItemOf, class PrefixOf>
__device__ __forceinline__ void produce_copies(const HopperParams& p, const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                               const CUtensorMap* tm_v, uint32_t base, const Barriers<QB, STAGES>& bars,
                                               const Work& work, const ItemOf& item, const PrefixOf& prefix_of) {
  constexpr int kBN = L::kBN;
  const uint32_t sQ = base + L::kOffQ, sK = base + L::kOffK, sV = base + L::kOffV;
  int tc = 0;
  int pre_next = prefix_of(work(0));
  for (int n = 0, w = work(0); w < p.n_items; w = work(++n)) {
    const Item it = item(w, pre_next);
    pre_next = prefix_of(work(n + 1));
    copy_q<L>(tm_q, sQ, bars, it, n);
    for (int t = 0; t < it.n_tiles; ++t, ++tc) {
      const int s = tc % STAGES;
      const uint32_t reuse_parity = ((tc / STAGES) - 1) & 1;
      if (tc >= STAGES) mbar_wait(bars.k_empty(s), reuse_parity);
      mbar_arrive_tx(bars.k_full(s), L::kStageBytes);
      copy_kv<L>(sK, tm_k, bars.k_full(s), it, s, t * kBN);
      if (tc >= STAGES) mbar_wait(bars.v_empty(s), reuse_parity);
      mbar_arrive_tx(bars.v_full(s), L::kStageBytes);
      copy_kv<L>(sV, tm_v, bars.v_full(s), it, s, t * kBN);
    }
  }
}

// With a key-padding mask: the producer warp (threadIdx.x < 32) loads the mask's values of each
// key tile and writes the tile's per-key flags and their "any" into ring slot s (flags: STAGES x
// kBN bytes; stage_any: STAGES ints) before arriving on K's full barrier; its lane 0 issues the
// copies. An item of a batch whose mask is a prefix (prefix_of(w) >= 1, the varlen path: the
// item's n_tiles cover only those keys) reads no mask and writes no flags: its lanes only arrive.
// work, item: as produce_copies; prefix_of(w): item w's prefix or -1.
template <class L, int QB, int STAGES, class Work, class ItemOf, class PrefixOf>
__device__ __forceinline__ void produce_flags(const HopperParams& p, const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                              const CUtensorMap* tm_v, uint32_t base, uint8_t* flags, int* stage_any,
                                              const Barriers<QB, STAGES>& bars, const Work& work, const ItemOf& item,
                                              const PrefixOf& prefix_of) {
  constexpr int kBN = L::kBN;
  const uint32_t sQ = base + L::kOffQ, sK = base + L::kOffK, sV = base + L::kOffV;
  const int lane = threadIdx.x;
  int tc = 0;
  // The key-padding mask's values of tile t are requested a tile ahead (mask_load_raw: no wait
  // where issued) and compared only after the next stage is free and K's copy is on its way;
  // an item's first tile is requested during the previous item's last (have_next). Read just
  // before K's copy, each tile's mask round trip held back the producer, and with it every K/V
  // copy: +14 us (+18 %) on a causal 32 x 2048 x 64 attention (NOTES-perf.md v25); the item's
  // first tile kept that round trip at every item start (v26).
  constexpr int kPerLane = kBN / 32;
  uint64_t raw[kPerLane];
  auto fetch = [&](int64_t mask_row, int k0) {
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int j = k0 + lane + 32 * c;
      raw[c] = p.mask && j < p.Skv ? mask_load_raw(p.mask, p.mask_dtype, mask_row + j) : 1;
    }
  };
  bool have_next = false;
  int pre_next = prefix_of(work(0));
  for (int n = 0, w = work(0); w < p.n_items; w = work(++n)) {
    const Item it = item(w, pre_next);
    pre_next = prefix_of(work(n + 1));
    if (lane == 0) copy_q<L>(tm_q, sQ, bars, it, n);
    const int64_t mask_row = int64_t(it.b) * p.Skv;
    if (!have_next && it.flagged) fetch(mask_row, 0);
    have_next = false;
    for (int t = 0; t < it.n_tiles; ++t, ++tc) {
      const int s = tc % STAGES;
      const uint32_t reuse_parity = ((tc / STAGES) - 1) & 1;
      if (tc >= STAGES) mbar_wait(bars.k_empty(s), reuse_parity);
      const int k0 = t * kBN;
      if (lane == 0) {
        mbar_expect_tx(bars.k_full(s), L::kStageBytes);
        copy_kv<L>(sK, tm_k, bars.k_full(s), it, s, k0);
      }
      if (it.flagged) {
        // Per key: 2 = past S_kv (-inf), 1 = masked by the key-padding mask (filter value).
        int any = 0;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int j = k0 + lane + 32 * c;
          const int f = j >= p.Skv ? 2 : mask_raw_keep(raw[c], p.mask_dtype) ? 0 : 1;
          flags[s * kBN + lane + 32 * c] = static_cast<uint8_t>(f);
          any |= f;
        }
        if (t + 1 < it.n_tiles) fetch(mask_row, k0 + kBN);
        any = __any_sync(0xffffffffu, any);
        if (lane == 0) stage_any[s] = any;
      }
      // The next item's first tile (when that item is flagged), during this item's last.
      if (t + 1 == it.n_tiles && pre_next < 1 && work(n + 1) < p.n_items) {  // (Item::flagged's rule)
        fetch(int64_t(item(work(n + 1)).b) * p.Skv, 0);
        have_next = true;
      }
      mbar_arrive(bars.k_full(s));  // each lane: its flags (lane 0: stage_any too) are written
      if (lane == 0) {
        if (tc >= STAGES) mbar_wait(bars.v_empty(s), reuse_parity);
        mbar_arrive_tx(bars.v_full(s), L::kStageBytes);
        copy_kv<L>(sV, tm_v, bars.v_full(s), it, s, k0);
      }
    }
  }
}
#endif  // FUSEOPT_HOPPER_DEVICE

}  // namespace fuseopt::cuda_fused::hopper
