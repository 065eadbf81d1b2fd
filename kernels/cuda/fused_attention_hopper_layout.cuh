// The Hopper attention kernel's types: launch parameters, the shared-memory layout, the register
// split, a work item and the ring's barrier addresses. Shared by the kernel
// (fused_attention_hopper_kernel.cuh), its producer warpgroup (_producer.cuh) and its per-tile
// softmax (_softmax.cuh); the host side (fused_attention_hopper.cu) fills HopperParams and sizes
// the launch from Layout.
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"

namespace fuseopt::cuda_fused::hopper {

constexpr float kLog2e = 1.4426950408889634f;

struct HopperParams {
  int H, Hkv, Sq, Skv;
  float scale, scale_log2, fill;
  int causal;
  int pingpong;  // the two consumer warpgroups take turns issuing their MMAs
  int rows_zero;  // masked_rows_zero: a row with no score above -inf writes 0, not NaN
  int n_items;   // query tiles x heads x batch
  int heaviest_first;  // items ordered by query tile over all heads (causal)
  int snake;           // persistent causal: every other round of items in reverse block order
  int tma_store;       // where Layout::kTmaStore: O through shared memory and a TMA store (else 4-byte stores)
  const void* mask;
  DType mask_dtype;
  // MASKED only, or null: [B] key counts of the batches whose mask is a prefix of kept keys, -1
  // for the others (AttentionArgs::mask_prefix). Such a batch's items run the unmasked path over
  // their first n keys (no key flags); the others take the flags.
  const int* kv_prefix;
  const float* sinks;  // [H] fp32 sink logits (GPT-OSS) or null
  void* y;
};

// Shared-memory layout (bytes from a 1024-aligned base): every operand tile
// is a set of 64-column panels of [rows][128 B], the TMA 128-byte swizzle.
// NC consumer warpgroups of 64 query rows each: 2 (128-row blocks, one
// block per SM), 3 (192-row blocks, head dim 64: less K/V traffic per query
// row, three warpgroups to interleave) or 1 (64-row blocks, two blocks per
// SM). QB query buffers: with 2 the next work item's Q loads during this one.
// BN keys per K/V tile: 128, or 176 at head dim 128 without a mask (fewer tiles a row, so
// less of the per-tile cost — row maxima, barriers, O's rescale — per key; FlashAttention-3's
// 128 x 176 block; two stages of it and one Q buffer fill 208 KB). A tile's 128-byte rows
// group into 1024-byte swizzle atoms of 8 rows, so BN is a multiple of 8.
template <int D, int BN, int STAGES, int NC, int QB>
struct Layout {
  static_assert(BN % 8 == 0 && BN <= 256, "a K/V tile is whole 8-row swizzle atoms, at most a TMA box");
  static constexpr int kBN = BN;
  static constexpr int kBM = 64 * NC;  // query rows per block
  static constexpr int kThreads = 128 * (NC + 1);
  static constexpr int kPanels = D / 64;
  static constexpr int kQBytes = kPanels * kBM * 128;
  static constexpr int kStageBytes = kPanels * kBN * 128;  // K or V of one stage
  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kOffQ + QB * kQBytes;
  static constexpr int kOffV = kOffK + STAGES * kStageBytes;
  // O's staging buffer (the TMA-store epilogue, kTmaStore below): [kBM rows][128 B] a 64-column
  // panel, each consumer warpgroup its 64 rows. Head dim 64 has room; head dim 128 only with
  // 160-key tiles (2 x 80 KB of K/V + Q 32 + O 32 = 224 KB): the 128- and 176-key rings fill it.
  static constexpr bool kTmaStore = D == 64 || BN == 160;
  static constexpr int kOffOut = kOffV + STAGES * kStageBytes;
  static constexpr int kOutBytes = kTmaStore ? kPanels * kBM * 128 : 0;
  static constexpr int kOffFlags = kOffOut + kOutBytes;  // STAGES x kBN bytes
  static constexpr int kOffAny = kOffFlags + STAGES * kBN;        // STAGES ints
  static constexpr int kOffBar = (kOffAny + STAGES * 4 + 7) / 8 * 8;
  static constexpr int kBytes = kOffBar + (2 * QB + 4 * STAGES) * 8;
  static constexpr int kAlloc = kBytes + 1024;  // slack to align the base
};

// MASKED: a key-padding mask is given. Without one the producer writes no key flags (its warp's
// lane 0 alone issues the copies, in few registers: the 192-row kernel's producer at 24 spilled
// with the flag code) and the consumers find the keys past S_kv from the tile's position.
// Blocks per SM: two 64-row blocks (NC = 1), else one. (Three 64-row blocks an SM do not
// compile: the launch bound's 80 registers a thread are below what one m64n128 wgmma needs,
// whatever setmaxnreg gives the consumers; NOTES-perf.md v36.)
constexpr int blocks_per_sm(int nc) { return nc == 1 ? 2 : 1; }

// Registers a thread after setmaxnreg: the producer warpgroup's and each consumer's
// (blocks_per_sm x 128 x (producer + NC x consumer) <= 64K). The 176-key tile's consumers hold
// S (88) and P (44) at once besides O (64, head dim 128): they take the 240 that the unmasked
// producer's 24 leave. (176 keys with 64-row blocks at head dim 64, 40 / 216, compiled without
// spills but was no faster than 128 anywhere: NOTES-perf.md v37.)
template <int NC, int BN, bool MASKED>
struct Regs {
  static constexpr bool kWide = NC == 2 && BN > 128 && !MASKED;
  static constexpr int kProducer = NC == 1 ? 56 : NC == 3 || kWide ? 24 : 40;
  static constexpr int kConsumer = NC == 1 ? 200 : NC == 3 ? 160 : kWide ? 240 : 232;
  static_assert(blocks_per_sm(NC) * 128 * (kProducer + NC * kConsumer) <= 65536, "over the SM's registers");
};

// A work item: query rows [q0, q0 + kBM) of head h (K/V head hk) in batch b, n_tiles key tiles of
// them. Keys from kv_len on are -inf, found from a tile's position (kv_len: S_kv, or the batch's
// prefix on the varlen path); flagged: the item's keys carry the producer's key flags instead
// (MASKED, a batch whose mask is not a prefix).
struct Item {
  int q0, h, b, hk, n_tiles, kv_len;
  bool flagged;
};

// The block's mbarriers, 8 bytes each from `bar`: each Q buffer's full and empty, each ring stage's
// K full, V full, K empty and V empty.
template <int QB, int STAGES>
struct Barriers {
  uint32_t bar;
  __device__ __forceinline__ uint32_t q_full(int qb) const { return bar + 8u * qb; }
  __device__ __forceinline__ uint32_t q_empty(int qb) const { return bar + 8u * (QB + qb); }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bar + 8u * (2 * QB + s); }
  __device__ __forceinline__ uint32_t v_full(int s) const { return bar + 8u * (2 * QB + STAGES + s); }
  // K and V of a stage are released separately: K once the tile's scores
  // (and its key flags) are consumed, V once its P·V is done, so the next
  // K load starts about an iteration before V's.
  __device__ __forceinline__ uint32_t k_empty(int s) const { return bar + 8u * (2 * QB + 2 * STAGES + s); }
  __device__ __forceinline__ uint32_t v_empty(int s) const { return bar + 8u * (2 * QB + 3 * STAGES + s); }
};

}  // namespace fuseopt::cuda_fused::hopper
