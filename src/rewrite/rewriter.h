// The Rewriter: the ONLY way passes change a graph (MLIR's PatternRewriter).
// It wraps Graph's primitives, keeps the opset imports right for new domains,
// remembers what it did (counts for the report, which ops each fused node
// replaced for --dot), and tracks which nodes are alive so a pass driver can
// skip nodes erased earlier in the same sweep.
//
// Typical end of a fusion rewrite:
//   Node* f = rw.create_node("fuseopt", "AddRelu", {m.value("x"), m.value("y")});
//   rw.replace_match(m, f, "AddRelu");   // f takes over the root's outputs, matched nodes go
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "rewrite/pattern.h"

namespace fuseopt {

// What happened to a graph: summed per pass run by the PassManager.
struct ChangeCounts {
  int nodes_created = 0;
  int nodes_erased = 0;
  int constants_added = 0;
  int constants_removed = 0;
  int uses_replaced = 0;  // replace_all_uses calls that moved at least one use/output
  int attrs_changed = 0;
  int inputs_changed = 0;
  int total() const {
    return nodes_created + nodes_erased + constants_added + constants_removed + uses_replaced + attrs_changed +
           inputs_changed;
  }
  ChangeCounts& operator+=(const ChangeCounts& o);
};

// For --dot: the pattern that produced a fused node and the original ops it replaced.
struct FusedOrigin {
  std::string pattern;
  std::vector<std::string> replaced_ops;  // op types, flattened through earlier fusions
};

class Rewriter {
 public:
  explicit Rewriter(Graph& g);

  // Read access. Passes must not mutate through these pointers: use the methods below.
  const Graph& graph() const { return g_; }
  int64_t opset(const std::string& domain = "") const { return g_.opset(domain); }

  // ---- creating ------------------------------------------------------------------
  // Where new nodes go: before this node (nullptr = at the end). Fusion drivers set
  // it to the match root, which is always a topologically valid place for a node
  // reading the match's inputs; erasing that node resets it to the end. Node
  // order inside a pass is not relied on: the PassManager topo-sorts after
  // every pass and infer_shapes() sorts before inferring.
  void set_insertion_point(Node* before) { insert_before_ = before; }
  Node* insertion_point() const { return insert_before_; }

  // A node with `num_outputs` fresh output values (named after the node). A
  // domain not yet imported is added to the opset imports (version 1 for
  // "fuseopt"/custom domains). Omitted optional inputs are nullptr.
  Node* create_node(const std::string& domain, const std::string& op, const std::vector<Value*>& inputs,
                    std::vector<Attribute> attrs = {}, int num_outputs = 1, const std::string& name_hint = "");
  // A new initializer (name derived from hint, made unique).
  Value* add_constant(const std::string& hint, Tensor t);
  Value* add_scalar(const std::string& hint, DType dt, double v);      // rank-0
  Value* add_int64s(const std::string& hint, const std::vector<int64_t>& v);  // 1-D int64

  // ---- changing ------------------------------------------------------------------
  // Every use of `from` (and its graph-output slot) reads `to` instead. When
  // `from` is a graph output its name moves to `to` where possible.
  // Subgraphs (If/Loop/Scan bodies) read outer values BY NAME: when `from` is
  // read by one, `to` takes over its name, which needs a plain node output
  // (see can_replace_all_uses); anything else is an internal error.
  void replace_all_uses(Value* from, Value* to);
  // False when replacing would rename a model output or break a subgraph's
  // reference by name: `from` is a graph output or read by a subgraph, and
  // `to` cannot take over its name (a graph input, a constant, already a graph
  // output, or read by a subgraph itself).
  bool can_replace_all_uses(const Value* from, const Value* to) const;
  void set_input(Node* n, size_t slot, Value* v);
  void set_attr(Node* n, Attribute a);
  void remove_attr(Node* n, const std::string& name);
  // Type information for a value a pass created (or refined).
  void set_type(Value* v, DType dt, std::optional<Shape> shape);
  // Replace a node's output by constant data, keeping the value's NAME (it may be
  // a graph output): the value becomes an initializer, the producer loses it.
  // The producer is erased when none of its outputs are used any more.
  Value* replace_with_constant(Value* v, Tensor t);

  // ---- erasing -------------------------------------------------------------------
  // Erases a node whose outputs have no uses and are not graph outputs.
  void erase_node(Node* n);
  // Erases every node of `nodes` that is dead (outputs unused, not graph outputs),
  // repeating until nothing more goes; returns how many were erased.
  int erase_dead(const std::vector<Node*>& nodes);
  // Removes an initializer nobody reads (DCE).
  void erase_constant(Value* v);

  // ---- the usual fusion ending -----------------------------------------------------
  // `fused` takes over the match: by default root output i -> fused output i
  // (dtype/shape copied to the new value when it has none); `outputs` gives an
  // explicit old -> new mapping instead (e.g. {{y, f->output(0)}, {sum, f->output(1)}}).
  // Then the matched nodes are erased (erase_dead) and `fused` is labelled with
  // `pattern` and the ops it replaced (for the report and --dot).
  void replace_match(const Match& m, Node* fused, const std::string& pattern,
                     const std::vector<std::pair<Value*, Value*>>& outputs = {});
  // Labels a node by hand (when a pass builds several nodes for one match).
  void mark_fused(Node* fused, const std::string& pattern, const std::vector<Node*>& replaced);

  // ---- bookkeeping -----------------------------------------------------------------
  bool alive(const Node* n) const { return live_.count(n) != 0; }
  const ChangeCounts& counts() const { return counts_; }
  void reset_counts() { counts_ = ChangeCounts{}; }
  // Keyed by node name (names are unique and survive topo_sort).
  const std::map<std::string, FusedOrigin>& fused_origins() const { return origins_; }

  // Refreshes dtype/shape of the values (non-strict shape inference: a
  // contradiction is logged, never thrown). The result's side table knows the
  // symbolic contents of small integer tensors (shape subgraphs); it is valid
  // until the next change. The PassManager runs this before every pass.
  ShapeInferenceResult infer_shapes();

  // Graph-wide steps the PassManager runs between passes.
  void topo_sort();
  void verify() const;

 private:
  Graph& g_;
  Node* insert_before_ = nullptr;
  std::set<const Node*> live_;
  ChangeCounts counts_;
  std::map<std::string, FusedOrigin> origins_;
  // Folded constants waiting for their producer's output name to become free.
  std::vector<std::pair<Value*, std::string>> pending_names_;
  void rename_pending();
  // Addresses of values erased through this rewriter (until reused by a new
  // value): a pass that keeps using one gets a clear internal error instead
  // of a use-after-free.
  std::set<const Value*> erased_values_;
  void check_alive(const Value* v, const char* what) const;
  void created(const Node* n);
};

}  // namespace fuseopt
