#include "dot.h"

#include <set>
#include <sstream>
#include <vector>

namespace fuseopt {

namespace {

std::string esc(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    r += c;
  }
  return r;
}

// Pastel colours, assigned to patterns in order of first appearance.
const char* kPalette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                          "#b3de69", "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9"};

// "fuseopt AddRelu: Add+Relu" (written by Rewriter::mark_fused) -> origin.
bool origin_from_doc(const std::string& doc, FusedOrigin& o) {
  const std::string prefix = "fuseopt ";
  if (doc.rfind(prefix, 0) != 0) return false;
  size_t colon = doc.find(": ", prefix.size());
  if (colon == std::string::npos) return false;
  o.pattern = doc.substr(prefix.size(), colon - prefix.size());
  std::string ops = doc.substr(colon + 2);
  size_t start = 0;
  while (start <= ops.size()) {
    size_t plus = ops.find('+', start);
    if (plus == std::string::npos) plus = ops.size();
    if (plus > start) o.replaced_ops.push_back(ops.substr(start, plus - start));
    start = plus + 1;
  }
  return true;
}

}  // namespace

std::string graph_to_dot(const Graph& g, const std::map<std::string, FusedOrigin>& origins) {
  std::ostringstream os;
  os << "digraph \"" << esc(g.name.empty() ? "graph" : g.name) << "\" {\n";
  os << "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\"];\n";
  std::map<std::string, std::string> colour;
  std::map<const Node*, int> id;
  int next = 0;
  for (const auto& np : g.nodes()) id[np.get()] = next++;

  for (const Value* v : g.inputs)
    os << "  \"in:" << esc(v->name) << "\" [shape=ellipse, fillcolor=\"#eeeeee\", label=\"" << esc(v->name) << "\\n"
       << esc(shape_str(v->shape.value_or(Shape{}))) << "\"];\n";
  for (const Value* v : g.outputs)
    os << "  \"out:" << esc(v->name) << "\" [shape=ellipse, fillcolor=\"#eeeeee\", label=\"" << esc(v->name)
       << "\"];\n";

  for (const auto& np : g.nodes()) {
    const Node* n = np.get();
    FusedOrigin o;
    auto it = origins.find(n->name);
    bool fused = false;
    if (it != origins.end()) {
      o = it->second;
      fused = true;
    } else {
      fused = origin_from_doc(n->doc_string, o);
    }
    std::string op = n->domain.empty() ? n->op_type : n->domain + "." + n->op_type;
    os << "  n" << id[n] << " [label=\"" << esc(op) << "\\n" << esc(n->name);
    if (fused) {
      std::string ops;
      for (size_t i = 0; i < o.replaced_ops.size(); ++i) ops += (i ? "+" : "") + o.replaced_ops[i];
      if (!colour.count(o.pattern)) colour[o.pattern] = kPalette[colour.size() % (sizeof kPalette / sizeof *kPalette)];
      os << "\\n[" << esc(o.pattern) << ": " << esc(ops) << "]\", fillcolor=\"" << colour[o.pattern]
         << "\", penwidth=2];\n";
    } else {
      os << "\"];\n";
    }
  }

  for (const auto& np : g.nodes()) {
    const Node* n = np.get();
    std::set<const Value*> drawn;
    for (const Value* v : n->inputs) {
      if (!v || v->is_const() || !drawn.insert(v).second) continue;
      if (v->producer) os << "  n" << id[v->producer] << " -> n" << id[n];
      else if (v->is_graph_input) os << "  \"in:" << esc(v->name) << "\" -> n" << id[n];
      else continue;
      os << " [label=\"" << esc(v->name) << "\", fontsize=8];\n";
    }
  }
  for (const Value* v : g.outputs) {
    if (v->producer) os << "  n" << id[v->producer] << " -> \"out:" << esc(v->name) << "\";\n";
    else if (v->is_graph_input) os << "  \"in:" << esc(v->name) << "\" -> \"out:" << esc(v->name) << "\";\n";
  }
  if (!colour.empty()) {
    os << "  subgraph cluster_legend {\n    label=\"fused patterns\";\n";
    int k = 0;
    for (const auto& [pattern, c] : colour)
      os << "    legend" << k++ << " [label=\"" << esc(pattern) << "\", fillcolor=\"" << c << "\"];\n";
    os << "  }\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace fuseopt
