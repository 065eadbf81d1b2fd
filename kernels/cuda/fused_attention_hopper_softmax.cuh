// The consumer warpgroups' per-tile softmax of the Hopper attention kernel: a K/V tile's scores
// -> probabilities in place, with the running row maxima and sums (the plain path, and the general
// path of a tile with a masked key, from the producer's key flags). Included by
// fused_attention_hopper_kernel.cuh only; its types are in fused_attention_hopper_layout.cuh.
#pragma once
#include <cstdint>

#include "kernels/cuda/fused_attention_hopper_layout.cuh"
#include "kernels/cuda/fused_attention_hopper_sync.cuh"

namespace fuseopt::cuda_fused::hopper {

#if defined(FUSEOPT_HOPPER_DEVICE)
// One row's running max after a tile: `tile_max` (this thread's columns, before `scale`) reduced
// over the quad's four threads, scaled and merged into m. Returns the base the tile's exponentials
// subtract — 0 while the row has seen no key (m stays -inf: no inf - inf, no mass) — and sets corr,
// the factor the previous O and l are scaled by. Both softmax paths (plain and masked) use it.
__device__ __forceinline__ float merge_row_max(float& m, float tile_max, float scale, float& corr) {
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
  tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
  const float m_new = fmaxf(m, tile_max * scale);
  const float base = m_new == -INFINITY ? 0.f : m_new;
  corr = ex2((m - base) * kLog2e);
  m = m_new;
  return base;
}

// Scores of tile tt (ring slot s, in sacc) -> probabilities in place;
// updates m, l and returns (in corr) the factor the previous O must be scaled by.
// The calling thread: lane `lane` of the warp whose first query row is warp_row0, so its rows
// are row0 = warp_row0 + lane / 4 and row0 + 8 and its keys of each n8 block 2 * (lane % 4) + {0, 1}
// (the m64 accumulator layout). flags, stage_any: the producer's key flags and their per-stage "any"
// (MASKED only). flagged, kv_len: the item's (Item): read the flags, or take the keys from kv_len
// on as -inf by their position.
template <class L, bool MASKED>
__device__ __forceinline__ void tile_softmax(const HopperParams& p, const uint8_t* flags, const int* stage_any, int tt,
                                             int s, int warp_row0, int lane, float (&sacc)[L::kBN / 2], float (&m)[2],
                                             float (&l)[2], float (&corr)[2], bool flagged, int kv_len) {
  constexpr int kBN = L::kBN;
  constexpr int kSN = kBN / 8;  // n8 blocks of S
  const int g = lane >> 2, t4 = lane & 3;
  const int row0 = warp_row0 + g;
  const int causal_off = p.Skv - p.Sq;
  const int k0 = tt * kBN;
  const bool diag = p.causal && k0 + kBN - 1 > warp_row0 + causal_off;
  // Row maxima and sums run as 4 independent chains a row (n8 block j into chain j % 4),
  // combined at the end: one chain of 32 dependent FMNMX / FADD a row was the consumer's
  // longest stall ("wait", NOTES-perf.md v26). The sum's order changes by it, not its terms.
  float mx4[2][4], sum4[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) mx4[r][c] = -INFINITY, sum4[r][c] = 0.f;
  auto reduce4 = [](const float (&v)[4], bool is_max) {
    return is_max ? fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3])) : (v[0] + v[1]) + (v[2] + v[3]);
  };
  float mx[2];
  // Keys past S_kv (-inf) or masked (the fill value) in this tile: a flagged item reads the
  // producer's flags, otherwise only the last tile can reach past kv_len.
  const bool use_flags = MASKED && flagged;
  const bool special = use_flags ? stage_any[s] != 0 : k0 + kBN > kv_len;
  // Every tile takes the plain path but those with a masked key or one past S_kv under a
  // key-padding mask (its flags): they take the general path below.
  if (!use_flags || !special) {
    // Every score of the tile is a plain score: max of the raw dot products,
    // then p = 2^(s·scale·log2e - m·log2e) as one FFMA. The keys a row may not see — right
    // of its last visible key on the causal diagonal, and without flags past kv_len (S_kv,
    // or a prefix batch's key count; the last tile) — are set to -inf first: one compare and select a score, instead of the
    // general path's compares, scale and subtract before every ex2. (The general path cost
    // the last partial tile as much as three plain ones, ncu at 4 x 16 x 2048 x 128 with
    // 176-key tiles, NOTES-perf.md v37; at 32 x 12 x 128 causal every tile is a diagonal
    // one; GPT-2's and Llama's exports pass an all-ones padding mask, so their diagonal
    // tiles come here too.) A row may have seen no key yet (causal with S_q > S_kv, rows
    // past S_q): its max stays -inf and the update below takes 0 as its base.
    if (diag || (!use_flags && special)) {
      int lim[2];  // column j*8 + (c&1) of this thread is visible to row half r iff below lim[r]
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int end = p.causal ? min(kv_len, row0 + 8 * r + causal_off + 1) : kv_len;
        lim[r] = end - k0 - 2 * t4;
      }
#pragma unroll
      for (int i = 0; i < kBN / 2; ++i)
        if ((i >> 2) * 8 + (i & 1) >= lim[(i >> 1) & 1]) sacc[i] = -INFINITY;
    }
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) mx4[(i >> 1) & 1][(i >> 2) & 3] = fmaxf(mx4[(i >> 1) & 1][(i >> 2) & 3], sacc[i]);
    mx[0] = reduce4(mx4[0], true);
    mx[1] = reduce4(mx4[1], true);
    float nb[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) nb[r] = -merge_row_max(m[r], mx[r], p.scale, corr[r]) * kLog2e;
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      const float e = ex2(fmaf(sacc[i], p.scale_log2, nb[(i >> 1) & 1]));
      sacc[i] = e;
      sum4[(i >> 1) & 1][(i >> 2) & 3] += e;
    }
    l[0] = l[0] * corr[0] + reduce4(sum4[0], false);
    l[1] = l[1] * corr[1] + reduce4(sum4[1], false);
  } else {
    // Masked calls only: scores in natural units with the replacements of the contract
    // (the key flags: past S_kv -inf, masked the fill value; a masked key is not -inf, so
    // this path cannot share the plain one's -inf trick).
#pragma unroll
    for (int j = 0; j < kSN; ++j) {
      const uint32_t f2 = *reinterpret_cast<const uint16_t*>(flags + s * kBN + j * 8 + 2 * t4);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int col = k0 + j * 8 + 2 * t4 + (c & 1);
        const int row = row0 + 8 * (c >> 1);
        float v = sacc[j * 4 + c] * p.scale;
        const uint32_t f = (f2 >> (8 * (c & 1))) & 0xffu;
        v = (f & 2u) ? -INFINITY : (f & 1u) ? p.fill : v;
        if (p.causal && col > row + causal_off) v = -INFINITY;
        sacc[j * 4 + c] = v;
        mx4[c >> 1][j & 3] = fmaxf(mx4[c >> 1][j & 3], v);
      }
    }
    mx[0] = reduce4(mx4[0], true);
    mx[1] = reduce4(mx4[1], true);
    float base_r[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) base_r[r] = merge_row_max(m[r], mx[r], 1.f, corr[r]);  // scores already scaled
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      const float e = ex2((sacc[i] - base_r[(i >> 1) & 1]) * kLog2e);
      sacc[i] = e;
      sum4[(i >> 1) & 1][(i >> 2) & 3] += e;
    }
    l[0] = l[0] * corr[0] + reduce4(sum4[0], false);
    l[1] = l[1] * corr[1] + reduce4(sum4[1], false);
  }
}
#endif  // FUSEOPT_HOPPER_DEVICE

}  // namespace fuseopt::cuda_fused::hopper
