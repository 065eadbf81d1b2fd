#include "ir/graph.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "util/error.h"
#include "util/mapped_file.h"

namespace fuseopt {

std::string Dim::str() const {
  if (known()) return std::to_string(value);
  return symbol.empty() ? "?" : symbol;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + s[i].str();
  return r + "]";
}

Attribute Attribute::make_int(std::string n, int64_t v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::Int; a.i = v; return a;
}
Attribute Attribute::make_float(std::string n, float v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::Float; a.f = v; return a;
}
Attribute Attribute::make_string(std::string n, std::string v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::String; a.s = std::move(v); return a;
}
Attribute Attribute::make_ints(std::string n, std::vector<int64_t> v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::Ints; a.ints = std::move(v); return a;
}
Attribute Attribute::make_floats(std::string n, std::vector<float> v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::Floats; a.floats = std::move(v); return a;
}
Attribute Attribute::make_tensor(std::string n, Tensor v) {
  Attribute a; a.name = std::move(n); a.kind = Kind::Tensor;
  a.t = std::make_shared<Tensor>(std::move(v));
  return a;
}

std::vector<Node*> Value::consumers() const {
  std::vector<Node*> r;
  for (const Use& u : uses)
    if (std::find(r.begin(), r.end(), u.node) == r.end()) r.push_back(u.node);
  return r;
}

const Attribute* Node::attr(const std::string& n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}
int64_t Node::attr_int(const std::string& n, int64_t dflt) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Int ? a->i : dflt;
}
float Node::attr_float(const std::string& n, float dflt) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Float ? a->f : dflt;
}
std::string Node::attr_string(const std::string& n, const std::string& dflt) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::String ? a->s : dflt;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, std::vector<int64_t> dflt) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Ints ? a->ints : dflt;
}
std::vector<float> Node::attr_floats(const std::string& n, std::vector<float> dflt) const {
  const Attribute* a = attr(n);
  return a && a->kind == Attribute::Kind::Floats ? a->floats : dflt;
}
void Node::set_attr(Attribute a) {
  for (auto& x : attrs)
    if (x.name == a.name) { x = std::move(a); return; }
  attrs.push_back(std::move(a));
}
bool Node::has_subgraph() const {
  for (const auto& a : attrs)
    if (a.kind == Attribute::Kind::Graph) return true;
  return false;
}
std::string Node::label() const {
  // Names come from the model: escaped, so a message quoting them stays one line.
  std::string op = printable(domain.empty() ? op_type : domain + "." + op_type);
  return op + " " + quoted(name);
}

// ----------------------------------------------------------------------------

Value* Graph::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : it->second.get();
}

Value* Graph::create_value(const std::string& name) {
  FUSE_CHECK(!name.empty(), "internal: empty value name");
  FUSE_CHECK(!values_.count(name), "value '" << name << "' is defined twice");
  auto v = std::make_unique<Value>();
  v->name = name;
  Value* raw = v.get();
  values_[name] = std::move(v);
  value_seq_[raw] = next_value_seq_;
  value_order_[next_value_seq_++] = raw;
  return raw;
}

std::string Graph::unique_name(const std::string& hint) const {
  std::string base = hint.empty() ? "v" : hint;
  if (!values_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string c = base + "_" + std::to_string(i);
    if (!values_.count(c)) return c;
  }
}

Value* Graph::fresh_value(const std::string& hint) { return create_value(unique_name(hint)); }

Value* Graph::add_initializer(const std::string& hint, Tensor t) {
  Value* v = fresh_value(hint);
  v->dtype = t.dtype;
  Shape s;
  for (int64_t d : t.dims) s.push_back(Dim::of(d));
  v->shape = s;
  v->const_data = store_constant(std::move(t));
  initializers.push_back(v);
  return v;
}

void Graph::spill_constants_to(const std::string& dir, size_t min_bytes) {
  spill_ = std::make_shared<ScratchFile>(dir);
  spill_min_bytes_ = min_bytes;
  weight_files.push_back(spill_->file());
}

TensorPtr Graph::store_constant(Tensor t) {
  if (!spill_ || t.dtype == DType::String || t.bytes.is_view() || t.bytes.size() < spill_min_bytes_)
    return std::make_shared<const Tensor>(std::move(t));
  Tensor s;
  s.dtype = t.dtype;
  s.dims = std::move(t.dims);
  s.bytes = TensorBytes::view(spill_->append(t.bytes.data(), t.bytes.size()));
  t = Tensor();  // the memory copy goes now, and with it
  release_weight_pages();  // the weight pages read to compute it
  return std::make_shared<const Tensor>(std::move(s));
}

void Graph::release_weight_pages() const {
  for (const auto& f : weight_files) f->release_resident();
}

