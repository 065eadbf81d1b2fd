// A small helper to write the ONNX FunctionProto bodies of fuseopt ops
// (domain "fuseopt") in standard ONNX ops. Header-only; used by the files in
// src/onnx_io/functions/. Overloads (IR 10) are set through the unknown-field
// set because Debian's libonnx protobuf classes predate the field.
#pragma once
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "util/error.h"

namespace fuseopt::fnbody {

class FnBuilder {
 public:
  // `opset` is the default-domain opset the body's ops follow (the model's).
  // `elem` is the element type of the op's float tensors: before opset 15 (no
  // CastLike) scalar constants are Cast to it when it is not float32.
  FnBuilder(const std::string& op, const std::string& overload, std::vector<std::string> inputs,
            std::vector<std::string> outputs, std::vector<std::string> attributes, int64_t opset,
            DType elem = DType::Float)
      : opset_(opset), elem_(elem) {
    f_.set_name(op);
    f_.set_domain("fuseopt");
    for (auto& i : inputs) f_.add_input(i);
    for (auto& o : outputs) f_.add_output(o);
    for (auto& a : attributes) f_.add_attribute(a);
    auto* imp = f_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    if (!overload.empty()) f_.GetReflection()->MutableUnknownFields(&f_)->AddLengthDelimited(13, overload);
  }

  int64_t opset() const { return opset_; }

  // Adds a node; returns its first output (a fresh name unless `out` is given).
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& out = "",
                   std::vector<onnx::AttributeProto> attrs = {}) {
    auto* n = f_.add_node();
    n->set_op_type(op);
    for (auto& i : inputs) n->add_input(i);
    std::string o = out.empty() ? fresh(op) : out;
    n->add_output(o);
    for (auto& a : attrs) *n->add_attribute() = std::move(a);
    return o;
  }

  // Adds a node with `n_out` outputs (Split...); returns their fresh names.
  std::vector<std::string> node_outputs(const std::string& op, const std::vector<std::string>& inputs, int n_out,
                                        std::vector<onnx::AttributeProto> attrs = {}) {
    auto* n = f_.add_node();
    n->set_op_type(op);
    for (auto& i : inputs) n->add_input(i);
    std::vector<std::string> outs;
    for (int k = 0; k < n_out; ++k) {
      outs.push_back(fresh(op));
      n->add_output(outs.back());
    }
    for (auto& a : attrs) *n->add_attribute() = std::move(a);
    return outs;
  }

  // A float scalar constant with the dtype of `like` (CastLike from opset 15;
  // before that the body is written for float models only).
  std::string scalar(float v, const std::string& like) {
    onnx::AttributeProto a;
    a.set_name("value_float");
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(v);
    return typed(node("Constant", {}, "", {a}), like);
  }
  // A float scalar taken from the function's attribute `attr`.
  std::string scalar_attr(const std::string& attr, const std::string& like) {
    onnx::AttributeProto a;
    a.set_name("value_float");
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_ref_attr_name(attr);
    return typed(node("Constant", {}, "", {a}), like);
  }
  // An int64 1-D constant.
  std::string ints(const std::vector<int64_t>& v) {
    onnx::AttributeProto a;
    a.set_name("value_ints");
    a.set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a.add_ints(x);
    return node("Constant", {}, "", {a});
  }
  // ReduceMean over the last axis, keepdims=1 (axes as attribute before opset 18).
  std::string reduce_mean_last(const std::string& x, const std::string& out = "") {
    if (opset_ >= 18) return node("ReduceMean", {x, ints({-1})}, out);
    onnx::AttributeProto a;
    a.set_name("axes");
    a.set_type(onnx::AttributeProto::INTS);
    a.add_ints(-1);
    return node("ReduceMean", {x}, out, {a});
  }

