// Runs the registered passes: every enabled cleanup pass, then every enabled
// fusion pass (each in order-key order), repeated until one whole iteration
// changes nothing or the iteration cap is reached. After each pass that
// changed something the graph is topo-sorted and verified, so a pass that
// breaks the graph is caught right there, named in the error.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pass/fusion_report.h"
#include "pass/pass.h"

namespace fuseopt {

struct PassManagerOptions {
  // Empty = every registered pass. The names "cleanup" and "fusion" stand for
  // every pass of that category; "none" (alone) runs nothing.
  std::vector<std::string> only;
  std::vector<std::string> disabled;
  int max_iterations = 10;
  bool verify_each = true;
  // Before the first pass: strict shape inference over the model as loaded,
  // so a contradiction ONNX's checker would refuse too (an inferred rank,
  // dim or dtype against a declared one, an axis out of range, MatMul dims
  // that cannot meet) is an Error naming the node, not an optimized model
  // that is as invalid. Off with --no-validate.
  bool check_shapes = true;
  PassOptions pass_options;
};

class PassManager {
 public:
  // Throws Error naming an unknown pass in only/disabled.
  explicit PassManager(PassManagerOptions opts);
  // The passes that will run, in order.
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }
  // Optimizes g in place; fills report (begin/end included). Returns the
  // rewriter's record of fused nodes (for --dot).
  std::map<std::string, FusedOrigin> run(Graph& g, FusionReport& report);

 private:
  PassManagerOptions opts_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<PassCategory> categories_;
};

// Splits "a,b , c" into names (empty items dropped).
std::vector<std::string> split_pass_list(const std::string& list);

}  // namespace fuseopt