void Graph::erase_value(Value* v) {
  FUSE_CHECK(v->uses.empty() && v->producer == nullptr && !v->is_graph_output,
             "internal: erasing value '" << v->name << "' that is still in use");
  if (v->const_data) initializers.erase(std::remove(initializers.begin(), initializers.end(), v), initializers.end());
  if (v->is_graph_input) inputs.erase(std::remove(inputs.begin(), inputs.end(), v), inputs.end());
  auto seq = value_seq_.find(v);
  value_order_.erase(seq->second);
  value_seq_.erase(seq);
  values_.erase(v->name);
}

std::vector<Value*> Graph::all_values() const {
  std::vector<Value*> r;
  r.reserve(value_order_.size());
  for (const auto& [seq, v] : value_order_) r.push_back(v);
  return r;
}

std::string Graph::unique_node_name(const std::string& hint) {
  std::string base = hint.empty() ? "node" : hint;
  int& count = node_names_[base];
  std::string name = count == 0 ? base : base + "_" + std::to_string(count);
  ++count;
  while (node_names_.count(name) && name != base) {
    name = base + "_" + std::to_string(count++);
  }
  if (name != base) node_names_[name] = 1;
  return name;
}

Node* Graph::insert_node_before(Node* pos, const std::string& op_type, const std::string& domain,
                                const std::vector<Value*>& ins, const std::vector<std::string>& out_names,
                                const std::string& name_hint) {
  auto n = std::make_unique<Node>();
  n->op_type = op_type;
  n->domain = domain;
  n->name = unique_node_name(name_hint.empty() ? op_type : name_hint);
  Node* raw = n.get();
  for (size_t i = 0; i < ins.size(); ++i) {
    raw->inputs.push_back(ins[i]);
    if (ins[i]) ins[i]->uses.push_back({raw, static_cast<int>(i)});
  }
  for (size_t i = 0; i < out_names.size(); ++i) {
    if (out_names[i].empty()) { raw->outputs.push_back(nullptr); continue; }
    Value* v = find(out_names[i]);
    if (v == nullptr || v->producer != nullptr || v->is_graph_input || v->const_data)
      v = v ? fresh_value(out_names[i]) : create_value(out_names[i]);
    v->producer = raw;
    v->producer_output = static_cast<int>(i);
    raw->outputs.push_back(v);
  }
  auto at = nodes_.end();
  if (pos != nullptr) {
    auto found = node_pos_.find(pos);
    FUSE_CHECK(found != node_pos_.end(), "internal: insertion point " << pos->label() << " is not in the graph");
    at = found->second;
  }
  node_pos_[raw] = nodes_.insert(at, std::move(n));
  return raw;
}

Node* Graph::add_node(const std::string& op_type, const std::string& domain, const std::vector<Value*>& ins,
                      const std::vector<std::string>& out_names, const std::string& name_hint) {
  return insert_node_before(nullptr, op_type, domain, ins, out_names, name_hint);
}

static void remove_use(Value* v, Node* n, int index) {
  auto& u = v->uses;
  for (auto it = u.begin(); it != u.end(); ++it)
    if (it->node == n && it->index == index) { u.erase(it); return; }
}

void Graph::set_input(Node* n, size_t slot, Value* v) {
  if (slot >= n->inputs.size()) n->inputs.resize(slot + 1, nullptr);
  if (n->inputs[slot]) remove_use(n->inputs[slot], n, static_cast<int>(slot));
  n->inputs[slot] = v;
  if (v) v->uses.push_back({n, static_cast<int>(slot)});
}

void Graph::add_implicit_input(Node* n, Value* v) {
  n->implicit_inputs.push_back(v);
  v->uses.push_back({n, -1});
}

void Graph::clear_implicit_inputs(Node* n) {
  for (Value* v : n->implicit_inputs) remove_use(v, n, -1);
  n->implicit_inputs.clear();
}

void Graph::erase_node(Node* n) {
  for (Value* o : n->outputs) {
    if (!o) continue;
    FUSE_CHECK(o->uses.empty() && !o->is_graph_output,
               "internal: erasing " << n->label() << " whose output '" << o->name << "' is still used");
  }
  for (size_t i = 0; i < n->inputs.size(); ++i)
    if (n->inputs[i]) remove_use(n->inputs[i], n, static_cast<int>(i));
  for (Value* v : n->implicit_inputs) remove_use(v, n, -1);
  for (Value* o : n->outputs) {
    if (!o) continue;
    o->producer = nullptr;
    erase_value(o);
  }
  auto at = node_pos_.find(n);
  FUSE_CHECK(at != node_pos_.end(), "internal: erasing a node that is not in the graph");
  nodes_.erase(at->second);
  node_pos_.erase(at);
}

