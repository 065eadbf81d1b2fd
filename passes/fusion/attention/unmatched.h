// Attention fusion: a diagnostic for Softmax nodes no candidate reached (see unmatched.cc).
#pragma once
#include <string>

#include "ir/graph.h"

namespace fuseopt::attn {

// For a Softmax left in the graph that no candidate root's walk reached: "" when it does not
// look like attention (its scores are not a product of two computed operands: a MoE router,
// a classifier), else why no candidate reached it, naming what reads P and what follows P·V.
std::string describe_unmatched_softmax(const Node* sm);

}  // namespace fuseopt::attn
