#include "ir/shape_inference.h"

#include <cmath>
#include <memory>
#include <set>
#include <unordered_set>

#include "util/error.h"

namespace fuseopt {
namespace {

std::string registry_key(const std::string& domain, const std::string& op) {
  const std::string d = (domain == "ai.onnx") ? std::string() : domain;
  return d + '\x1f' + op;
}

std::unordered_map<std::string, ShapeFn>& registry() {
  static std::unordered_map<std::string, ShapeFn> fns;
  return fns;
}

const std::optional<Shape> kNoShape;

DTypeRule& dtype_rule() {
  static DTypeRule rule;
  return rule;
}

// Tensor of a Constant node's value attribute (value, value_float(s), value_int(s)).
TensorPtr constant_node_tensor(const Node& n) {
  for (const Attribute& a : n.attrs) {
    if (a.name == "value" && a.t) return a.t;
    if (a.name == "value_float") return std::make_shared<Tensor>(Tensor::scalar_float(a.f));
    if (a.name == "value_floats")
      return std::make_shared<Tensor>(Tensor::from_floats(a.floats, {static_cast<int64_t>(a.floats.size())}));
    if (a.name == "value_int") return std::make_shared<Tensor>(Tensor::from_ints({a.i}, {}));
    if (a.name == "value_ints")
      return std::make_shared<Tensor>(Tensor::from_ints(a.ints, {static_cast<int64_t>(a.ints.size())}));
  }
  return nullptr;
}

// Symbolic contents of a constant tensor: integer (and bool) tensors, and float
// tensors whose values are all whole numbers (exporters cast shapes to float).
std::optional<SymbolicContents> contents_of_tensor(const Tensor& t, int64_t max_elems) {
  if (t.numel() > max_elems || t.dtype == DType::String || t.dtype == DType::Undefined) return std::nullopt;
  if (t.bytes.size() < static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) return std::nullopt;
  SymbolicContents c;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype_is_float(t.dtype)) {
      double d = t.as_double(i);
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15) return std::nullopt;
      c.push_back(SymExpr::constant(static_cast<int64_t>(d)));
    } else {
      c.push_back(SymExpr::constant(t.as_int(i)));
    }
  }
  return c;
}

// Shared state of one evaluation: constants of Constant nodes and the
// contents table.
struct EvalState {
  int64_t max_elems = 64;
  std::unordered_map<const Value*, SymbolicContents>* contents = nullptr;
  std::unordered_map<const Value*, TensorPtr> constant_nodes;
  std::unordered_set<const Value*> not_constant;

  const Tensor* const_of(const Value* v) {
    if (!v) return nullptr;
    if (v->const_data) return v->const_data.get();
    if (!v->producer || !v->producer->is("Constant")) return nullptr;
    auto it = constant_nodes.find(v);
    if (it != constant_nodes.end()) return it->second.get();
    TensorPtr t = constant_node_tensor(*v->producer);
    constant_nodes[v] = t;
    return t.get();
  }
  const SymbolicContents* lookup(const Value* v) {
    if (!v) return nullptr;
    auto it = contents->find(v);
    if (it != contents->end()) return &it->second;
    if (not_constant.count(v)) return nullptr;
    if (const Tensor* t = const_of(v)) {
      if (auto c = contents_of_tensor(*t, max_elems)) {
        SymbolicContents& slot = (*contents)[v];
        slot = std::move(*c);
        return &slot;
      }
    }
    not_constant.insert(v);
    return nullptr;
  }
};

std::string shape_text(const std::optional<Shape>& s) { return s ? shape_str(*s) : std::string("?"); }

// Merges an inferred shape into what a value already has. Returns an error
// text on a contradiction ("" when fine).
std::string merge_shape(std::optional<Shape>& have, const std::optional<Shape>& got) {
  if (!got) return "";
  if (!have) { have = got; return ""; }
  if (have->size() != got->size()) return "rank " + std::to_string(got->size()) + " vs " + std::to_string(have->size());
  Shape merged = *have;
  for (size_t i = 0; i < merged.size(); ++i) {
    const Dim& h = (*have)[i];
    const Dim& g = (*got)[i];
    if (h.known() && g.known()) {
      if (h.value != g.value) return "dim " + std::to_string(i) + " is " + g.str() + " vs " + h.str();
    } else if (g.known()) {
      merged[i] = g;
    } else if (!h.known() && h.symbol.empty() && !g.symbol.empty()) {
      merged[i] = g;
    }
  }
  have = merged;
  return "";
}

