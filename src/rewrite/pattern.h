// The pattern DSL: a pattern is written as the expression it matches and is
// matched from a ROOT node (the last node of the chain) by walking producers.
//
//   // Relu(Add(x, y)), either operand order, capturing both nodes and values.
//   // Captures are declared once as typed handles; the pattern and the pass's
//   // check()/rewrite() use the handles, so a misspelt capture does not compile:
//   const ValueCapture x{"x"}, y{"y"};
//   const NodeCapture add{"add"}, relu{"relu"};
//   Pattern p = Op("Relu", Op("Add", x, y).commutative().as(add)).as(relu);
//   ... m.value(x), m.node(add), m.value(relu) (an .as() node's output value)
//
//   // LayerNorm's variance path: the same sub-pattern object used twice must
//   // match the SAME node both times (captures with one name are consistent).
//   Pattern x = Any("x");
//   Pattern d = Op("Sub", x, Op("ReduceMean", x).as("mean")).as("d");
//   Pattern var = Op("ReduceMean", Op("Pow", d, Const("two").equals(2.0)));
//   Pattern y = Op("Div", d, Op("Sqrt", Op("Add", var, Const("eps").scalar())));
//
//   // Alternatives, op sets and optional nodes:
//   AnyOf({Op("Div", d, s), Op("Mul", d, Op("Reciprocal", s))})   // Div or Mul-by-reciprocal
//   Op("Div|Mul", a, b)                                           // op-type set
//   Op("Cast", "x").optional()        // Cast(x) or just x (absent: matches its input 0)
//   Op("Add", inner, Const("beta")).commutative().optional()   // optional Add-beta
//
// Semantics
// - A ValueCapture (or a string) where a Pattern is expected is Any(name):
//   `Op("Add", x, y)`. Handles carry the name the report and -v logs print; the
//   string forms remain for tests and one-off patterns.
// - Op(types, inputs...) matches a value produced by a node whose op_type is one
//   of `types` ("A|B|C"), in the default ONNX domain unless .domain() says
//   otherwise, whose value is output 0 (see .out()), and which has exactly as
//   many inputs as the pattern lists (.allow_extra_inputs() relaxes that; an
//   omitted optional input in the node matches only Absent()).
// - Matching backtracks fully: commutative orders, AnyOf alternatives and
//   optional nodes are all retried when something later fails.
// - Captures: Any("x")/Const("w") capture a value; .as("n") on an Op captures
//   the node AND its matched output value under "n". A name seen twice must
//   bind the same node/value again (that is how DAG patterns are written).
// - Structure lives in the pattern; dtype/shape/legality conditions belong in
//   the FusionPass::check function (TVM style). Predicates on a pattern
//   (.where, .attr_is, .scalar, .equals) are for cheap structural facts only.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fuseopt {

struct PatternNode;  // private representation (pattern.cc)

// Typed capture handles (see the top of this file). A ValueCapture names a value
// (Any, Const, or the output of an Op captured with .as()); a NodeCapture names a
// node (.as(), which also captures its output value, or .as_node()).
struct ValueCapture {
  std::string name;
};
struct NodeCapture {
  std::string name;
};

class Pattern {
 public:
  Pattern();  // Any() without a capture
  Pattern(const char* capture_name);         // NOLINT: implicit, == Any(name)
  Pattern(const std::string& capture_name);  // NOLINT: implicit, == Any(name)
  Pattern(const ValueCapture& c) : Pattern(c.name) {}  // NOLINT: implicit, == Any(c)
  explicit Pattern(std::shared_ptr<PatternNode> n) : node_(std::move(n)) {}

  // ---- on any pattern --------------------------------------------------------
  // Extra condition on the matched value; `what` appears in the rejection text.
  Pattern& where(std::function<bool(const Value&)> pred, std::string what);

  // ---- on value patterns (Any / Const) ----------------------------------------
  Pattern& scalar();                       // exactly one element (rank 0 or all dims 1)
  Pattern& equals(double v, double tol = 0.0);  // constant, every element == v (within tol)
  Pattern& dtype(DType t);                 // value's dtype must be t

  // ---- on Op patterns -----------------------------------------------------------
  Pattern& as(const std::string& capture_name);       // capture node + its value
  Pattern& as_node(const std::string& capture_name);  // capture only the node (multi-output ops)
  Pattern& as(const NodeCapture& c) { return as(c.name); }
  Pattern& as_node(const NodeCapture& c) { return as_node(c.name); }
  Pattern& commutative();        // two-input op: also try the inputs swapped
  Pattern& optional();           // node may be absent: then the value matches input 0's pattern
  Pattern& optional_through(int input_index);  // absent: match this input's pattern instead
  Pattern& domain(const std::string& d);       // default: "" (== "ai.onnx")
  Pattern& out(int output_index);  // value must be this output of the node (default 0)
  Pattern& any_out();              // value may be any output of the node
  Pattern& allow_extra_inputs();   // node may have more inputs than the pattern lists
  // Attribute conditions: int/float/ints attribute `name` (dflt when absent) must equal v.
  Pattern& attr_is(const std::string& name, int64_t v, std::optional<int64_t> dflt = std::nullopt);
  Pattern& attr_is(const std::string& name, double v, std::optional<double> dflt = std::nullopt);
  Pattern& attr_is(const std::string& name, std::vector<int64_t> v);
  Pattern& where_node(std::function<bool(const Node&)> pred, std::string what);
  // The matched node's value must have exactly one consumer node (ggml's rule,
  // for patterns that want it structurally; check_interior_private covers it generally).
  Pattern& single_use();

