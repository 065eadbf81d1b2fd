// Attention fusion: a per-head factor on the scores, Q·Kᵀ ⊙ c[h] (SwinV2's cosine attention:
// normalize(q)·normalize(k)ᵀ · exp(clamp(logit_scale)) with a [H, 1, 1] parameter that constant
// folding makes a constant). The op's scale is one scalar, so the factor moves onto Q:
// (c_h·q)·k = c_h·(q·k) per head (one rounding of q·c_h instead of (q·k)·c_h). Taken only
// directly on the Q·Kᵀ MatMul output (a mask term added before it would need scaling per head),
// on 4-D scores, with Q a separate input (not packed with K and V) of the factor's dtype.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt::attn {

struct Plan;

// Mul(x, c) (either order) with x a MatMul's output and c a constant float of dims [H, 1, 1]
// or [1, H, 1, 1]: returns (c, x).
std::optional<std::pair<Value*, Value*>> per_head_factor(const Node* n);

// "" when the plan can take its per-head factor, else the rule text.
std::string check_head_scale(const Plan& pl);

// Q [B, S, H·D] times the factor repeated over each head's D channels.
Value* apply_head_scale(Rewriter& rw, const Plan& pl, Value* q);

}  // namespace fuseopt::attn