void run_node(const Node& n, EvalState& st, const ShapeFn& fn, ShapeContext::Result& out, int64_t opset,
              std::unordered_map<const Value*, std::pair<DType, std::optional<Shape>>>* local = nullptr,
              const Graph* graph = nullptr) {
  ShapeContext::Sources src;
  src.graph = graph;
  src.contents = [&st](const Value* v) { return st.lookup(v); };
  src.constant = [&st](const Value* v) { return st.const_of(v); };
  if (local) {
    src.shape = [local](const Value* v) -> const std::optional<Shape>* {
      auto it = local->find(v);
      return it == local->end() ? &v->shape : &it->second.second;
    };
    src.dtype = [local](const Value* v) {
      auto it = local->find(v);
      return it == local->end() ? v->dtype : it->second.first;
    };
  }
  ShapeContext ctx(&n, opset, src);
  fn(ctx);
  out = std::move(ctx.result());
}

int64_t node_opset(const Graph* g, const Node& n) {
  if (!g) return 0;
  return g->opset(n.domain == "ai.onnx" ? std::string() : n.domain);
}

}  // namespace

// --- registry -----------------------------------------------------------------

bool register_shape_fn(const std::string& domain, const std::string& op, ShapeFn fn) {
  registry()[registry_key(domain, op)] = std::move(fn);
  return true;
}

