// if_fold: an If whose condition is known (a constant, or a shape fact const
// folding turns into one) is replaced by its taken branch, outer-scope reads
// and branch initializers included; an If on data stays. Also If shape
// inference, which infers the branch bodies with the outer values bound.
//
// The models are written as ONNX protobuf (subgraphs are protobuf in the IR)
// and loaded like a file would be, so implicit inputs are set up by the loader.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/shape_inference.h"
#include "onnx_io/tensor_proto.h"
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs, const std::string& name) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

// dims: >= 0 known, otherwise the dim_param of the same index in `syms`.
void set_type(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::vector<int64_t> dims,
              std::vector<std::string> syms = {}) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (size_t i = 0; i < dims.size(); ++i) {
    auto* d = sh->add_dim();
    if (dims[i] >= 0) d->set_dim_value(dims[i]);
    else d->set_dim_param(syms.at(i));
  }
}

void add_float_init(onnx::GraphProto& g, const std::string& name, std::vector<float> v, std::vector<int64_t> dims) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float f : v) t->add_float_data(f);
}

void add_int_init(onnx::GraphProto& g, const std::string& name, std::vector<int64_t> v, std::vector<int64_t> dims) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
}

void add_bool_init(onnx::GraphProto& g, const std::string& name, bool v) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(v ? 1 : 0);
}

// A branch graph with one output `out` (declared with fresh dim names, as
// TorchScript does).
onnx::GraphProto branch(const std::string& name) {
  onnx::GraphProto g;
  g.set_name(name);
  return g;
}

void add_if(onnx::GraphProto& g, const std::string& cond, const std::string& out, const onnx::GraphProto& then_g,
            const onnx::GraphProto& else_g, const std::string& name) {
  onnx::NodeProto* n = add_node(g, "If", {cond}, {out}, name);
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = then_g;
  auto* b = n->add_attribute();
  b->set_name("else_branch");
  b->set_type(onnx::AttributeProto::GRAPH);
  *b->mutable_g() = else_g;
}

std::unique_ptr<Graph> load(const onnx::GraphProto& g) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  *m.mutable_graph() = g;
  return load_model_from_bytes(m.SerializeAsString(), ".", "if_fold_test");
}

// x: float [batch, 4]; w: [4] = {1, 2, 3, 4}; flag: bool [] (a graph input).
// known_true: If(Equal(Gather(Shape(x), 1), 4)) -> then: (x + w) * k, k = 2 a
//   branch initializer; else: x - w.
// known_false: If(false initializer) -> then: Neg(x); else: x itself (an outer
//   value returned unchanged), a graph output.
// on_data: If(flag) -> then: Relu(x); else: Neg(x).
onnx::GraphProto three_ifs() {
  onnx::GraphProto g;
  g.set_name("ifs");
  set_type(g.add_input(), "x", onnx::TensorProto::FLOAT, {-1, 4}, {"batch", ""});
  set_type(g.add_input(), "flag", onnx::TensorProto::BOOL, {});
  add_float_init(g, "w", {1, 2, 3, 4}, {4});
  add_int_init(g, "one", {1}, {});
  add_int_init(g, "four", {4}, {});
  add_bool_init(g, "no", false);
  add_node(g, "Shape", {"x"}, {"x_shape"}, "shape");
  add_node(g, "Gather", {"x_shape", "one"}, {"x_cols"}, "cols");
  add_node(g, "Equal", {"x_cols", "four"}, {"cols_is_4"}, "is4");

  onnx::GraphProto t1 = branch("then1");
  add_float_init(t1, "k", {2}, {});
  add_node(t1, "Add", {"x", "w"}, {"t1_sum"}, "t1_add");
  add_node(t1, "Mul", {"t1_sum", "k"}, {"t1_out"}, "t1_mul");
  set_type(t1.add_output(), "t1_out", onnx::TensorProto::FLOAT, {-1, -1}, {"fresh_0", "fresh_1"});
  onnx::GraphProto e1 = branch("else1");
  add_node(e1, "Sub", {"x", "w"}, {"e1_out"}, "e1_sub");
  set_type(e1.add_output(), "e1_out", onnx::TensorProto::FLOAT, {-1, -1}, {"fresh_2", "fresh_3"});
  add_if(g, "cols_is_4", "known_true", t1, e1, "if_known_true");
  add_node(g, "Relu", {"known_true"}, {"out1"}, "relu_after");

  onnx::GraphProto t2 = branch("then2");
  add_node(t2, "Neg", {"x"}, {"t2_out"}, "t2_neg");
  set_type(t2.add_output(), "t2_out", onnx::TensorProto::FLOAT, {-1, 4}, {"fresh_4", ""});
  onnx::GraphProto e2 = branch("else2");
  set_type(e2.add_output(), "x", onnx::TensorProto::FLOAT, {-1, 4}, {"fresh_5", ""});
  add_if(g, "no", "out2", t2, e2, "if_known_false");

  onnx::GraphProto t3 = branch("then3");
  add_node(t3, "Relu", {"x"}, {"t3_out"}, "t3_relu");
  set_type(t3.add_output(), "t3_out", onnx::TensorProto::FLOAT, {-1, 4}, {"fresh_6", ""});
  onnx::GraphProto e3 = branch("else3");
  add_node(e3, "Neg", {"x"}, {"e3_out"}, "e3_neg");
  set_type(e3.add_output(), "e3_out", onnx::TensorProto::FLOAT, {-1, 4}, {"fresh_7", ""});
  add_if(g, "flag", "out3", t3, e3, "if_on_data");

  set_type(g.add_output(), "out1", onnx::TensorProto::FLOAT, {-1, 4}, {"batch", ""});
  set_type(g.add_output(), "out2", onnx::TensorProto::FLOAT, {-1, 4}, {"batch", ""});
  set_type(g.add_output(), "out3", onnx::TensorProto::FLOAT, {-1, 4}, {"batch", ""});
  return g;
}

