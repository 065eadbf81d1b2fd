// Dead-code elimination: nodes none of whose outputs is read or is a graph
// output, then initializers nobody reads. ONNX ops have no side effects, so
// an unread node can always go. Graph inputs stay (they are the interface).
#include "pass/pass.h"

namespace fuseopt {
namespace {

class DeadCodeElimination : public Pass {
 public:
  std::string name() const override { return "dce"; }
  std::string description() const override { return "remove nodes whose outputs are unused, and unused initializers"; }

  int run(Rewriter& rw, PassContext&) override {
    // Consumers first, so a dead chain goes in one sweep.
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes()) order.push_back(n.get());
    int removed = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) removed += rw.erase_dead({*it});
    std::vector<Value*> unused;
    for (Value* v : rw.graph().initializers)
      if (v->uses.empty() && !v->is_graph_output) unused.push_back(v);
    for (Value* v : unused) rw.erase_constant(v);
    return removed + static_cast<int>(unused.size());
  }
};

}  // namespace
// Last of the cleanups: removes what the others left unread.
FUSEOPT_REGISTER_PASS(DeadCodeElimination, PassCategory::Cleanup, 900);
}  // namespace fuseopt