const ShapeFn* find_shape_fn(const std::string& domain, const std::string& op) {
  auto it = registry().find(registry_key(domain, op));
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<DType> infer_output_dtypes(const Node& n, const Graph* g,
                                       const std::function<DType(const Value*)>& dtype_of) {
  const ShapeFn* fn = find_shape_fn(n.domain, n.op_type);
  if (!fn) return std::vector<DType>(n.outputs.size(), DType::Undefined);
  ShapeContext::Sources src;
  src.graph = g;
  src.contents = [](const Value*) -> const SymbolicContents* { return nullptr; };
  src.constant = [](const Value* v) -> const Tensor* { return v->const_data.get(); };
  src.dtype = dtype_of;
  ShapeContext ctx(&n, node_opset(g, n), src);
  try {
    (*fn)(ctx);
  } catch (const std::exception&) {
    return std::vector<DType>(n.outputs.size(), DType::Undefined);
  }
  return ctx.result().dtypes;
}

// --- ShapeContext ---------------------------------------------------------------

ShapeContext::ShapeContext(const Node* n, int64_t opset, const Sources& sources)
    : node_(n), opset_(opset), src_(sources) {
  result_.dtypes.assign(n->outputs.size(), DType::Undefined);
  result_.shapes.assign(n->outputs.size(), std::nullopt);
  result_.contents.assign(n->outputs.size(), std::nullopt);
}

DType ShapeContext::input_dtype(size_t i) const {
  const Value* v = node_->input(i);
  if (!v) return DType::Undefined;
  return src_.dtype ? src_.dtype(v) : v->dtype;
}

const std::optional<Shape>& ShapeContext::input_shape(size_t i) const {
  const Value* v = node_->input(i);
  if (!v) return kNoShape;
  return src_.shape ? *src_.shape(v) : v->shape;
}

std::optional<int64_t> ShapeContext::input_rank(size_t i) const {
  const auto& s = input_shape(i);
  if (!s) return std::nullopt;
  return static_cast<int64_t>(s->size());
}

const Tensor* ShapeContext::input_const(size_t i) const {
  const Value* v = node_->input(i);
  return v ? src_.constant(v) : nullptr;
}

const SymbolicContents* ShapeContext::input_contents(size_t i) const {
  const Value* v = node_->input(i);
  return v ? src_.contents(v) : nullptr;
}

std::optional<std::vector<int64_t>> ShapeContext::input_ints(size_t i) const {
  if (const Tensor* t = input_const(i)) {
    // Shape operands are small; a large constant is data, not worth copying.
    if (t->numel() > 4096) return std::nullopt;
    if (t->dtype == DType::String || t->bytes.size() < static_cast<size_t>(t->numel()) * dtype_size(t->dtype))
      return std::nullopt;
    if (dtype_is_integer(t->dtype) || t->dtype == DType::Bool) return t->to_int_vector();
  }
  const SymbolicContents* c = input_contents(i);
  if (!c) return std::nullopt;
  std::vector<int64_t> r;
  for (const auto& e : *c) {
    if (!e) return std::nullopt;
    auto k = e->constant_value();
    if (!k) return std::nullopt;
    r.push_back(*k);
  }
  return r;
}

void ShapeContext::set_output_dtype(size_t i, DType t) {
  if (i < result_.dtypes.size()) result_.dtypes[i] = t;
}

void ShapeContext::set_output_shape(size_t i, Shape s) {
  if (i < result_.shapes.size()) result_.shapes[i] = std::move(s);
}

void ShapeContext::set_output_contents(size_t i, SymbolicContents c) {
  if (i < result_.contents.size()) result_.contents[i] = std::move(c);
}

void ShapeContext::fail(const std::string& msg) const {
  throw Error("shape inference: " + node_->label() + ": " + msg);
}

int64_t ShapeContext::normalize_axis(int64_t axis, int64_t rank) const {
  if (axis < -rank || axis >= rank)
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// --- helpers ----------------------------------------------------------------------

bool dims_equal(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  if (a.symbol.empty() || b.symbol.empty()) return false;
  if (a.symbol == b.symbol) return true;
  return SymExpr::parse(a.symbol) == SymExpr::parse(b.symbol);
}

bool dims_conflict(const Dim& a, const Dim& b) { return a.known() && b.known() && a.value != b.value; }

Dim dims_product(const Shape& s, size_t begin, size_t end) {
  SymExpr p = SymExpr::constant(1);
  for (size_t i = begin; i < end && i < s.size(); ++i) {
    auto e = SymExpr::from_dim(s[i]);
    if (!e) {
      // 0 times anything is 0, even an unknown.
      for (size_t k = begin; k < end && k < s.size(); ++k)
        if (s[k].known() && s[k].value == 0) return Dim::of(0);
      return Dim::unknown();
    }
    p = p * *e;
  }
  return p.to_dim();
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one = Dim::of(1);
    const Dim& x = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const Dim& y = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (x.known() && x.value == 1) out[i] = y;
    else if (y.known() && y.value == 1) out[i] = x;
    else if (x.known() && y.known()) {
      if (x.value != y.value) return std::nullopt;
      out[i] = x;
    } else if (x.known()) out[i] = x;
    else if (y.known()) out[i] = y;
    else if (dims_equal(x, y)) out[i] = x;
    else out[i] = Dim::unknown();
  }
  return out;
}

// --- result -----------------------------------------------------------------------

namespace {
// The tracked contents of v, or those of its constant data when untracked.
std::optional<SymbolicContents> contents_or_const(const ShapeInferenceResult& r, const Value* v) {
  auto it = r.contents.find(v);
  if (it != r.contents.end()) return it->second;
  if (v && v->const_data) return contents_of_tensor(*v->const_data, 64);
  return std::nullopt;
}
}  // namespace

std::optional<std::vector<Dim>> ShapeInferenceResult::symbolic_value(const Value* v) const {
  auto c = contents_or_const(*this, v);
  if (!c) return std::nullopt;
  std::vector<Dim> r;
  for (const auto& e : *c) {
    if (!e) r.push_back(Dim::unknown());
    else if (auto c = e->constant_value(); c && *c < 0) r.push_back(Dim::sym(std::to_string(*c)));
    else r.push_back(e->to_dim());
  }
  return r;
}

std::optional<std::vector<int64_t>> ShapeInferenceResult::symbolic_ints(const Value* v) const {
  auto c = contents_or_const(*this, v);
  if (!c) return std::nullopt;
  std::vector<int64_t> r;
  for (const auto& e : *c) {
    if (!e || !e->constant_value()) return std::nullopt;
    r.push_back(*e->constant_value());
  }
  return r;
}

// --- driver -----------------------------------------------------------------------

void register_dtype_rule(DTypeRule rule) { dtype_rule() = std::move(rule); }

ShapeInferenceResult infer_shapes(Graph& g, const ShapeInferenceOptions& opts) {
  ShapeInferenceResult res;
  EvalState st;
  st.max_elems = opts.max_tracked_elements;
  st.contents = &res.contents;
  for (const auto& [v, c] : opts.seed_contents)
    if (static_cast<int64_t>(c.size()) <= opts.max_tracked_elements) res.contents[v] = c;
  std::set<std::string> unknown;

  const std::vector<Node*> order = g.topo_order(Graph::OnCycle::Last);
  if (opts.reset) {
    for (Node* n : order)
      for (Value* v : n->outputs)
        if (v) { v->shape.reset(); v->dtype = DType::Undefined; }
  }

  for (Node* n : order) {
    // Ops with subgraphs (If, Loop) have shape functions that read the body's
    // declared output types; any other op with a subgraph stays unknown.
    // The schema's type rules, on the types the node's values have once its
    // outputs are inferred (or, for an op without a shape function, as declared).
    auto check_types = [&]() {
      if (!dtype_rule()) return true;
      const std::string problem = dtype_rule()(*n, node_opset(&g, *n));
      if (problem.empty()) return true;
      std::string msg = "shape inference: " + n->label() + ": " + problem;
      if (opts.strict) throw Error(msg);
      res.conflicts.push_back(msg);
      return false;
    };
    const ShapeFn* fn = find_shape_fn(n->domain, n->op_type);
    if (!fn) {
      unknown.insert((n->domain.empty() ? std::string() : n->domain + ".") + n->op_type);
      check_types();
      continue;
    }
    ShapeContext::Result out;
    try {
      run_node(*n, st, *fn, out, node_opset(&g, *n), nullptr, &g);
    } catch (const Error& e) {
      if (opts.strict) throw;
      res.conflicts.push_back(e.what());
      continue;
    } catch (const std::exception& e) {
      // A shape function tripping over malformed data: report it as the node's problem.
      std::string msg = "shape inference: " + n->label() + ": " + e.what();
      if (opts.strict) throw Error(msg);
      res.conflicts.push_back(msg);
      continue;
    }
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      Value* v = n->outputs[i];
      if (!v) continue;
      const DType t = out.dtypes[i];
      std::string problem;
      if (t != DType::Undefined) {
        if (v->dtype == DType::Undefined) v->dtype = t;
        else if (v->dtype != t)
          problem = std::string("dtype ") + dtype_name(t) + " vs declared " + dtype_name(v->dtype);
      }
      if (problem.empty()) {
        std::optional<Shape> merged = v->shape;
        std::string why = merge_shape(merged, out.shapes[i]);
        if (why.empty()) v->shape = std::move(merged);
        else problem = "inferred " + shape_text(out.shapes[i]) + " contradicts existing " + shape_text(v->shape) +
                       " (" + why + ")";
      }
      if (!problem.empty()) {
        std::string msg = "shape inference: " + n->label() + ": output '" + v->name + "': " + problem;
        if (opts.strict) throw Error(msg);
        res.conflicts.push_back(msg);
        continue;
      }
      if (out.contents[i] && static_cast<int64_t>(out.contents[i]->size()) <= opts.max_tracked_elements)
        res.contents[v] = std::move(*out.contents[i]);
    }
    check_types();
  }
  for (Node* n : order)
    for (Value* v : n->outputs)
      if (v) {
        ++res.outputs_total;
        if (v->shape) ++res.outputs_with_shape;
      }
  res.unknown_ops.assign(unknown.begin(), unknown.end());
  return res;
}