Tensor bool_scalar(bool v) {
  Tensor t(DType::Bool, {});
  t.bytes[0] = v ? 1 : 0;
  return t;
}

std::string sh(const Value* v) { return v && v->shape ? shape_str(*v->shape) : "none"; }

Tensor read_pb(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  onnx::TensorProto proto;
  REQUIRE(proto.ParseFromString(ss.str()));
  return tensor_from_proto(proto, p.parent_path().string(), p.string());
}

}  // namespace

TEST_CASE("if_fold: known conditions inline their branch, an If on data stays") {
  auto g = load(three_ifs());
  REQUIRE(count_op(*g, "If") == 3);
  FusionReport r = run_passes(*g, {"const_fold", "if_fold", "identity_elim", "dce"});
  const PassStats* s = r.pass("if_fold");
  REQUIRE(s);
  CHECK(s->rewrites == 2);
  CHECK(count_op(*g, "If") == 1);
  CHECK(g->find_node("if_on_data"));
  CHECK_FALSE(g->find_node("if_known_true"));
  CHECK_FALSE(g->find_node("if_known_false"));
  // The then branch of the first If: its Add and Mul (with the branch's own
  // initializer) are now in the outer graph; the else branch left no Sub.
  CHECK(count_op(*g, "Add") == 1);
  CHECK(count_op(*g, "Mul") == 1);
  CHECK(count_op(*g, "Sub") == 0);
  CHECK(count_op(*g, "Neg") == 0);  // only in the untaken branch and inside the kept If
  REQUIRE(g->outputs.size() == 3);
  CHECK(g->outputs[0]->name == "out1");
  CHECK(g->outputs[1]->name == "out2");  // x passed through: an Identity keeps the output's name
  CHECK(g->outputs[2]->name == "out3");
  REQUIRE_NOTHROW(g->verify());

  // Hand-computed: out1 = relu((x + w) * 2), out2 = x, out3 = relu(x) or -x.
  Tensor x = Tensor::from_floats({-3, 0.5f, -1, 2, 4, -5, 1, -4.5f}, {2, 4});
  const float w[4] = {1, 2, 3, 4};
  for (bool flag : {true, false}) {
    INFO("flag " << flag);
    SessionOptions o;
    o.backend = Backend::CPU;
    Session sess(*g, o);
    auto outs = sess.run({{"x", x}, {"flag", bool_scalar(flag)}});
    REQUIRE(outs.size() == 3);
    for (int64_t i = 0; i < 8; ++i) {
      const float xi = x.data<float>()[i];
      CHECK(outs[0].data<float>()[i] == Approx(std::max(0.0f, (xi + w[i % 4]) * 2)));
      CHECK(outs[1].data<float>()[i] == xi);
      CHECK(outs[2].data<float>()[i] == (flag ? std::max(0.0f, xi) : -xi));
    }
  }
}

