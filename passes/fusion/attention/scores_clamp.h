// Attention fusion: the scores clamp Max(scores, lowest) some exporters' models apply between
// the mask and the Softmax (XGLM, older OPT: torch.max(w, finfo(dtype).min), a guard against
// -inf). For every finite score it is the identity; it only turns -inf into `lowest`.
//
// The fused op takes it when every mask term was proven (a key-padding `mask`, `causal`, a
// window; no `attn_bias` or bool condition left): a masked score is the fill f, which the clamp
// makes max(f, lowest), so the op's fill becomes that (a -inf fill turns finite: a fully masked
// row is uniform, as in the clamped original). Causal exclusions stay -inf in the op where the
// original has `lowest`: the two differ only on a query row whose every visible key is also
// padded (left padding), the limit docs/fused_ops.md already states for finfo.min masks.
// With an unproven bias left the clamp is refused: the op cannot clamp inside its softmax.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "ir/graph.h"

namespace fuseopt::attn {

struct Plan;

// Max(x, c) or Max(c, x) with c a constant scalar that is at most -1e30 or the lowest finite
// value of x's dtype (float16 -65504): returns (c, x).
std::optional<std::pair<double, Value*>> lowest_clamp(const Node* n);

// Settles a clamp seen in the scores chain once the mask proofs are done: "" when the plan can
// take it (the fill raised to the clamp), else the rule text.
std::string settle_clamp(Plan& pl);

}  // namespace fuseopt::attn
