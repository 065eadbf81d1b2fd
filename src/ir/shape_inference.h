// Shape and dtype inference with symbolic dims, independent of libonnx (which
// stops at opset 17). One shape function per (domain, op), registered from the
// op-family files in src/ir/shape_ops/ (fused ops too: fused.cc).
//
//   auto si = infer_shapes(g);                       // fills Value::dtype/shape
//   if (auto v = si.symbolic_value(shape_tensor))    // e.g. [batch, seq, 4, 32]
//     ...
//
// Rules
// - Node outputs are visited in topological order. An output keeps what it
//   already has (value_info, earlier inference) where inference cannot do
//   better; a known dim beats a symbol, a named symbol beats an anonymous dim.
// - Unknown ops (no shape function) and ops whose result depends on data
//   inference cannot see leave their outputs as they were. If infers its
//   branch bodies (the taken one when the condition is known, else what both
//   agree on) with the outer values' shapes bound; Loop takes the types its
//   body declares (src/onnx_io/subgraph_shapes.cc).
// - When shapes provably contradict (MatMul inner dims known and different,
//   broadcasting 3 against 5, an inferred dim != a declared one) infer_shapes
//   throws fuseopt::Error naming the node, unless options.strict is false (then
//   the problem is recorded in ShapeInferenceResult::conflicts and the value is
//   left as it was).
// - Symbolic contents: small integer tensors computed from Shape/Gather/
//   Unsqueeze/Concat/Slice/Squeeze/Cast/Add/Mul/Sub/Div/Equal/Where/
//   ConstantOfShape/Range/... (the exporters' shape subgraphs) are tracked
//   element by element as Dims in the returned result. Reshape/Expand/Tile/
//   ConstantOfShape/Slice/... read their shape operands through it.
//   A negative constant element (the -1 of a Reshape target) appears as
//   Dim::sym("-1"); use symbolic_ints() / SymExpr::from_dim() to read numbers.
// - Assumptions on symbols: a symbol is a dimension, so it is >= 0 (Equal(seq,
//   -1) is false); a Slice bound computed from a symbol is taken to be in range
//   (x[:, :seq] has seq columns), as exporters mean it.
// - Ops covered: the default-domain ops of BERT-family/GPT-2/ViT/T5/Whisper/
//   Llama/ResNet exports at opsets 11-23 (both spellings where an attribute
//   became an input), the fuseopt catalogue (fused.cc) and the ONNX Runtime
//   contrib ops of ORT-optimized models (contrib.cc).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/sym_expr.h"

namespace fuseopt {

// Symbolic contents of one value: one entry per element (row-major), nullopt
// for an element whose value is not known even symbolically.
using SymbolicContents = std::vector<std::optional<SymExpr>>;

struct ShapeInferenceOptions {
  // Forget the dtype/shape of every node output first (graph inputs and
  // initializers keep theirs) and infer from scratch. Use after rewrites that
  // may have left stale shapes behind.
  bool reset = false;
  // Throw fuseopt::Error on a provable contradiction (default); when false,
  // record it in ShapeInferenceResult::conflicts and go on.
  bool strict = true;
  // Track symbolic contents of integer tensors with at most this many elements.
  int64_t max_tracked_elements = 64;
  // Known symbolic contents of values of this graph before inference starts
  // (an If branch's outer-scope inputs carry the outer values' contents).
  std::unordered_map<const Value*, SymbolicContents> seed_contents;
};


struct ShapeInferenceResult {
  // Side table: values whose contents are tracked (only values of the graph
  // infer_shapes ran on; stale after the graph is changed).
  std::unordered_map<const Value*, SymbolicContents> contents;
  std::vector<std::string> unknown_ops;  // "domain.op" with no shape function, each once
  std::vector<std::string> conflicts;    // non-strict mode: one line per contradiction
  int outputs_with_shape = 0;            // node outputs that have a shape afterwards
  int outputs_total = 0;

  // Contents as Dims (anonymous Dim for an unknown element, Dim::sym("-1") for
  // negative constants); nullopt when the value is not tracked at all.
  // Initializers (const_data) with at most 64 elements count as tracked.
  std::optional<std::vector<Dim>> symbolic_value(const Value* v) const;
  // Contents when every element is a known integer (negatives included).
  std::optional<std::vector<int64_t>> symbolic_ints(const Value* v) const;
};

ShapeInferenceResult infer_shapes(Graph& g, const ShapeInferenceOptions& opts = {});

// Stand-alone query without a side table: evaluates v's symbolic contents by
// walking back through its producers (constants, Constant nodes and the shape
// ops listed above), using the shapes currently stored on the values (run
// infer_shapes first for Shape(x) of an intermediate x). Writes nothing.
// Same conventions as ShapeInferenceResult::symbolic_value.
std::optional<std::vector<Dim>> symbolic_value(const Value* v);

// The element types n's shape function gives its outputs when its inputs have
// the dtypes dtype_of returns (shapes and constant data as stored on the
// values; no symbolic contents; opsets from g, the latest when g is null).
// Undefined for an output the function leaves unset, and for every output when
// n has no shape function or the function fails. The one source of an op's
// dtype rules for code that needs them node by node, without inferring a whole
// graph (the runtime's Session setup, CPU evaluation of half nodes in fp32).
std::vector<DType> infer_output_dtypes(const Node& n, const Graph* g,
                                       const std::function<DType(const Value*)>& dtype_of);

// --- writing shape functions ------------------------------------------------

// What a shape function sees for one node. Input accessors tolerate missing
// (omitted or out of range) inputs.
class ShapeContext {
 public:
  const Node& node() const { return *node_; }
  int64_t opset() const { return opset_; }  // of the node's domain (default domain when "")