TEST_CASE("if_fold: an If with a condition nothing proves is left alone") {
  // Only the data-dependent If, and a shape condition that is not provable
  // (batch == 4 for a symbolic batch).
  onnx::GraphProto g = three_ifs();
  for (auto& n : *g.mutable_node())
    if (n.name() == "cols") n.set_input(1, "zero");
  add_int_init(g, "zero", {0}, {});
  auto m = load(g);
  FusionReport r = run_passes(*m, {"const_fold", "if_fold"});
  CHECK(r.pass("if_fold")->rewrites == 1);  // only the constant false one
  CHECK(m->find_node("if_known_true"));      // batch == 4 is not known
  CHECK(m->find_node("if_on_data"));
  CHECK_FALSE(m->find_node("if_known_false"));
}

TEST_CASE("if_fold: both directions of a constant condition") {
  for (bool cond : {true, false}) {
    INFO("cond " << cond);
    onnx::GraphProto g;
    g.set_name("one_if");
    set_type(g.add_input(), "x", onnx::TensorProto::FLOAT, {2});
    add_bool_init(g, "c", cond);
    add_float_init(g, "w", {10, 20}, {2});
    onnx::GraphProto t = branch("then");
    add_node(t, "Add", {"x", "w"}, {"t_out"}, "t_add");
    set_type(t.add_output(), "t_out", onnx::TensorProto::FLOAT, {2});
    onnx::GraphProto e = branch("else");
    add_node(e, "Mul", {"x", "w"}, {"e_out"}, "e_mul");
    set_type(e.add_output(), "e_out", onnx::TensorProto::FLOAT, {2});
    add_if(g, "c", "y", t, e, "the_if");
    set_type(g.add_output(), "y", onnx::TensorProto::FLOAT, {2});
    auto m = load(g);
    run_passes(*m, {"if_fold"});
    CHECK(count_op(*m, "If") == 0);
    CHECK(count_op(*m, cond ? "Add" : "Mul") == 1);
    CHECK(count_op(*m, cond ? "Mul" : "Add") == 0);
    REQUIRE(m->outputs.size() == 1);
    CHECK(m->outputs[0]->name == "y");
    auto outs = run_cpu(*m, {{"x", Tensor::from_floats({1, 2}, {2})}});
    CHECK(outs[0].data<float>()[0] == (cond ? 11.0f : 10.0f));
    CHECK(outs[0].data<float>()[1] == (cond ? 22.0f : 40.0f));
  }
}

TEST_CASE("shape inference: If infers its branches with the outer values' shapes") {
  auto g = load(three_ifs());
  ShapeInferenceOptions o;
  o.reset = true;
  infer_shapes(*g, o);
  // Known condition: the taken branch's shapes, not its fresh declared names.
  CHECK(sh(g->find("known_true")) == "[batch,4]");
  CHECK(sh(g->find("out2")) == "[batch,4]");
  // Data-dependent condition: what both branches agree on.
  CHECK(sh(g->find("out3")) == "[batch,4]");
}

// DeBERTa-v2 TorchScript exports guard the relative positions with
// If(Not(Equal(query_len, key_len))): both are `seq`, so the cleanup passes
// prove it false and the else branch (the outer relative positions) remains.
// The result must still reproduce ONNX Runtime's reference outputs.
TEST_CASE("if_fold: DeBERTa-v2 TorchScript exports lose their Ifs and keep their outputs") {
  namespace fs = std::filesystem;
  for (const char* name : {"debertav2_op14_ts", "debertav2_op17_ts"}) {
    const fs::path dir = fs::path(FUSEOPT_SOURCE_DIR) / "models/exported" / name;
    if (!fs::exists(dir / "model.onnx")) continue;
    INFO(name);
    auto g = load_model((dir / "model.onnx").string());
    REQUIRE(count_op(*g, "If") == 2);
    FusionReport r = run_passes(*g, {"const_fold", "if_fold", "identity_elim", "cse", "dce"});
    CHECK(r.pass("if_fold")->rewrites == 2);
    CHECK(count_op(*g, "If") == 0);
    std::map<std::string, Tensor> feeds;
    for (size_t i = 0; i < g->inputs.size(); ++i)
      feeds[g->inputs[i]->name] = read_pb(dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"));
    auto outs = run_cpu(*g, feeds);
    REQUIRE(outs.size() == g->outputs.size());
    for (size_t o = 0; o < outs.size(); ++o) {
      Tensor want = read_pb(dir / "test_data_set_0" / ("output_" + std::to_string(o) + ".pb"));
      REQUIRE(shape_str(outs[o].dims) == shape_str(want.dims));
      double worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i)
        worst = std::max(worst, std::fabs(outs[o].as_double(i) - want.as_double(i)) / std::max(1.0, std::fabs(want.as_double(i))));
      CHECK(worst < 1e-4);
    }
  }
}
