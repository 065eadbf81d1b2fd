// Raising a graph's default-domain opset (for --emit standard, whose ops need 17 or 23).
// Most ops only gained types between 12 and 23; the ones whose attributes or inputs
// changed in an incompatible way are rewritten here, one function per change
// (opset_upgrade.cc). An op that cannot be rewritten exactly (a Softmax-13 axis
// change, non-constant GroupNormalization scales, a deprecated op, a subgraph that
// holds a changed op) makes the upgrade refuse with one line naming the node and op.
#pragma once
#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

// The lowest model opset the upgrader starts from.
constexpr int64_t kMinUpgradableOpset = 12;

// "" when every default-domain node of `g` can be upgraded exactly from the graph's
// opset to `target`, else one line: "<op> '<node>': <why> (opset A -> B)".
std::string opset_upgrade_blocker(const Graph& g, int64_t target);

// Rewrites the nodes that need it and sets the default-domain opset import to `target`.
// Throws Error with opset_upgrade_blocker's line when it is not "". Returns the number
// of nodes changed.
int upgrade_opset(Graph& g, Rewriter& rw, int64_t target);

}  // namespace fuseopt
