#include "tools/fuserun/compare_backends.h"

#include <cstdio>
#include <map>
#include <set>

#include "tools/fuserun/compare.h"

namespace fuseopt::fuserun {

namespace {

// Every node output (in graph order) becomes a graph output. Returns the
// producer of each graph output, aligned with the session's outputs: the
// model's own outputs first (their order is the session's), then the rest.
std::vector<const Node*> expose_intermediates(Graph& g) {
  g.topo_sort();
  std::vector<const Node*> who;
  for (const Value* v : g.outputs) who.push_back(v->producer);
  std::set<const Value*> already(g.outputs.begin(), g.outputs.end());
  for (const auto& n : g.nodes())
    for (Value* v : n->outputs) {
      if (!v || !already.insert(v).second) continue;
      g.outputs.push_back(v);
      v->is_graph_output = true;
      who.push_back(n.get());
    }
  return who;
}

}  // namespace

int compare_with_cpu(Graph& g, const std::map<std::string, Tensor>& inputs, const SessionOptions& device, double rtol,
                     int max_listed) {
  const size_t n_model_outputs = g.outputs.size();
  std::vector<const Node*> who = expose_intermediates(g);
  SessionOptions ref_o = device;
  ref_o.backend = Backend::CPU;
  ref_o.precision = Precision::FP32;
  ref_o.profile = false;
  SessionOptions dev_o = device;
  dev_o.profile = false;
  dev_o.cuda_graphs = false;  // one eager run: the kernels themselves are compared
  std::vector<Tensor> ref, got;
  {
    Session s(g, ref_o);
    ref = s.run(inputs);
  }
  Session s(g, dev_o);
  got = s.run(inputs);
  const std::vector<std::string> names = s.output_names();
  std::printf("compare-cpu: %s (%s) against the CPU reference (fp32), %zu node outputs in graph order, rtol %g\n",
              backend_name(dev_o.backend), precision_name(dev_o.precision), names.size(), rtol);
  // The model's outputs were listed first; walk the intermediates (graph
  // order) before them so the first report is the earliest node.
  std::vector<size_t> order;
  for (size_t i = n_model_outputs; i < names.size(); ++i) order.push_back(i);
  for (size_t i = 0; i < n_model_outputs && i < names.size(); ++i) order.push_back(i);
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < names.size(); ++i) index_of[names[i]] = i;
  int over = 0, listed = 0;
  for (size_t i : order) {
    if (i >= got.size() || i >= ref.size()) continue;
    OutputCheck c = compare(names[i], got[i], ref[i], 0.0, rtol);
    if (c.pass) continue;
    ++over;
    if (listed >= max_listed) continue;
    ++listed;
    const Node* n = i < who.size() ? who[i] : nullptr;
    std::printf("  %s node '%s' (%s) output '%s' %s: rel err %.3g, max abs %.3g%s%s\n",
                listed == 1 ? "FIRST" : "     ", n ? n->name.c_str() : "?", n ? n->op_type.c_str() : "?",
                names[i].c_str(), shape_str(got[i].dims).c_str(), c.rel, c.max_abs, c.note.empty() ? "" : "; ",
                c.note.c_str());
    if (listed == 1 && n) {
      // The inputs as they were at run time (exported values carry no shapes
      // in many TorchScript exports): from the reference run where exposed.
      for (const Value* in : n->inputs) {
        if (!in) continue;
        auto it = index_of.find(in->name);
        std::string desc;
        if (it != index_of.end()) desc = std::string(dtype_name(ref[it->second].dtype)) + " " + shape_str(ref[it->second].dims);
        else if (in->is_const() && in->const_data) desc = std::string(dtype_name(in->const_data->dtype)) + " " + shape_str(in->const_data->dims) + " (constant)";
        else if (auto f = inputs.find(in->name); f != inputs.end()) desc = std::string(dtype_name(f->second.dtype)) + " " + shape_str(f->second.dims) + " (graph input)";
        else desc = std::string(dtype_name(in->dtype)) + " " + (in->shape ? shape_str(*in->shape) : std::string("(rank unknown)"));
        std::printf("        input '%s' %s\n", in->name.c_str(), desc.c_str());
      }
    }
  }
  std::printf("compare-cpu: %d of %zu node outputs over tolerance%s\n", over, names.size(),
              over ? " (the first in graph order is the likely culprit)" : "");
  return over;
}

}  // namespace fuseopt::fuserun
