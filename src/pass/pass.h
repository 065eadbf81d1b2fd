// Passes and fusion passes. A fusion is one file in passes/fusion/ and looks like this:
//
//   // passes/fusion/add_relu.cc
//   #include "pass/pass.h"
//   namespace fuseopt {
//   namespace {
//   namespace cap {  // the pattern's captures: a misspelt one does not compile
//   const ValueCapture a{"a"}, b{"b"};
//   const NodeCapture add{"add"}, relu{"relu"};
//   }  // namespace cap
//   class AddReluFusion : public FusionPass {
//    public:
//     std::string name() const override { return "AddRelu"; }
//     std::string description() const override { return "Relu(Add(a, b)) -> fuseopt.AddRelu"; }
//     Pattern pattern() const override {
//       return Op("Relu", Op("Add", cap::a, cap::b).commutative().as(cap::add)).as(cap::relu);
//     }
//     Status check(const Graph& g, const Match& m) const override {
//       // Rule 1 (interior values private) was already checked by the driver.
//       if (m.value(cap::a)->dtype != m.value(cap::b)->dtype)
//         return Status::reject("rule 5: ", m.node(cap::add)->label(), " mixes dtypes");
//       return Status::ok();
//     }
//     void rewrite(const Match& m, Rewriter& rw) const override {
//       Node* f = rw.create_node("fuseopt", "AddRelu", {m.value(cap::a), m.value(cap::b)});
//       rw.replace_match(m, f, name());
//     }
//   };
//   }  // namespace
//   // After FusedMatMul (300), which takes a GEMM's bias Add + Relu.
//   FUSEOPT_REGISTER_PASS(AddReluFusion, PassCategory::Fusion, 310);
//   }  // namespace fuseopt
//
// How a FusionPass runs (FusionPass::run): the graph's nodes are visited in
// REVERSE topological order (consumers first, so the longest chain ending at a
// node is tried before a shorter one starting below it); for each live node,
// match() (default: match_pattern(built_pattern(), node)); on a structural match the
// driver checks rule 1 with check_interior_private(m, kept_outputs(m)), then
// check(); a failure is recorded in the report as `rejected` with the reason
// (prefixed with the root node); success is `matched` and rewrite() runs.
// The pattern is built once per run() (built_pattern()), not once per node.
//
// Order: cleanup passes, then fusion passes, each category by the order key of its
// FUSEOPT_REGISTER_PASS (lower first; leave gaps). The key is set where the pass is
// defined, with a comment saying which passes it must follow or precede and why;
// `fuseopt --list-passes` prints the resulting order and tests/unit/pass_order_test.cc
// pins the relations the fusions rely on.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/pattern.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

class FusionReport;

enum class PassCategory { Cleanup = 0, Fusion = 1 };
const char* category_name(PassCategory c);  // "cleanup" / "fusion"

// User options passes may consult (from the CLI).
struct PassOptions {
  bool approximate_gelu = false;  // --approximate-gelu: erf GELU may become the tanh form
  int verbose = 0;                // -v: passes may log candidates at debug level
};

// What a pass gets besides the rewriter.
struct PassContext {
  const PassOptions& options;
  FusionReport& report;
};

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;  // unique, used by --passes/--disable
  virtual std::string description() const { return ""; }
  // One sweep over the graph; returns how many rewrites it made (0 = no change).
  virtual int run(Rewriter& rw, PassContext& ctx) = 0;
};

class FusionPass : public Pass {
 public:
  // The pattern tried at every node (the node is the root: the last node of the chain).
  // run() builds it once (built_pattern()) and reuses it for every node. Passes that
  // match by hand override match() instead and may leave this as is.
  virtual Pattern pattern() const { return Pattern(); }
  virtual MatchResult match(const Graph& g, Node* root) const { return match_pattern(built_pattern(), root); }
  // Values other than the root's outputs that the fused op will still produce
  // (exempt from rule 1), e.g. SkipLayerNorm's Sum when the residual goes on.
  virtual std::vector<const Value*> kept_outputs(const Match& m) const { return {}; }
  // Legality beyond rule 1: dtypes, constant weights, shapes, layouts, axes...
  // The reason should name the DESIGN rule and the node(s).
  virtual Status check(const Graph& g, const Match& m) const { return Status::ok(); }
  virtual void rewrite(const Match& m, Rewriter& rw) const = 0;
  // Name used in the report; one pass reports under one pattern name.
  virtual std::string pattern_name() const { return name(); }

  int run(Rewriter& rw, PassContext& ctx) override;  // the driver described above

 protected:
  const PassOptions& options() const { return *options_; }
  // pattern() as built at the start of this run() (or at the first use outside one).
  const Pattern& built_pattern() const;

 private:
  static const PassOptions kDefaultOptions;
  const PassOptions* options_ = &kDefaultOptions;  // set by run() from the context
  mutable std::optional<Pattern> pattern_;         // set by run(): pattern() may read options()
};

// ---- registry (self-registration: nothing central lists the passes) -----------------

struct PassInfo {
  std::string name;
  std::string description;
  PassCategory category;
  int order;  // lower first within its category
  std::function<std::unique_ptr<Pass>()> make;
};

void register_pass(PassInfo info);
// Every registered pass: cleanup before fusion, then by order, then by name.
std::vector<const PassInfo*> registered_passes();
const PassInfo* find_pass(const std::string& name);

struct PassRegistrar {
  PassRegistrar(std::function<std::unique_ptr<Pass>()> make, PassCategory category, int order);
};

#define FUSEOPT_PASS_CAT2(a, b) a##b
#define FUSEOPT_PASS_CAT(a, b) FUSEOPT_PASS_CAT2(a, b)
// FUSEOPT_REGISTER_PASS(ClassName, PassCategory::Fusion, 400); at namespace scope
// (inside namespace fuseopt or with qualified names). The class must be default-constructible.
#define FUSEOPT_REGISTER_PASS(CLASS, CATEGORY, ORDER)                                       \
  static ::fuseopt::PassRegistrar FUSEOPT_PASS_CAT(fuseopt_pass_registrar_, __LINE__)(      \
      [] { return std::unique_ptr<::fuseopt::Pass>(new CLASS()); }, CATEGORY, ORDER)

}  // namespace fuseopt
