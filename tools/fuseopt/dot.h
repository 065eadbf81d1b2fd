// Graphviz DOT of an optimized graph: one box per node, fused nodes filled
// with a colour per pattern and labelled with the ops they replaced.
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

// `origins`: fused node name -> pattern and replaced ops (from the run). Nodes
// of an already-fused input model are recognised by their doc_string.
std::string graph_to_dot(const Graph& g, const std::map<std::string, FusedOrigin>& origins);

}  // namespace fuseopt
