// The graph IR: Graph owns Nodes and Values. A Value knows its producer and
// its consumers (use list); initializers are Values carrying constant data.
// Only src/onnx_io converts to and from onnx::ModelProto.
#pragma once
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/tensor.h"

namespace fuseopt {

struct Node;
class MappedFile;
class ScratchFile;

// A dimension: a known size, or a symbol ("batch", "seq", "seq*4").
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // set when unknown but named; empty = anonymous

  static Dim of(int64_t v) { Dim d; d.value = v; return d; }
  static Dim sym(std::string s) { Dim d; d.symbol = std::move(s); return d; }
  static Dim unknown() { return Dim{}; }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const {
    if (known() || o.known()) return value == o.value;
    return !symbol.empty() && symbol == o.symbol;
  }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  std::string str() const;
};
using Shape = std::vector<Dim>;
std::string shape_str(const Shape& s);

struct Attribute {
  enum class Kind { Undefined = 0, Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Other };
  std::string name;
  Kind kind = Kind::Undefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  TensorPtr t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::string ref_attr_name;  // attribute reference inside a function body
  // Opaque serialized onnx::AttributeProto for kinds the IR does not model
  // (subgraphs, sparse tensors, type protos): kept byte-exact on save.
  std::string opaque;

  static Attribute make_int(std::string n, int64_t v);
  static Attribute make_float(std::string n, float v);
  static Attribute make_string(std::string n, std::string v);
  static Attribute make_ints(std::string n, std::vector<int64_t> v);
  static Attribute make_floats(std::string n, std::vector<float> v);
  static Attribute make_tensor(std::string n, Tensor v);
};

struct Use {
  Node* node;
  int index;  // input slot; -1 for an implicit (subgraph) reference
};

struct Value {
  std::string name;
  DType dtype = DType::Undefined;
  std::optional<Shape> shape;  // nullopt = rank unknown
  Node* producer = nullptr;
  int producer_output = -1;
  std::vector<Use> uses;
  TensorPtr const_data;  // initializer data (or folded constant)
  bool is_graph_input = false;
  bool is_graph_output = false;
  bool has_value_info = false;  // shape/type came from (or goes to) value_info

  bool is_const() const { return const_data != nullptr; }
  size_t num_uses() const { return uses.size(); }
  // Consumers, each node once.
  std::vector<Node*> consumers() const;
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" = default ONNX domain
  std::vector<Value*> inputs;   // nullptr for an omitted optional input
  std::vector<Value*> outputs;  // nullptr for an omitted optional output
  std::vector<Attribute> attrs;
  // Outer-scope values read inside subgraph attributes (If/Loop/Scan): they
  // count as uses so that DCE and fusion never remove them.
  std::vector<Value*> implicit_inputs;
  std::string doc_string;
  // NodeProto fields this build's ONNX classes do not know (IR 10: overload,
  // metadata_props, as the dynamo exporter writes), serialized as read so that
  // save writes them back.
  std::string unknown_fields;

  bool is(const char* op) const { return op_type == op && (domain.empty() || domain == "ai.onnx"); }
  Value* input(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs.size() ? outputs[i] : nullptr; }

  const Attribute* attr(const std::string& n) const;
  bool has_attr(const std::string& n) const { return attr(n) != nullptr; }
  int64_t attr_int(const std::string& n, int64_t dflt) const;
  float attr_float(const std::string& n, float dflt) const;
  std::string attr_string(const std::string& n, const std::string& dflt) const;
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(const std::string& n, std::vector<float> dflt = {}) const;
  void set_attr(Attribute a);  // insert or replace by name
  bool has_subgraph() const;
  std::string label() const;  // "op_type 'name'" for messages
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // --- metadata preserved across load/save ---------------------------------
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opset_imports;  // domain -> version
  std::string name;
  std::string model_shell;  // serialized ModelProto with its graph cleared
  std::string graph_shell;  // serialized GraphProto without nodes/io/init/value_info
  std::vector<std::string> functions;  // serialized FunctionProtos kept as-is
  std::string source_path;             // file it came from ("" if built in code)
  bool had_external_data = false;
  std::vector<std::string> external_files;  // side files the weights were read from
  // The files whose memory maps constants view (the loaded model's side
  // files; the scratch file of spilled constants).
  std::vector<std::shared_ptr<MappedFile>> weight_files;

