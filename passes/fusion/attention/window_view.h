// Attention fusion: Swin's shifted-window mask. The scores of all windows, [B'·nW, H, S, S], are
// viewed [B', nW, H, S, S] so that the mask [1, nW, 1, S, S] (window w's key/query regions) adds
// per window, then viewed back (HF Swin and SwinV2 at every stage whose resolution exceeds the
// window, both exporters). The fused op's attn_bias broadcasts to [B'·nW, H, S, S], so such a term
// is tiled over B' outside the op: Tile(term viewed [nW, h, S, S], [B' , 1, 1, 1]) with
// B' = B / nW from the query input: element b·... of the tile is window b mod nW, as in the
// row-major view (b = b'·nW + w).
#pragma once
#include <cstdint>
#include <optional>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt::attn {

// The two Reshapes of the window view, one the mirror image of the other.
enum class WindowReshape {
  Split,  // [X, H, S, S] -> [X / nW, nW, H, S, S] (dims 1..3 kept)
  Merge,  // [A, nW, H, S, S] -> [A·nW, H, S, S] (dims 2..4 kept)
};

// nW when `n` is that Reshape in direction `dir` (the 5-D side's dim 1 known); nullopt otherwise.
std::optional<int64_t> window_reshape(const Node* n, WindowReshape dir);

// A term tile_window_term() takes.
bool window_term_ok(const Value* term, int64_t windows);

// The term added on the [B', nW, H, S, S] view (known dims [1, nW | 1, H | 1, S_q | 1, S_kv | 1],
// right-aligned) as a [B, h, S_q, S_kv] bias for B = B'·nW rows of `query` (its dim 0);
// nullptr when its dims are not of that form.
Value* tile_window_term(Rewriter& rw, Value* term, int64_t windows, Value* query);

}  // namespace fuseopt::attn
