// Small onnx::ModelProtos built in code, for the load-time validation tests:
// a valid model to start from, and helpers to add nodes, attributes and
// initializers, so each test states only the one thing it breaks.
#pragma once
#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace fuseopt::test {

// ir_version 8, default-domain opset `opset`, one float input x [2, 3], output y.
// The caller adds the nodes that produce y.
inline onnx::ModelProto model_proto(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"x"}) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
  }
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

inline void import_opset(onnx::ModelProto& m, const std::string& domain, int64_t version) {
  auto* op = m.add_opset_import();
  op->set_domain(domain);
  op->set_version(version);
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                                 std::vector<std::string> outs, const std::string& name = "", const std::string& domain = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  if (!domain.empty()) n->set_domain(domain);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}
inline onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> ins,
                                 std::vector<std::string> outs, const std::string& name = "", const std::string& domain = "") {
  return add_node(m.mutable_graph(), op, std::move(ins), std::move(outs), name, domain);
}

inline onnx::AttributeProto* attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
  return a;
}
inline onnx::AttributeProto* attr_float(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
  return a;
}
inline onnx::AttributeProto* attr_ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
  return a;
}
inline onnx::AttributeProto* attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
  return a;
}

// A float tensor with its values in raw_data.
inline onnx::TensorProto float_tensor(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}
inline onnx::TensorProto* add_initializer(onnx::ModelProto& m, const onnx::TensorProto& t) {
  auto* p = m.mutable_graph()->add_initializer();
  *p = t;
  return p;
}

}  // namespace fuseopt::test
