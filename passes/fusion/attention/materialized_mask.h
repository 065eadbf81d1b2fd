// Attention fusion: masks the exporter materialised as a boolean [B, 1, S_q, S_kv]
// tensor (transformers 5's masking_utils, through torch.export's vmap or
// TorchScript's index arithmetic), proven term by term:
//
//   keep = And(ones, LessOrEqual(kv_idx, q_idx), padding[b, kv], ...)
//   scores + Where(keep, 0, finfo.min)        or   Where(keep, scores, fill)
//
// Each And-leaf must be one of
//   - all true (a True constant / ConstantOfShape(True) / an Expand of one, or a
//     comparison an index always passes such as kv_idx >= 0): drops out;
//   - causal: kv_idx <= q_idx (or q_idx >= kv_idx) where, over the term's
//     coordinates [.., i, j], kv_idx = j (a Range(0, S_kv) on the last axis) and
//     q_idx = i + S_kv - S_q (a Range on the query axis of length S_q): causal=1,
//     bottom-right aligned as docs/fused_ops.md defines it;
//   - sliding window: kv_idx > q_idx - W (or kv_idx >= q_idx - W + 1) with the same indices
//     and W a constant >= 1: window=W (key j hidden from query i when i + S_kv - S_q - j >= W);
//   - key padding: M[b, j] for a rank-2 M of the keys' [B, S_kv] (GatherND of M at
//     the index grid (b, j), a Gather of Flatten(M) at b·S_kv + j, or M[:, None, None, :]
//     through Unsqueeze / Expand / a Slice of the whole key axis): the op's `mask`.
// Expand and And only broadcast, so the leaves' values decide the result.
// Static-shape exports (constants folded): a constant causal leaf is accepted when it is,
// element by element, kv <= q + S_kv - S_q over [1 or B, 1, S_q, S_kv] / [S_q, S_kv] (nonzero =
// keep; a whole float additive term: 0 = keep, one fill <= -1e30 elsewhere), and a padding
// gather whose index grid is a constant when it is exactly (b, j) / b*S_kv + j over [B, .., S_kv].
#pragma once
#include <optional>
#include <string>

#include "ir/graph.h"
#include "passes/fusion/attention/head_paths.h"
#include "passes/fusion/attention/mask_proofs.h"

namespace fuseopt::attn {

struct KeepProof {
  bool causal = false;      // a causal leaf was proven
  int64_t window = 0;       // a sliding-window leaf was proven: keys at q_pos - j >= window are hidden
  Value* padding = nullptr; // the [B, S_kv] key-padding mask (nonzero = keep), if a leaf is one
  double fill = 0.0;        // what the original graph gives masked scores (<= -1e30, or -65504 added in float16)
  // Set when `padding`'s dims are not provably [B, S_kv] but a GatherND at the proven (b, j)
  // grid reads it: the scalar limits (B, S_kv) of the grid's Ranges; the op reads
  // padding[:B, :S_kv] (the rewrite slices it).
  Value* slice_ends[2] = {nullptr, nullptr};
};

// Proves the mask term `t` (an additive Where(keep, 0, fill) or a keep Where on the
// scores) is exactly causal and/or key padding. On failure returns nullopt and
// says why in `why` (for -v logs and tests).
// v through Slices that keep the whole key axis (transformers 4's attention_mask[..., :key_len]:
// [0, S_kv) or [0, INT_MAX) of the last axis), or v itself.
Value* peel_key_prefix_slices(Value* v, const HeadPath& q, const HeadPath& k);

std::optional<KeepProof> prove_materialized_mask(const MaskTerm& t, const HeadPath& q, const HeadPath& k,
                                                 std::string* why = nullptr);

}  // namespace fuseopt::attn
