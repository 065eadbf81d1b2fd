// Identity elimination: Identity, inference-mode Dropout (no training_mode,
// or a constant false one; its mask output unread), a Cast to the dtype the
// value already has and a Concat of one input (the TorchScript KV-cache exports
// leave `Concat(past_key)` in front of the fused attention, which would hide the
// past input from a held KV cache) are rewired away.
// An Identity whose output is a graph output stays when its input is a graph
// input, an initializer or another graph output: removing it would rename or
// duplicate a model output that users bind by name.
#include "pass/pass.h"

namespace fuseopt {
namespace {

bool dropout_is_inference(const Node& n, int64_t opset) {
  // Before opset 7 Dropout had is_test, default 0: training unless is_test=1.
  if (opset < 7 && n.attr_int("is_test", 0) == 0) return false;
  const Value* training = n.input(2);
  if (training) {
    if (!training->is_const() || training->const_data->numel() != 1) return false;
    if (training->const_data->as_int(0) != 0) return false;
  }
  const Value* mask = n.output(1);
  return !mask || (mask->uses.empty() && !mask->is_graph_output);
}

bool is_passthrough(const Node& n, int64_t opset) {
  if (!(n.domain.empty() || n.domain == "ai.onnx") || n.outputs.empty() || !n.input(0) || !n.outputs[0]) return false;
  if (n.op_type == "Identity") return n.inputs.size() == 1;
  if (n.op_type == "Concat") return n.inputs.size() == 1;  // one piece: itself, whatever the axis
  if (n.op_type == "Dropout") return dropout_is_inference(n, opset);
  if (n.op_type == "Cast") {
    const Value* in = n.input(0);
    return in->dtype != DType::Undefined && n.attr_int("to", 0) == static_cast<int64_t>(in->dtype) &&
           n.outputs[0]->dtype == in->dtype;
  }
  return false;
}

class IdentityElimination : public Pass {
 public:
  std::string name() const override { return "identity_elim"; }
  std::string description() const override {
    return "remove Identity, inference-mode Dropout, no-op Cast and one-input Concat nodes";
  }

  int run(Rewriter& rw, PassContext&) override {
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes()) order.push_back(n.get());
    int removed = 0;
    for (Node* n : order) {
      if (!rw.alive(n) || !is_passthrough(*n, rw.opset())) continue;
      Value* in = n->inputs[0];
      Value* out = n->outputs[0];
      // Keeps model outputs' names and subgraphs' references by name intact.
      if (!rw.can_replace_all_uses(out, in)) continue;
      rw.replace_all_uses(out, in);
      if (rw.erase_dead({n}) > 0) ++removed;
    }
    return removed;
  }
};

}  // namespace
// After if_fold (150), which can leave the Identity of a pass-through branch;
// before cse (300), so that chains differing only by an Identity compare equal.
FUSEOPT_REGISTER_PASS(IdentityElimination, PassCategory::Cleanup, 200);
}  // namespace fuseopt
