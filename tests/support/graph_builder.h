// Header-only helpers for pass tests: build a small graph in code (ONNX
// Runtime's ModelTestBuilder idea), copy it, run it on the CPU backend.
//
//   GraphBuilder b;                                    // default opset 17
//   Value* x = b.input("x", DType::Float, {2, 4});
//   Value* w = b.constant("w", Tensor::from_floats(...,{4, 3}));
//   Value* y = b.op("Relu", {b.op("MatMul", {x, w})});
//   b.output(y);
//   Graph& g = b.graph();
//   auto before = clone_graph(g);                      // an independent copy
//   ... run a pass on g ...
//   auto want = run_cpu(*before, {{"x", data}});
//   auto got = run_cpu(g, {{"x", data}});
//   FusionReport r = run_passes(g, {"AddRelu"});       // named passes to a fixed point
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnx_io/onnx_io.h"
#include "pass/pass_manager.h"
#include "runtime/session.h"

namespace fuseopt::test {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) : g_(std::make_unique<Graph>()) { g_->opset_imports[""] = opset; }

  Graph& graph() { return *g_; }
  std::unique_ptr<Graph> release() { return std::move(g_); }

  // A graph input; dims < 0 become symbols "d0", "d1"... unless `symbols` names them.
  Value* input(const std::string& name, DType dt, const std::vector<int64_t>& dims,
               const std::vector<std::string>& symbols = {}) {
    Value* v = g_->create_value(name);
    v->dtype = dt;
    Shape s;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0) s.push_back(Dim::of(dims[i]));
      else s.push_back(Dim::sym(i < symbols.size() ? symbols[i] : "d" + std::to_string(i)));
    }
    v->shape = s;
    v->is_graph_input = true;
    v->has_value_info = true;
    g_->inputs.push_back(v);
    return v;
  }
  Value* constant(const std::string& name, Tensor t) { return g_->add_initializer(name, std::move(t)); }
  Value* scalar(const std::string& name, float v) { return constant(name, Tensor::scalar_float(v)); }

  // A node; returns it (outputs named after `name` or the op).
  Node* node(const std::string& op, const std::vector<Value*>& inputs, int num_outputs = 1,
             std::vector<Attribute> attrs = {}, const std::string& domain = "", const std::string& name = "") {
    std::string base = name.empty() ? op : name;
    std::vector<std::string> outs;
    for (int i = 0; i < num_outputs; ++i) outs.push_back(g_->unique_name(base + "_y" + (i ? std::to_string(i) : "")));
    if (!domain.empty() && !g_->opset_imports.count(domain)) g_->opset_imports[domain] = 1;
    Node* n = g_->add_node(op, domain, inputs, outs, base);
    n->attrs = std::move(attrs);
    return n;
  }
  // A single-output node; returns its output value.
  Value* op(const std::string& op, const std::vector<Value*>& inputs, std::vector<Attribute> attrs = {},
            const std::string& name = "", const std::string& domain = "") {
    return node(op, inputs, 1, std::move(attrs), domain, name)->outputs[0];
  }
  void output(Value* v) {
    v->is_graph_output = true;
    g_->outputs.push_back(v);
  }

 private:
  std::unique_ptr<Graph> g_;
};

// An independent copy through the ONNX serializer (what save/load would do).
inline std::unique_ptr<Graph> clone_graph(const Graph& g) {
  return load_model_from_bytes(serialize_model(g), ".", "clone");
}

// Runs the graph on the CPU backend; outputs in graph-output order.
inline std::vector<Tensor> run_cpu(const Graph& g, const std::map<std::string, Tensor>& feeds) {
  SessionOptions o;
  o.backend = Backend::CPU;
  Session s(g, o);
  return s.run(feeds);
}

// Runs the named passes (PassManager semantics: to a fixed point, verify after
// each) and returns the report. run_passes(g, {"const_fold"}).pass("const_fold")->rewrites
// check_shapes = false skips the up-front strict shape inference, for graphs
// built inconsistent on purpose (MatMul dims that cannot meet, Add(FLOAT,
// DOUBLE), ...): what such a test checks is the pass's own refusal, which
// still guards --no-validate input.
inline FusionReport run_pass_manager(Graph& g, const std::vector<std::string>& names, PassOptions po,
                                     bool check_shapes) {
  PassManagerOptions o;
  o.only = names;
  o.pass_options = po;
  o.check_shapes = check_shapes;
  PassManager pm(o);
  FusionReport r;
  pm.run(g, r);
  return r;
}

inline FusionReport run_passes(Graph& g, const std::vector<std::string>& names, PassOptions po = {}) {
  return run_pass_manager(g, names, po, true);
}

inline FusionReport run_passes_unchecked(Graph& g, const std::vector<std::string>& names, PassOptions po = {}) {
  return run_pass_manager(g, names, po, false);
}

inline int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type == op;
  return n;
}

}  // namespace fuseopt::test
