// Attention fusion, part 2: what a mask term of the scores chain provably is.
// A key-padding mask [B, S_kv] becomes the op's `mask` input, a causal term
// becomes causal=1; anything else stays an attn_bias term.
#pragma once
#include <optional>
#include <utility>

#include "ir/graph.h"
#include "passes/fusion/attention/head_paths.h"

namespace fuseopt::attn {

// One operation of the scores chain that masks: Add(s, v), or Where(v, s, fill) /
// Where(v, fill, s) (inverted).
struct MaskTerm {
  Value* v;
  bool where;
  bool inverted;
  double fill;
  bool flat = false;  // added to the [B·H, S, S_kv] view: lifted to [B, H, ...] by a Reshape
  // Constant factor the scores are multiplied by after an additive term (the mask added
  // before the scale, (s + v)·c = s·c + v·c): the op's bias is v·factor. A Where term's
  // fill is scaled instead (Where(k, s, f)·c = Where(k, s·c, f·c)), so its factor stays 1.
  double factor = 1.0;
  // Subtracted (s - v, Funnel's `score - INF·(1 - mask)`): factor carries the sign and no mask
  // proof applies (a proven fill would change sign).
  bool negated = false;
  // Added on Swin's [B', nW, H, S, S] view of the [B'·nW, H, S, S] scores (the shifted-window
  // mask [1, nW, 1, S, S]): nW; the rewrite tiles it to [B'·nW, ·, S, S]. No proofs apply.
  int64_t batch_windows = 0;
  bool no_proofs() const { return negated || batch_windows != 0; }
};

// ---- key-padding mask proofs ---------------------------------------------------
// Peels Casts to bool (Cast(x, BOOL) keeps exactly "x != 0", the mask input's meaning).
Value* peel_bool_casts(Value* v);
// v = M[:, None, None, :] for a rank-2 M (Unsqueeze [1,2], or [1] then [2]); returns M.
Value* from_rank2(Value* v);
// The [B, S_kv] keep-mask an additive term provably encodes, with its fill (<= -1e30).
struct AdditivePadding {
  Value* mask;
  double fill;
  // The term keeps a key where the mask equals 1 (not where it is nonzero): transformers 4's
  // _prepare_4d_attention_mask, Where(bool(inv), fill, inv) with inv = 1 - float(M). The op's
  // `mask` is then Equal(M, 1) (M integer; a bool M is passed as is).
  bool keep_is_one = false;
};
std::optional<AdditivePadding> additive_key_padding(Value* t);
// The mask's dims are provably [B, S_kv] of the keys.
bool mask_dims_match(const Value* m, const HeadPath& k);

// torch's key_padding_mask bias (F.multi_head_attention_forward): Where(kpm, fill, 0) (or
// Where(keep, 0, fill)) of a bool [B, S] mask, viewed [B, 1, 1, S], expanded over `heads`
// heads and reshaped [B·heads, 1, S] (and back to [B, heads, 1, S]): at every (b, h, i, j) it
// is fill where kpm[b, j] (inverted) and 0 elsewhere, fill <= -1e30.
struct BroadcastPadding {
  Value* mask;    // [B, S] bool
  bool inverted;  // true: the mask marks the keys to ignore (keep = Not(mask))
  double fill;
};
std::optional<BroadcastPadding> broadcast_key_padding(Value* t, int64_t heads);

// ---- causal mask proofs ----------------------------------------------------------
// Trilu(ConstantOfShape([S, S] or [1, 1, S, S], fill <= -1e30), k=1, upper=1).
bool is_causal_trilu(const MaskTerm& t, const HeadPath& q);
// torch SDPA is_causal: Where(Trilu(ones [S, S], upper=0) == 0, fill <= -1e30, 0), S the query length.
bool is_causal_tril_where(const MaskTerm& t, const HeadPath& q);
// Where(tril buffer[..., :S, :S], s, fill) / Where(buffer == 0, fill, s); with a KV cache
// the rows [S_kv - S_q, S_kv) and columns [0, S_kv) of the buffer.
bool is_causal_buffer(const MaskTerm& t, const HeadPath& q, const HeadPath& k);

}  // namespace fuseopt::attn