// --- stand-alone symbolic value ------------------------------------------------------

namespace {

bool worth_following(const Value* v, int64_t max_elems) {
  if (v->const_data) return true;
  if (v->dtype != DType::Undefined && !dtype_is_integer(v->dtype) && v->dtype != DType::Bool &&
      !dtype_is_float(v->dtype))
    return false;
  if (!v->shape) return dtype_is_integer(v->dtype) || v->dtype == DType::Undefined;
  if (v->shape->size() > 1) {
    Dim n = dims_product(*v->shape, 0, v->shape->size());
    return n.known() && n.value <= max_elems;
  }
  Dim n = dims_product(*v->shape, 0, v->shape->size());
  return !n.known() || n.value <= max_elems;
}

bool reads_only_shapes(const Node& n) { return n.is("Shape") || n.is("Size"); }

using LocalFacts = std::unordered_map<const Value*, std::pair<DType, std::optional<Shape>>>;

void eval_value(const Value* v, EvalState& st, LocalFacts& local, std::unordered_set<const Value*>& visiting,
                int depth) {
  if (!v || st.contents->count(v) || local.count(v) || st.const_of(v) || depth > 256 || visiting.count(v)) return;
  const Node* p = v->producer;
  if (!p || p->has_subgraph()) return;
  const ShapeFn* fn = find_shape_fn(p->domain, p->op_type);
  if (!fn) return;
  visiting.insert(v);
  if (!reads_only_shapes(*p))
    for (const Value* in : p->inputs)
      if (in && worth_following(in, st.max_elems)) eval_value(in, st, local, visiting, depth + 1);
  visiting.erase(v);
  ShapeContext::Result out;
  try {
    run_node(*p, st, *fn, out, /*opset=*/0, &local);
  } catch (const std::exception&) {
    return;
  }
  for (size_t i = 0; i < p->outputs.size(); ++i) {
    const Value* o = p->outputs[i];
    if (!o) continue;
    // Keep what the value has unless this evaluation knows more.
    auto& fact = local[o];
    fact.first = o->dtype != DType::Undefined ? o->dtype : out.dtypes[i];
    fact.second = o->shape ? o->shape : out.shapes[i];
    if (out.contents[i] && static_cast<int64_t>(out.contents[i]->size()) <= st.max_elems)
      (*st.contents)[o] = std::move(*out.contents[i]);
  }
}

}  // namespace

std::optional<std::vector<Dim>> symbolic_value(const Value* v) {
  ShapeInferenceResult res;
  EvalState st;
  st.contents = &res.contents;
  std::unordered_set<const Value*> visiting;
  LocalFacts local;
  eval_value(v, st, local, visiting, 0);
  st.lookup(v);
  return res.symbolic_value(v);
}

}  // namespace fuseopt
