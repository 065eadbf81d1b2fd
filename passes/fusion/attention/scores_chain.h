// Attention fusion, part of the analysis (plan.h): the scores-chain walk. From the Softmax's
// input back to the Q·Kᵀ MatMul, node by node: scale factors (scalar and per head), the mask
// terms added, subtracted or applied by a Where (in forward order, each with the factor it is
// scaled by), the fp16/bf16 up-cast before the Softmax, Gemma-2's logit soft-capping, the
// scores clamp, and the [B·H, S, S_kv] and Swin [B', nW, H, S, S] views on the way; each such
// node joins plan.core. In its own file because it is a job of its own (the per-op rules of the
// scores chain), apart from the walks over the output and P·V, the Q/K/V head paths, the mask
// proofs and the head counts that analyze() (plan.cc) does around it.
#pragma once
#include <string>

#include "passes/fusion/attention/plan.h"

namespace fuseopt::attn {

// What the rest of analyze() needs from the walk besides the Plan.
struct ScoresChain {
  bool flat = false;           // the scores (Q·Kᵀ included) are on [B·H, S, S_kv] views
  Node* tanh = nullptr;        // the soft-capping Tanh, if any
  double softcap_outer = 1.0;  // the factor outside the Tanh: a in a·tanh(b·QKᵀ)
};

// Needs pl.softmax and pl.pv; sets pl.qk and the scores chain's part of the Plan (core, scale,
// add_bias, terms, keep / fill, up_cast, head_scale, clamp; legality problems go to pl.fail).
// "" on success, else the structural reason (`chain` is then left as it was).
std::string walk_scores_chain(Plan& pl, ScoresChain& chain);

}  // namespace fuseopt::attn
