// Fusion inside If branches. Optimum's merged decoders (decoder_model_merged.onnx: the
// first step and the cached steps in one file) are a single If on a `use_cache_branch`
// input whose two branches hold the whole decoder; without this, nothing in them fuses.
//
// Each branch of each If is loaded as a Graph (load_subgraph), the outer-scope constants
// it reads become its constants (shared, not copied, so the weight checks of the fusions
// hold), the other outer values it reads become typed inputs, and the same passes run on
// it (nested Ifs in turn). Written back, the branch reads the outer values by name again;
// constants a fusion made (packed weights, rotary caches) move to the outer graph, once
// when both branches made the same bytes under the same name; values the branch defines
// are renamed where they would shadow an outer name (ONNX's SSA rule across scopes). The
// FunctionProtos of its fuseopt ops join the model's. A branch whose passes fail is left as
// it was, with a warning naming it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "pass/fusion_report.h"

namespace fuseopt {

struct PassManagerOptions;

// Runs `opts`'s passes in every If branch of g; returns each branch's report with where
// it is ("If 'name' then_branch"). Outer constants no longer read are removed.
std::vector<std::pair<std::string, FusionReport>> fuse_if_branches(Graph& g, const PassManagerOptions& opts);

}  // namespace fuseopt