  const PatternNode& node() const { return *node_; }
  std::shared_ptr<PatternNode> ptr() const { return node_; }
  std::string str() const;  // readable form, e.g. Relu(Add(x, y))

 private:
  PatternNode& mut();
  std::shared_ptr<PatternNode> node_;
};

// ---- constructors ---------------------------------------------------------------
Pattern Any(const std::string& capture_name = "");    // any value (also graph inputs/constants)
Pattern Const(const std::string& capture_name = "");  // a value with const_data (initializer)
inline Pattern Any(const ValueCapture& c) { return Any(c.name); }
inline Pattern Const(const ValueCapture& c) { return Const(c.name); }
Pattern Absent();                                      // an omitted optional input (nullptr)
Pattern AnyOf(std::vector<Pattern> alternatives);      // first that matches (with backtracking)
Pattern OpN(const std::string& types, std::vector<Pattern> inputs);
template <class... P>
Pattern Op(const std::string& types, P&&... inputs) {
  return OpN(types, std::vector<Pattern>{Pattern(std::forward<P>(inputs))...});
}

// ---- matching ---------------------------------------------------------------------

// A successful match: what the pattern covered and captured.
class Match {
 public:
  Node* root = nullptr;                 // the node the match started from
  std::map<std::string, Node*> nodes;   // captures by name (Op .as / .as_node)
  std::map<std::string, Value*> values; // captures by name (Any, Const, Op .as)
  std::vector<Node*> matched;           // every node the pattern covered, root first, each once

  // nullptr when the capture did not bind (e.g. inside an absent optional node).
  Node* node(const NodeCapture& c) const { return node(c.name); }
  Value* value(const ValueCapture& c) const { return value(c.name); }
  Value* value(const NodeCapture& c) const { return value(c.name); }  // the output an .as() node matched
  bool has(const ValueCapture& c) const { return has(c.name); }
  bool has(const NodeCapture& c) const { return has(c.name); }
  // The constant data of a captured value; nullptr if absent or not constant.
  const Tensor* constant(const ValueCapture& c) const { return constant(c.name); }
  // The same by name (tests, one-off patterns).
  Node* node(const std::string& name) const;
  Value* value(const std::string& name) const;
  bool has(const std::string& name) const { return nodes.count(name) || values.count(name); }
  const Tensor* constant(const std::string& name) const;
  bool covers(const Node* n) const;  // n is one of `matched`
  std::string node_names() const;    // "'a', 'b'" for messages
};

// Either a Match, or why the root did not match (structural; for -v logs).
struct MatchResult {
  std::optional<Match> match;
  std::string reason;
  explicit operator bool() const { return match.has_value(); }
};

// Matches `p` against `root`'s output value (the value the pattern's top Op
// produces; a pattern whose top is not an Op matches root's output 0).
MatchResult match_pattern(const Pattern& p, Node* root);
// Matches `p` against a value (any producer or none).
MatchResult match_value(const Pattern& p, Value* v);

// ---- check results -------------------------------------------------------------

// ok, or a rejection with a one-line reason naming the rule and the nodes,
// e.g. Status::reject("rule 2: bias '", v->name, "' of ", n->label(), " is not a constant").
class Status {
 public:
  static Status ok() { return Status(); }
  template <class... A>
  static Status reject(const A&... parts) {
    Status s;
    s.ok_ = false;
    s.reason_ = concat(parts...);
    return s;
  }
  bool is_ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& reason() const { return reason_; }

 private:
  template <class... A>
  static std::string concat(const A&... parts);
  bool ok_ = true;
  std::string reason_;
};

// DESIGN legality rule 1 (ggml's rule, generalised): every value a matched node
// other than the root produces must have no consumer outside the match and
// must not be a graph output, unless it is listed in `kept` (values the fused
// op will also produce, e.g. SkipLayerNorm's Sum). The reason names the value,
// its producer and the outside consumer.
Status check_interior_private(const Match& m, const std::vector<const Value*>& kept = {});

// Small helpers fusion checks share.
bool is_scalar_const(const Value* v);                       // constant with one element
std::optional<double> scalar_value(const Value* v);         // that element, if so
bool const_all_equal(const Value* v, double x, double tol);  // every element == x (dtype-aware, below)

// Constant matching is dtype-aware (every .equals and const_all_equal): a
// constant stored as float16/bfloat16/float holds x only as that dtype can
// (sqrt(2) in fp16 is 1.4140625, 0.044715 is 0.04470825), so a comparison
// with x also accepts kConstMatchUlps units in the last place of the
// constant's dtype at x. Values the dtype holds exactly (0.5, 1, 2, 3) still
// match exactly, and `tol` given by the caller is the floor.
constexpr int kConstMatchUlps = 2;
double dtype_match_tolerance(double x, DType d);  // that allowance; 0 for exact values and non-floats
bool const_value_matches(double e, double x, double tol, DType d);  // |e - x| within max(tol, allowance)

}  // namespace fuseopt

// ---- implementation details ------------------------------------------------------
#include <sstream>
namespace fuseopt {
template <class... A>
std::string Status::concat(const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
}  // namespace fuseopt