  size_t num_inputs() const { return node_->inputs.size(); }
  bool has_input(size_t i) const { return node_->input(i) != nullptr; }
  DType input_dtype(size_t i) const;
  const std::optional<Shape>& input_shape(size_t i) const;
  std::optional<int64_t> input_rank(size_t i) const;
  // Constant data: initializer, folded constant or a Constant node's value.
  const Tensor* input_const(size_t i) const;
  // Integer contents, when fully known (constant or tracked symbolically).
  std::optional<std::vector<int64_t>> input_ints(size_t i) const;
  // Symbolic contents, when tracked (constants included).
  const SymbolicContents* input_contents(size_t i) const;
  // The same for any value of the graph (an If's implicit outer-scope inputs).
  const SymbolicContents* value_contents(const Value* v) const { return v ? src_.contents(v) : nullptr; }
  const Tensor* value_const(const Value* v) const { return v ? src_.constant(v) : nullptr; }
  // The graph being inferred (nullptr in the stand-alone symbolic_value()).
  const Graph* graph() const { return src_.graph; }

  size_t num_outputs() const { return node_->outputs.size(); }
  bool has_output(size_t i) const { return node_->output(i) != nullptr; }
  void set_output_dtype(size_t i, DType t);
  void set_output_shape(size_t i, Shape s);
  void set_output(size_t i, DType t, Shape s) { set_output_dtype(i, t); set_output_shape(i, std::move(s)); }
  // Records symbolic contents for output i (ignored when too large).
  void set_output_contents(size_t i, SymbolicContents c);

  // Throws fuseopt::Error "shape inference: <node label>: <msg>".
  [[noreturn]] void fail(const std::string& msg) const;
  // Attribute/axis helpers.
  int64_t normalize_axis(int64_t axis, int64_t rank) const;  // fails when out of range

  // --- used by the driver ---
  struct Result {
    std::vector<DType> dtypes;
    std::vector<std::optional<Shape>> shapes;
    std::vector<std::optional<SymbolicContents>> contents;
  };
  struct Sources {
    std::function<const SymbolicContents*(const Value*)> contents;
    std::function<const Tensor*(const Value*)> constant;
    // Shape/dtype of an input; the stand-alone symbolic_value() keeps its own
    // (nullptr = read the Value).
    std::function<const std::optional<Shape>*(const Value*)> shape;
    std::function<DType(const Value*)> dtype;
    const Graph* graph = nullptr;
  };
  ShapeContext(const Node* n, int64_t opset, const Sources& sources);
  Result& result() { return result_; }

 private:
  const Node* node_;
  int64_t opset_;
  const Sources& src_;
  Result result_;
};

using ShapeFn = std::function<void(ShapeContext&)>;

// Registers fn for (domain, op); "" and "ai.onnx" are the same domain. Returns
// true (for static registration); a second registration replaces the first.
bool register_shape_fn(const std::string& domain, const std::string& op, ShapeFn fn);
const ShapeFn* find_shape_fn(const std::string& domain, const std::string& op);

// The schema's type rules for one node, checked by infer_shapes after the
// node's shape function ran, on the element types inference has for its
// inputs and outputs (declared or inferred): "" or the problem, in one line.
// The operator schemas live in onnx_io, which registers the ONNX ones
// (src/onnx_io/inferred_types.cc); a problem is a contradiction like any
// other (strict: Error naming the node; else a ShapeInferenceResult::conflicts
// line).
using DTypeRule = std::function<std::string(const Node& n, int64_t opset)>;
void register_dtype_rule(DTypeRule rule);

// FUSEOPT_SHAPE_FN("fuseopt", "AddRelu", [](ShapeContext& c) { ... });
#define FUSEOPT_SHAPE_CONCAT_(a, b) a##b
#define FUSEOPT_SHAPE_CONCAT(a, b) FUSEOPT_SHAPE_CONCAT_(a, b)
#define FUSEOPT_SHAPE_FN(domain, op, ...)                                      \
  static const bool FUSEOPT_SHAPE_CONCAT(fuseopt_shape_fn_reg_, __COUNTER__) = \
      ::fuseopt::register_shape_fn(domain, op, __VA_ARGS__)

// --- helpers shared by shape functions ----------------------------------------

// Numpy broadcasting of two shapes: a 1 broadcasts, equal symbols unify, a
// known dim (not 1) beats a symbol. nullopt on a provable mismatch (the caller
// reports it via ShapeContext::fail).
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Dims are provably equal (same known value or same symbolic expression).
bool dims_equal(const Dim& a, const Dim& b);
// Dims provably differ (both known and different).
bool dims_conflict(const Dim& a, const Dim& b);
// Product of dims (symbolic when needed); anonymous when any factor is.
Dim dims_product(const Shape& s, size_t begin, size_t end);

}  // namespace fuseopt