  static onnx::AttributeProto attr_ref(const std::string& name, const std::string& ref,
                                       onnx::AttributeProto::AttributeType t) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(t);
    a.set_ref_attr_name(ref);
    return a;
  }
  static onnx::AttributeProto attr_int(const std::string& name, int64_t v) {
    onnx::AttributeProto a;
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(v);
    return a;
  }

  onnx::FunctionProto take() { return std::move(f_); }

 private:
  // A float32 constant in the element type of `like`.
  std::string typed(const std::string& c, const std::string& like) {
    if (opset_ >= 15) return node("CastLike", {c, like});
    if (elem_ == DType::Float || elem_ == DType::Undefined) return c;
    return node("Cast", {c}, "", {attr_int("to", static_cast<int64_t>(elem_))});
  }
  std::string fresh(const std::string& op) { return "_" + op + "_" + std::to_string(counter_++); }
  onnx::FunctionProto f_;
  int64_t opset_;
  DType elem_;
  int counter_ = 0;
};

// The element type a body is written for: the node's first input's dtype.
inline DType elem_type(const Node& n) {
  const Value* v = n.input(0);
  return v && v->dtype != DType::Undefined ? v->dtype : DType::Float;
}
// Overload suffix that separates bodies by element type where the body
// depends on it (opset < 15, non-float32): "" otherwise.
inline std::string dtype_suffix(const Graph& g, const Node& n) {
  const DType t = elem_type(n);
  if (g.opset("") >= 15 || t == DType::Float) return "";
  return std::string("_") + dtype_name(t);
}

// Emits one body per distinct overload among `nodes`, built by `build(node)`.
template <class Select, class Build>
void per_overload(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out,
                  Select select, Build build) {
  std::set<std::string> done;
  for (const Node* n : nodes) {
    std::string ov = select(g, *n);
    if (!done.insert(ov).second) continue;
    out.push_back(build(g, *n, ov));
  }
}

// The attribute names a node carries (a function declares those it accepts).
inline std::vector<std::string> attr_names(const Node& n) {
  std::vector<std::string> v;
  for (const auto& a : n.attrs) v.push_back(a.name);
  return v;
}

// act(x) in standard ONNX, named `y` ("" for a fresh name): the activations of FusedMatMul and
// LayerNormLinear (docs/fused_ops.md), each in the spelling its exports use. Unknown names are
// refused where the op is built, never silently left out.
inline std::string activation_body(FnBuilder& f, const std::string& act, const std::string& x, const std::string& y) {
  if (act == "relu") return f.node("Relu", {x}, y);
  if (act == "gelu") {  // 0.5 * x * (1 + erf(x / sqrt(2)))
    std::string e = f.node("Erf", {f.node("Div", {x, f.scalar(1.41421356237f, x)})});
    std::string one_plus = f.node("Add", {e, f.scalar(1.0f, x)});
    return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), one_plus}, y);
  }
  if (act == "gelu_tanh") {  // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
    std::string x3 = f.node("Mul", {f.node("Mul", {x, x}), x});
    std::string inner = f.node("Add", {x, f.node("Mul", {x3, f.scalar(0.044715f, x)})});
    std::string t = f.node("Tanh", {f.node("Mul", {inner, f.scalar(0.7978845608f, x)})});
    std::string one_plus = f.node("Add", {t, f.scalar(1.0f, x)});
    return f.node("Mul", {f.node("Mul", {x, f.scalar(0.5f, x)}), one_plus}, y);
  }
  if (act == "tanh") return f.node("Tanh", {x}, y);
  if (act == "relu2") {  // squared ReLU as r * r (the exports' Pow(r, 2) is the same square)
    std::string r = f.node("Relu", {x});
    return f.node("Mul", {r, r}, y);
  }
  if (act == "quick_gelu")  // x * sigmoid(1.702 * x), CLIP's spelling
    return f.node("Mul", {x, f.node("Sigmoid", {f.node("Mul", {x, f.scalar(1.702f, x)})})}, y);
  if (act == "silu") return f.node("Mul", {x, f.node("Sigmoid", {x})}, y);
  FUSE_CHECK(act == "none" || act.empty(), "function body: unknown activation '" << act << "'");
  return f.node("Identity", {x}, y);
}

}  // namespace fuseopt::fnbody
