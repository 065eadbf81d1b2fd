// Header-only helpers for kernel tests: build a one-node Graph and run it
// with the CPU kernels (runtime/eval_node.h), or through a full Session.
//
//   #include "support/op_test.h"
//   using namespace fuseopt::test;
//
//   OpTest t("Add");                                   // op, optional domain
//   t.input("A", Tensor::from_floats({1, 2, 3}, {3}));
//   t.input("B", Tensor::from_floats({10}, {1}));       // broadcast
//   t.attr(Attribute::make_int("axis", -1));           // any attributes
//   t.omitted_input();                                 // skip an optional input slot
//   std::vector<Tensor> out = t.run();                 // eval_node_cpu, outputs NaN-poisoned first
//   expect_near(out[0], {11, 12, 13}, {3});           // values and shape, 1e-5 default
//
// Inputs are graph inputs unless declared with const_input() (an
// initializer), which matters only for run_session(). Outputs: the node
// declares `num_outputs` (default 1) outputs; set_outputs({"Y", ""}) to
// declare an omitted optional output.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/eval_node.h"
#include "runtime/session.h"

namespace fuseopt::test {

class OpTest {
 public:
  explicit OpTest(std::string op, std::string domain = "") : op_(std::move(op)), domain_(std::move(domain)) {}

  OpTest& input(const std::string& name, Tensor t) { return add(name, std::move(t), false); }
  OpTest& const_input(const std::string& name, Tensor t) { return add(name, std::move(t), true); }
  OpTest& omitted_input() {
    names_.push_back("");
    tensors_.push_back(Tensor());
    is_const_.push_back(false);
    return *this;
  }
  OpTest& attr(Attribute a) {
    attrs_.push_back(std::move(a));
    return *this;
  }
  OpTest& num_outputs(int n) {
    outputs_.clear();
    for (int i = 0; i < n; ++i) outputs_.push_back("out" + std::to_string(i));
    return *this;
  }
  // "" = omitted optional output.
  OpTest& set_outputs(std::vector<std::string> names) {
    outputs_ = std::move(names);
    return *this;
  }

  // Builds the graph (owned by this object; valid until the next build).
  Graph& graph() {
    g_ = std::make_unique<Graph>();
    Graph& g = *g_;
    g.opset_imports[""] = 18;
    if (!domain_.empty()) g.opset_imports[domain_] = 1;
    std::vector<Value*> ins;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i].empty()) { ins.push_back(nullptr); continue; }
      const Tensor& t = tensors_[i];
      Value* v;
      if (is_const_[i]) {
        v = g.add_initializer(names_[i], t);
      } else {
        v = g.create_value(names_[i]);
        v->dtype = t.dtype;
        Shape s;
        for (int64_t d : t.dims) s.push_back(Dim::of(d));
        v->shape = s;
        v->is_graph_input = true;
        g.inputs.push_back(v);
      }
      ins.push_back(v);
    }
    Node* n = g.add_node(op_, domain_, ins, outputs_, op_ + "_node");
    for (const Attribute& a : attrs_) n->set_attr(a);
    for (Value* o : n->outputs) {
      if (!o) continue;
      o->is_graph_output = true;
      g.outputs.push_back(o);
    }
    node_ = n;
    return g;
  }
  const Node& node() {
    graph();
    return *node_;
  }

  // One node through eval_node_cpu (the kernel alone).
  std::vector<Tensor> run() {
    graph();
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < names_.size(); ++i) ins.push_back(names_[i].empty() ? nullptr : &tensors_[i]);
    return eval_node_cpu(*node_, ins);
  }

  // The same graph through a Session (memory plan, shape binding).
  std::vector<Tensor> run_session(SessionOptions o = {}) {
    Graph& g = graph();
    std::map<std::string, Tensor> feeds;
    for (size_t i = 0; i < names_.size(); ++i)
      if (!names_[i].empty() && !is_const_[i]) feeds[names_[i]] = tensors_[i];
    Session s(g, o);
    return s.run(feeds);
  }

 private:
  OpTest& add(const std::string& name, Tensor t, bool c) {
    names_.push_back(name);
    tensors_.push_back(std::move(t));
    is_const_.push_back(c);
    return *this;
  }
  std::string op_, domain_;
  std::vector<std::string> names_;
  std::vector<Tensor> tensors_;
  std::vector<bool> is_const_;
  std::vector<Attribute> attrs_;
  std::vector<std::string> outputs_{"out0"};
  std::unique_ptr<Graph> g_;
  Node* node_ = nullptr;
};

// Tensor builders.
inline Tensor floats(std::vector<float> v, std::vector<int64_t> dims) { return Tensor::from_floats(v, std::move(dims)); }
inline Tensor ints(std::vector<int64_t> v, std::vector<int64_t> dims) { return Tensor::from_ints(v, std::move(dims)); }
inline Tensor int32s(std::vector<int32_t> v, std::vector<int64_t> dims) {
  Tensor t(DType::Int32, std::move(dims));
  REQUIRE(static_cast<int64_t>(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = v[i];
  return t;
}
inline Tensor bools(std::vector<int> v, std::vector<int64_t> dims) {
  Tensor t(DType::Bool, std::move(dims));
  REQUIRE(static_cast<int64_t>(v.size()) == t.numel());
  for (size_t i = 0; i < v.size(); ++i) t.data<uint8_t>()[i] = v[i] ? 1 : 0;
  return t;
}
// 0, 1, 2, ... scaled: handy deterministic data.
inline Tensor iota(std::vector<int64_t> dims, float scale = 1.0f, float offset = 0.0f) {
  Tensor t(DType::Float, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = offset + scale * static_cast<float>(i);
  return t;
}

// Checks dtype float32, shape and values (|got - want| <= atol + rtol*|want|; NaN fails).
inline void expect_near(const Tensor& got, const std::vector<float>& want, const std::vector<int64_t>& dims,
                        float atol = 1e-5f, float rtol = 1e-5f) {
  REQUIRE(got.dtype == DType::Float);
  REQUIRE(shape_str(got.dims) == shape_str(dims));
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    float g = got.data<float>()[i];
    INFO("element " << i << ": got " << g << ", want " << want[i]);
    CHECK(!std::isnan(g));
    CHECK(std::fabs(g - want[i]) <= atol + rtol * std::fabs(want[i]));
  }
}

// Checks any integer/bool dtype exactly (values read with Tensor::as_int).
inline void expect_ints(const Tensor& got, DType dtype, const std::vector<int64_t>& want,
                        const std::vector<int64_t>& dims) {
  REQUIRE(got.dtype == dtype);
  REQUIRE(shape_str(got.dims) == shape_str(dims));
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got.as_int(static_cast<int64_t>(i)) == want[i]);
  }
}

}  // namespace fuseopt::test