  // --- constants that do not fit in memory -----------------------------------
  // From now on a new constant of at least `min_bytes` (a packed QKV weight,
  // a folded or converted one) is written to an unlinked scratch file in
  // `dir` and kept as a read-only view of it, not in memory; save_model
  // copies it file to file. The output's bytes do not change.
  void spill_constants_to(const std::string& dir, size_t min_bytes);
  // The one way a new constant's Tensor becomes graph data: spilled as above,
  // or shared in memory.
  TensorPtr store_constant(Tensor t);
  // Drops the pages of mapped weights that were read so far from the
  // process (passes read weights to pack or fold them; the file keeps them).
  void release_weight_pages() const;


  // --- values ----------------------------------------------------------------
  Value* find(const std::string& name) const;
  // Creates a value with exactly this name (throws if taken).
  Value* create_value(const std::string& name);
  // Creates a value named hint, or hint_1, hint_2... if taken.
  Value* fresh_value(const std::string& hint);
  std::string unique_name(const std::string& hint) const;
  Value* add_initializer(const std::string& hint, Tensor t);
  void rename_value(Value* v, const std::string& new_name);
  // Removes a value that has no producer and no uses.
  void erase_value(Value* v);

  std::vector<Value*> inputs;        // real inputs (initializers excluded)
  std::vector<Value*> outputs;
  std::vector<Value*> initializers;  // values with const_data, save order
  std::vector<Value*> all_values() const;

  // --- nodes -----------------------------------------------------------------
  const std::list<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t num_nodes() const { return nodes_.size(); }
  // Appends a node; outputs are created from out_names (fresh if taken).
  Node* add_node(const std::string& op_type, const std::string& domain,
                 const std::vector<Value*>& inputs, const std::vector<std::string>& out_names,
                 const std::string& name_hint = "");
  // Inserts before `pos` (nullptr = at the end).
  Node* insert_node_before(Node* pos, const std::string& op_type, const std::string& domain,
                           const std::vector<Value*>& inputs,
                           const std::vector<std::string>& out_names, const std::string& name_hint = "");
  void set_input(Node* n, size_t slot, Value* v);
  void add_implicit_input(Node* n, Value* v);
  // Drops every implicit input of n (and its use records), e.g. before a rewritten
  // subgraph's outer reads are added again.
  void clear_implicit_inputs(Node* n);
  // Erases a node; its outputs must have no uses (they are removed too).
  void erase_node(Node* n);
  // Every use of `from` (and graph-output position) now reads `to`.
  void replace_all_uses(Value* from, Value* to);
  Node* find_node(const std::string& name) const;

  // The nodes with producers first (implicit inputs count; a producer that is
  // not a node of this graph does not), keeping the list's relative order
  // among nodes that are ready together: a sorted list comes back as it is.
  // The one topological sort: topo_sort() applies it, a Session runs in it,
  // shape inference walks it (OnCycle::Last: nodes on a cycle come last, in
  // list order, instead of an Error naming one of them).
  enum class OnCycle { Throw, Last };
  std::vector<Node*> topo_order(OnCycle on_cycle = OnCycle::Throw) const;
  // Reorders the node list into topo_order().
  void topo_sort();
  // Checks use lists, producers, that every input is produced, an initializer
  // or a graph input; throws Error on the first problem.
  void verify() const;

  std::map<std::string, int> op_counts() const;  // "op" or "domain.op" -> count
  int64_t opset(const std::string& domain = "") const;

 private:
  std::string unique_node_name(const std::string& hint);
  using NodeList = std::list<std::unique_ptr<Node>>;
  NodeList nodes_;
  // Where each node sits in nodes_, so inserting before and erasing a node are
  // O(1) (exports of large models have tens of thousands of nodes).
  std::unordered_map<const Node*, NodeList::iterator> node_pos_;
  std::unordered_map<std::string, std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, int> node_names_;
  // Creation order for determinism: sequence number -> value (O(log n) erase).
  std::map<uint64_t, Value*> value_order_;
  std::unordered_map<const Value*, uint64_t> value_seq_;
  uint64_t next_value_seq_ = 0;
  std::shared_ptr<ScratchFile> spill_;
  size_t spill_min_bytes_ = 0;
};

}  // namespace fuseopt