void Graph::replace_all_uses(Value* from, Value* to) {
  if (from == to) return;
  auto uses = from->uses;
  for (const Use& u : uses) {
    if (u.index >= 0) {
      u.node->inputs[u.index] = to;
    } else {
      std::replace(u.node->implicit_inputs.begin(), u.node->implicit_inputs.end(), from, to);
    }
    to->uses.push_back(u);
  }
  from->uses.clear();
  if (from->is_graph_output) {
    // Users bind outputs by name: the replacement takes over the output's
    // name when it is an ordinary intermediate value.
    for (auto& o : outputs)
      if (o == from) o = to;
    from->is_graph_output = false;
    bool renamable = !to->is_graph_input && !to->const_data && !to->is_graph_output;
    to->is_graph_output = true;
    // The output's declared type stays where the replacement's is unknown (an output of
    // elem_type 0 is no valid model).
    if (to->dtype == DType::Undefined) to->dtype = from->dtype;
    if (!to->shape) to->shape = from->shape;
    if (renamable) {
      std::string name = from->name;
      rename_value(from, unique_name(name + "_replaced"));
      rename_value(to, name);
    }
  }
}

void Graph::rename_value(Value* v, const std::string& new_name) {
  if (v->name == new_name) return;
  FUSE_CHECK(!values_.count(new_name), "internal: rename to existing value '" << new_name << "'");
  auto owned = std::move(values_[v->name]);
  values_.erase(v->name);
  v->name = new_name;
  values_[new_name] = std::move(owned);
}

Node* Graph::find_node(const std::string& name) const {
  for (const auto& n : nodes_)
    if (n->name == name) return n.get();
  return nullptr;
}

std::vector<Node*> Graph::topo_order(OnCycle on_cycle) const {
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> order;
  std::vector<Node*> ready;
  auto produced_here = [&](const Value* v) { return v && v->producer && node_pos_.count(v->producer); };
  for (const auto& n : nodes_) {
    int deps = 0;
    for (Value* v : n->inputs)
      if (produced_here(v)) ++deps;
    for (Value* v : n->implicit_inputs)
      if (produced_here(v)) ++deps;
    pending[n.get()] = deps;
  }
  // Keep the original relative order among ready nodes: stable and deterministic.
  std::unordered_map<Node*, size_t> position;
  size_t idx = 0;
  for (const auto& n : nodes_) position[n.get()] = idx++;
  auto cmp = [&](Node* a, Node* b) { return position[a] > position[b]; };
  for (const auto& n : nodes_)
    if (pending[n.get()] == 0) ready.push_back(n.get());
  std::make_heap(ready.begin(), ready.end(), cmp);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), cmp);
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (Value* o : n->outputs) {
      if (!o) continue;
      for (const Use& u : o->uses) {
        if (--pending[u.node] == 0) {
          ready.push_back(u.node);
          std::push_heap(ready.begin(), ready.end(), cmp);
        }
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& n : nodes_) {
      if (pending[n.get()] <= 0) continue;
      if (on_cycle == OnCycle::Throw) throw Error("graph has a cycle through node " + n->label());
      order.push_back(n.get());
    }
  }
  return order;
}

void Graph::topo_sort() {
  const std::vector<Node*> order = topo_order();
  std::unordered_map<Node*, std::unique_ptr<Node>> owned;
  for (auto& n : nodes_) owned[n.get()] = std::move(n);
  nodes_.clear();
  node_pos_.clear();
  for (Node* n : order) {
    nodes_.push_back(std::move(owned[n]));
    node_pos_[n] = std::prev(nodes_.end());
  }
}

void Graph::verify() const {
  std::set<const Value*> seen;
  for (const Value* v : inputs) seen.insert(v);
  for (const Value* v : initializers) seen.insert(v);
  for (const auto& np : nodes_) {
    const Node* n = np.get();
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (!v) continue;
      FUSE_CHECK(seen.count(v) || v->producer,
                 "node " << n->label() << " reads '" << v->name << "', which no node, input or initializer produces");
      FUSE_CHECK(seen.count(v), "node " << n->label() << " reads '" << v->name << "' before it is produced");
      bool found = false;
      for (const Use& u : v->uses) found |= (u.node == n && u.index == static_cast<int>(i));
      FUSE_CHECK(found, "internal: use list of '" << v->name << "' misses " << n->label());
    }
    for (const Value* v : n->outputs)
      if (v) {
        FUSE_CHECK(v->producer == n, "internal: producer of '" << v->name << "' is not " << n->label());
        seen.insert(v);
      }
  }
  for (const Value* v : outputs)
    FUSE_CHECK(seen.count(v), "graph output '" << v->name << "' is never produced");
}

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> c;
  for (const auto& n : nodes_) c[n->domain.empty() ? n->op_type : n->domain + "." + n->op_type]++;
  return c;
}

int64_t Graph::opset(const std::string& domain) const {
  auto it = opset_imports.find(domain);
  if (it == opset_imports.end() && domain.empty()) it = opset_imports.find("ai.onnx");
  return it == opset_imports.end() ? 0 : it->second;
}

}  // namespace fuseopt
