// Add -> Relu  =>  fuseopt.AddRelu (the residual block ending of ResNets).
#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture a{"a"}, b{"b"};
const NodeCapture add{"add"}, relu{"relu"};
}  // namespace cap

class AddReluFusion : public FusionPass {
 public:
  std::string name() const override { return "AddRelu"; }
  std::string description() const override { return "Relu(Add(a, b)) -> fuseopt.AddRelu"; }
  Pattern pattern() const override { return Op("Relu", Op("Add", cap::a, cap::b).as(cap::add)).as(cap::relu); }
  Status check(const Graph&, const Match& m) const override {
    // Rule 1 (the Add's sum read elsewhere, the in-place hazard) is the driver's.
    return fusion::same_float_dtype({m.value(cap::a), m.value(cap::b)}, m.node(cap::add));
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* f = rw.create_node("fuseopt", "AddRelu", {m.value(cap::a), m.value(cap::b)}, {}, 1,
                             m.node(cap::relu)->name);
    rw.replace_match(m, f, name());
  }
};

}  // namespace
// After FusedMatMul (300), which takes a GEMM's bias Add + Relu: AddRelu gets the
// residual Add + Relu left over.
FUSEOPT_REGISTER_PASS(AddReluFusion, PassCategory::Fusion, 310);
}  // namespace fuseopt
