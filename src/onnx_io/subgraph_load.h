// Control-flow bodies (If branches) as runnable Graphs. The IR keeps a body as
// a serialized AttributeProto (Attribute::opaque); this turns it into a Graph
// whose inputs are the body's own inputs followed by every outer-scope name
// the body reads, so a nested Session can run it with those values as feeds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fuseopt {

struct LoadedSubgraph {
  std::unique_ptr<Graph> graph;
  std::vector<std::string> outer_refs;  // graph inputs that name outer-scope values
};

// The outer-scope names a graph attribute's body (and the bodies nested in it) reads, in
// first-read order; empty for any other attribute.
std::vector<std::string> subgraph_outer_reads(const Attribute& attr);

// Every name a graph attribute's body (and the bodies nested in it) defines: inputs,
// initializers and node outputs.
std::vector<std::string> subgraph_defined_names(const Attribute& attr);

// Whether a graph attribute's body (or one nested in it) has a node of `domain`.
bool subgraph_has_domain(const Attribute& attr, const std::string& domain);

// After n's bodies were rewritten: n's implicit inputs become the outer values its bodies read
// now, found by name in g; throws Error (naming n, prefixed by `who`) for a name g does not define.
void rebind_outer_reads(Graph& g, Node* n, const std::string& who);

// `attr` must be a graph attribute; throws Error naming `label` otherwise.
LoadedSubgraph load_subgraph(const Attribute& attr, const Graph& outer, const std::string& label);

}  // namespace fuseopt
