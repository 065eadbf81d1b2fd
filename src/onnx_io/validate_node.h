// Internal to the load-time validation (validate_model.cc walks graphs and
// functions, validate_node.cc checks one node): what both share.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class NodeProto;
class FunctionProto;
class AttributeProto;
}  // namespace onnx

namespace fuseopt::validation {

using OpsetMap = std::map<std::string, int64_t>;  // canonical domain -> version

struct Context {
  std::string label;  // the file, first in every message
  // Model-local functions by (canonical domain, name).
  std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions;
  // Nodes of domains without signatures, by (domain, op): reported once each.
  std::map<std::pair<std::string, std::string>, int> unchecked;
  std::vector<std::string> warnings;  // to print once the model passed (no duplicates)
  // Nodes whose op ONNX does not define ("node 'x' (Foo, opset 17)"): gathered
  // so that one error names every missing operator, not only the first.
  std::vector<std::string> unknown_ops;

  [[noreturn]] void fail(const std::string& where, const std::string& what) const;
  void warn_once(const std::string& text);
};

// Where a node's checks run: the opsets in force (the model's, or a function's
// own imports) and, inside a function body, the function (its attributes may
// be referenced).
// The tensor element types a graph declares (graph inputs and outputs,
// value_info, initializers), with its enclosing graphs' behind it.
struct DeclaredTypes {
  const DeclaredTypes* parent = nullptr;
  std::map<std::string, int> elem;  // name -> onnx::TensorProto::DataType (never 0)
  int find(const std::string& name) const {
    for (const DeclaredTypes* t = this; t; t = t->parent)
      if (auto it = t->elem.find(name); it != t->elem.end()) return it->second;
    return 0;
  }
};

struct Site {
  const OpsetMap* opsets = nullptr;
  const onnx::FunctionProto* function = nullptr;
  const DeclaredTypes* types = nullptr;  // nullptr in function bodies (no declared types)
  std::string scope;  // "" in the main graph; " in the then_branch of node 'If_0'", " in function ..."
};

// "node 'Softmax_3' (Softmax, opset 13)" (+ the scope); an unnamed node is "node #index".
std::string node_where(const onnx::NodeProto& n, int index, const Site& site);

// Checks one node: its op exists at the opset, its inputs/outputs/attributes
// fit the signature, its attributes are well-formed (value fields, tensors).
// Subgraph attributes are the caller's (validate_model.cc) to walk.
void validate_node(Context& ctx, const onnx::NodeProto& n, int index, const Site& site);

// "1", "1 to 3", "at least 1".
std::string count_range(int lo, int hi);

}  // namespace fuseopt::validation
