#include "rewrite/rewriter.h"

#include <algorithm>

#include "util/error.h"

namespace fuseopt {

ChangeCounts& ChangeCounts::operator+=(const ChangeCounts& o) {
  nodes_created += o.nodes_created;
  nodes_erased += o.nodes_erased;
  constants_added += o.constants_added;
  constants_removed += o.constants_removed;
  uses_replaced += o.uses_replaced;
  attrs_changed += o.attrs_changed;
  inputs_changed += o.inputs_changed;
  return *this;
}

Rewriter::Rewriter(Graph& g) : g_(g) {
  for (const auto& n : g_.nodes()) live_.insert(n.get());
}

void Rewriter::check_alive(const Value* v, const char* what) const {
  FUSE_CHECK(!v || !erased_values_.count(v),
             "internal: " << what << " uses a value that an earlier rewrite erased (a stale Value*)");
}

void Rewriter::created(const Node* n) {
  for (const Value* o : n->outputs) erased_values_.erase(o);
}

Node* Rewriter::create_node(const std::string& domain, const std::string& op, const std::vector<Value*>& inputs,
                            std::vector<Attribute> attrs, int num_outputs, const std::string& name_hint) {
  FUSE_CHECK(num_outputs >= 0, "internal: create_node with negative output count");
  for (const Value* v : inputs) check_alive(v, ("create_node(" + op + ")").c_str());
  if (!domain.empty() && domain != "ai.onnx" && !g_.opset_imports.count(domain)) g_.opset_imports[domain] = 1;
  std::string base = name_hint.empty() ? op : name_hint;
  std::vector<std::string> outs;
  for (int i = 0; i < num_outputs; ++i)
    outs.push_back(g_.unique_name(base + (i == 0 ? "_out" : "_out" + std::to_string(i))));
  Node* n = g_.insert_node_before(insert_before_, op, domain == "ai.onnx" ? "" : domain, inputs, outs, base);
  n->attrs = std::move(attrs);
  created(n);
  live_.insert(n);
  counts_.nodes_created++;
  return n;
}

Value* Rewriter::add_constant(const std::string& hint, Tensor t) {
  Value* v = g_.add_initializer(g_.unique_name(hint.empty() ? "const" : hint), std::move(t));
  erased_values_.erase(v);
  counts_.constants_added++;
  return v;
}

namespace {
void store_element(Tensor& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::Float: t.data<float>()[i] = static_cast<float>(v); break;
    case DType::Double: t.data<double>()[i] = v; break;
    case DType::Float16: t.data<uint16_t>()[i] = float_to_half(static_cast<float>(v)); break;
    case DType::BFloat16: t.data<uint16_t>()[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::Int64: t.data<int64_t>()[i] = static_cast<int64_t>(v); break;
    case DType::Int32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
    case DType::Int16: t.data<int16_t>()[i] = static_cast<int16_t>(v); break;
    case DType::Int8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DType::UInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    case DType::UInt16: t.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
    case DType::UInt32: t.data<uint32_t>()[i] = static_cast<uint32_t>(v); break;
    case DType::UInt64: t.data<uint64_t>()[i] = static_cast<uint64_t>(v); break;
    case DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
    default: throw Error(std::string("internal: cannot make a scalar of dtype ") + dtype_name(t.dtype));
  }
}
}  // namespace

Value* Rewriter::add_scalar(const std::string& hint, DType dt, double v) {
  Tensor t(dt, {});
  store_element(t, 0, v);
  return add_constant(hint, std::move(t));
}

Value* Rewriter::add_int64s(const std::string& hint, const std::vector<int64_t>& v) {
  return add_constant(hint, Tensor::from_ints(v, {static_cast<int64_t>(v.size())}));
}

namespace {
bool read_by_subgraph(const Value* v) {
  for (const Use& u : v->uses)
    if (u.index < 0) return true;
  return false;
}
// `v` may take another value's name without anyone noticing.
bool can_take_name(const Value* v) {
  return v->producer && !v->is_graph_input && !v->is_const() && !v->is_graph_output && !read_by_subgraph(v);
}
}  // namespace

bool Rewriter::can_replace_all_uses(const Value* from, const Value* to) const {
  if (from == to) return true;
  if (from->is_graph_output || read_by_subgraph(from)) return can_take_name(to);
  return true;
}

void Rewriter::replace_all_uses(Value* from, Value* to) {
  FUSE_CHECK(from && to, "internal: replace_all_uses with a null value");
  check_alive(from, "replace_all_uses");
  check_alive(to, "replace_all_uses");
  if (from == to) return;
  if (from->uses.empty() && !from->is_graph_output) return;
  const bool by_name = read_by_subgraph(from);
  if (by_name)
    FUSE_CHECK(can_take_name(to), "internal: a subgraph reads '" << from->name << "' by name and '" << to->name
                                                                  << "' cannot take that name");
  const std::string name = from->name;
  g_.replace_all_uses(from, to);  // renames for graph outputs itself
  if (by_name && to->name != name) {
    g_.rename_value(from, g_.unique_name(name + "_replaced"));
    g_.rename_value(to, name);
  }
  counts_.uses_replaced++;
}

void Rewriter::set_input(Node* n, size_t slot, Value* v) {
  FUSE_CHECK(alive(n), "internal: set_input on an erased node");
  check_alive(v, "set_input");
  g_.set_input(n, slot, v);
  counts_.inputs_changed++;
}

void Rewriter::set_attr(Node* n, Attribute a) {
  n->set_attr(std::move(a));
  counts_.attrs_changed++;
}

void Rewriter::remove_attr(Node* n, const std::string& name) {
  auto it = std::remove_if(n->attrs.begin(), n->attrs.end(), [&](const Attribute& a) { return a.name == name; });
  if (it == n->attrs.end()) return;
  n->attrs.erase(it, n->attrs.end());
  counts_.attrs_changed++;
}

void Rewriter::set_type(Value* v, DType dt, std::optional<Shape> shape) {
  v->dtype = dt;
  v->shape = std::move(shape);
}

Value* Rewriter::replace_with_constant(Value* v, Tensor t) {
  FUSE_CHECK(v && v->producer, "internal: replace_with_constant on a value without producer");
  Node* producer = v->producer;
  std::string name = v->name;
  bool had_info = v->has_value_info || v->is_graph_output;
  Value* c = add_constant(name + "_folded", std::move(t));
  c->has_value_info = had_info;
  if (!v->uses.empty() || v->is_graph_output) {
    // Not the checked replace_all_uses: the constant takes over v's name below,
    // once the producer is gone, so outputs and subgraph references stay valid.
    g_.replace_all_uses(v, c);
    counts_.uses_replaced++;
  }
  pending_names_.emplace_back(c, name);
  erase_dead({producer});
  return c;
}

void Rewriter::rename_pending() {
  for (auto it = pending_names_.begin(); it != pending_names_.end();) {
    if (!g_.find(it->second)) {
      g_.rename_value(it->first, it->second);
      it = pending_names_.erase(it);
    } else {
      ++it;
    }
  }
}

void Rewriter::erase_node(Node* n) {
  FUSE_CHECK(alive(n), "internal: erasing a node that is not in the graph");
  // Erasing the insertion point (the usual end of a fusion): later nodes of this
  // rewrite go to the end; the PassManager topo-sorts after the pass, and
  // infer_shapes() sorts first. (Finding the successor would cost O(nodes).)
  if (n == insert_before_) insert_before_ = nullptr;
  for (const Value* o : n->outputs)
    if (o) erased_values_.insert(o);
  g_.erase_node(n);
  live_.erase(n);
  counts_.nodes_erased++;
  if (!pending_names_.empty()) rename_pending();
}

static bool is_dead(const Node* n) {
  for (const Value* o : n->outputs)
    if (o && (!o->uses.empty() || o->is_graph_output)) return false;
  return true;
}

int Rewriter::erase_dead(const std::vector<Node*>& nodes) {
  int erased = 0;
  for (bool again = true; again;) {
    again = false;
    for (Node* n : nodes) {
      if (!alive(n) || !is_dead(n)) continue;
      erase_node(n);
      ++erased;
      again = true;
    }
  }
  return erased;
}

void Rewriter::erase_constant(Value* v) {
  FUSE_CHECK(v && v->is_const() && !v->producer, "internal: erase_constant on a non-constant");
  FUSE_CHECK(v->uses.empty() && !v->is_graph_output, "internal: erase_constant on '" << v->name << "', still used");
  pending_names_.erase(std::remove_if(pending_names_.begin(), pending_names_.end(),
                                      [&](const auto& p) { return p.first == v; }),
                       pending_names_.end());
  g_.erase_value(v);
  erased_values_.insert(v);
  counts_.constants_removed++;
}

void Rewriter::replace_match(const Match& m, Node* fused, const std::string& pattern,
                             const std::vector<std::pair<Value*, Value*>>& outputs) {
  std::vector<std::pair<Value*, Value*>> mapping = outputs;
  if (mapping.empty()) {
    for (size_t i = 0; i < m.root->outputs.size() && i < fused->outputs.size(); ++i)
      if (m.root->outputs[i] && fused->outputs[i]) mapping.emplace_back(m.root->outputs[i], fused->outputs[i]);
  }
  for (auto& [from, to] : mapping) {
    if (to->dtype == DType::Undefined) to->dtype = from->dtype;
    if (!to->shape) to->shape = from->shape;
    to->has_value_info = to->has_value_info || from->has_value_info;
    replace_all_uses(from, to);
  }
  mark_fused(fused, pattern, m.matched);
  erase_dead(m.matched);
}

void Rewriter::mark_fused(Node* fused, const std::string& pattern, const std::vector<Node*>& replaced) {
  FusedOrigin o;
  o.pattern = pattern;
  // `replaced` lists the root first, walking up: reversed it reads in dataflow order.
  for (auto it = replaced.rbegin(); it != replaced.rend(); ++it) {
    auto prev = origins_.find((*it)->name);
    if (prev != origins_.end())
      o.replaced_ops.insert(o.replaced_ops.end(), prev->second.replaced_ops.begin(), prev->second.replaced_ops.end());
    else
      o.replaced_ops.push_back((*it)->op_type);
  }
  if (fused->doc_string.empty()) {
    std::string ops;
    for (size_t i = 0; i < o.replaced_ops.size(); ++i) ops += (i ? "+" : "") + o.replaced_ops[i];
    fused->doc_string = "fuseopt " + pattern + ": " + ops;
  }
  origins_[fused->name] = std::move(o);
}

ShapeInferenceResult Rewriter::infer_shapes() {
  ShapeInferenceOptions o;
  o.strict = false;
  try {
    g_.topo_sort();  // inference walks nodes in list order; rewrites may have appended
    return fuseopt::infer_shapes(g_, o);
  } catch (const Error&) {
    // Shape inference is advisory for the optimizer: passes check what they need.
    return ShapeInferenceResult{};
  }
}

void Rewriter::topo_sort() { g_.topo_sort(); }
void Rewriter::verify() const { g_.verify(); }

}  // namespace fuseopt
