// The strict shape inference PassManager runs over the model as loaded
// (PassManagerOptions::check_shapes): a contradiction ONNX's checker refuses
// too is one Error naming the node and op before any pass runs, where the
// optimizer used to write the model out as invalid as it came in. Its valid
// neighbour optimizes; check_shapes = false (--no-validate) lets it through.
#include <catch2/catch.hpp>

#include "onnx_io/onnx_io.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "support/model_proto.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Contains;

namespace {

// Loads m (validated) and runs every pass; "" when it went through, else the message.
std::string optimize(const onnx::ModelProto& m, bool check_shapes = true) {
  try {
    auto g = load_model_from_bytes(m.SerializeAsString(), ".", "m.onnx");
    PassManagerOptions o;
    o.check_shapes = check_shapes;
    PassManager pm(o);
    FusionReport r;
    pm.run(*g, r);
  } catch (const Error& e) {
    std::string msg = e.what();
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  return "";
}

void set_dims(onnx::ValueInfoProto* vi, std::vector<int64_t> dims) {
  auto* sh = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
  sh->clear_dim();
  for (int64_t d : dims) sh->add_dim()->set_dim_value(d);
}

void add_input(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims) {
  auto* in = m.mutable_graph()->add_input();
  in->set_name(name);
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  set_dims(in, dims);
}

}  // namespace

TEST_CASE("strict shapes: an axis out of range") {
  auto ok = model_proto();
  attr_int(add_node(ok, "Concat", {"x", "x"}, {"y"}, "cat"), "axis", -1);
  CHECK(optimize(ok) == "");
  auto bad = model_proto();
  attr_int(add_node(bad, "Concat", {"x", "x"}, {"y"}, "cat"), "axis", 5);
  CHECK(optimize(bad) == "shape inference: Concat 'cat': axis 5 is out of range for rank 2");
}

TEST_CASE("strict shapes: MatMul and broadcast dims that cannot meet, Gemm of rank 3") {
  auto ok = model_proto();
  add_input(ok, "w", {3, 4});
  add_node(ok, "MatMul", {"x", "w"}, {"y"}, "mm");
  CHECK(optimize(ok) == "");
  auto inner = model_proto();
  add_input(inner, "w", {4, 4});
  add_node(inner, "MatMul", {"x", "w"}, {"y"}, "mm");
  CHECK_THAT(optimize(inner), Contains("shape inference: MatMul 'mm': inner dimensions differ: [2,3] x [4,4]"));
  auto mul = model_proto();
  add_input(mul, "z", {2, 4});
  add_node(mul, "Mul", {"x", "z"}, {"y"}, "mul");
  CHECK_THAT(optimize(mul), Contains("shape inference: Mul 'mul': cannot broadcast [2,3] with [2,4]"));
  auto gemm = model_proto();
  add_input(gemm, "a", {2, 3, 4});
  add_input(gemm, "b", {4, 5});
  add_node(gemm, "Gemm", {"a", "b"}, {"y"}, "gemm");
  CHECK_THAT(optimize(gemm), Contains("shape inference: Gemm 'gemm': Gemm A must be 2-D"));
}

TEST_CASE("strict shapes: an inferred rank, dim or dtype against the declared one") {
  auto ok = model_proto();
  add_node(ok, "Relu", {"x"}, {"y"}, "relu");
  set_dims(ok.mutable_graph()->mutable_output(0), {2, 3});
  CHECK(optimize(ok) == "");
  auto rank = ok;
  set_dims(rank.mutable_graph()->mutable_output(0), {2, 3, 1});
  CHECK_THAT(optimize(rank), Contains("shape inference: Relu 'relu': output 'y': inferred [2,3] contradicts existing "
                                      "[2,3,1] (rank 2 vs 3)"));
  auto dim = ok;
  set_dims(dim.mutable_graph()->mutable_output(0), {2, 4});
  CHECK_THAT(optimize(dim), Contains("output 'y': inferred [2,3] contradicts existing [2,4]"));
  // Cast's output may be any type (T2), so only inference sees that int64 is not the declared float.
  auto cast = model_proto();
  attr_int(add_node(cast, "Cast", {"x"}, {"y"}, "cast"), "to", onnx::TensorProto::INT64);
  CHECK_THAT(optimize(cast), Contains("shape inference: Cast 'cast': output 'y': dtype"));

  // --no-validate: the contradiction is left to the passes (non-strict inference).
  CHECK(optimize(rank, /*check_shapes=*/false) == "");
}

TEST_CASE("strict shapes: a LayerNormalization scale that only broadcasts is ONNX-valid") {
  // ONNX's function body multiplies by broadcasting; the fusions refuse such a
  // scale (their rule), the up-front check does not.
  auto m = model_proto();
  add_initializer(m, float_tensor("gamma", {2, 1, 3}, {1, 1, 1, 1, 1, 1}));
  add_node(m, "LayerNormalization", {"x", "gamma"}, {"y"}, "ln");
  CHECK(optimize(m) == "");
  auto bad = model_proto();
  add_initializer(bad, float_tensor("gamma", {4}, {1, 1, 1, 1}));
  add_node(bad, "LayerNormalization", {"x", "gamma"}, {"y"}, "ln");
  CHECK_THAT(optimize(bad), Contains("shape inference: LayerNormalization 'ln': scale [4] does not broadcast with "
                                     "the input [2,3]"));
}

TEST_CASE("strict shapes: one type variable, one type, over inferred element types too") {
  // The load validation sees declared types only; Cast's output (T2: any
  // type) is known to inference alone. Add's A and B are both T.
  auto ok = model_proto(18);
  attr_int(add_node(ok, "Cast", {"x"}, {"c"}, "cast"), "to", onnx::TensorProto::FLOAT);
  add_node(ok, "Add", {"x", "c"}, {"y"}, "add");
  CHECK(optimize(ok) == "");
  auto bad = model_proto(18);
  attr_int(add_node(bad, "Cast", {"x"}, {"c"}, "cast"), "to", onnx::TensorProto::INT64);
  add_node(bad, "Add", {"x", "c"}, {"y"}, "add");
  CHECK(optimize(bad) ==
        "shape inference: Add 'add': input 1 'c' is INT64 but input 0 'x' is FLOAT; both are Add's T, one type");
  // A type the variable does not allow at all (MatMul's T has no INT16).
  auto mm = model_proto(17);
  add_input(mm, "w", {3, 4});
  attr_int(add_node(mm, "Cast", {"x"}, {"c"}, "cast"), "to", onnx::TensorProto::INT16);
  attr_int(add_node(mm, "Cast", {"w"}, {"w16"}, "cast_w"), "to", onnx::TensorProto::INT16);
  add_node(mm, "MatMul", {"c", "w16"}, {"m"}, "mm");
  attr_int(add_node(mm, "Cast", {"m"}, {"y"}, "back"), "to", onnx::TensorProto::FLOAT);
  CHECK_THAT(optimize(mm), Contains("shape inference: MatMul 'mm': input 0 'c' is INT16, which MatMul's T does not "
                                    "allow"));
  // --no-validate: left to the passes.
  CHECK(optimize(bad, /*check_shapes=*/false) == "");
}

TEST_CASE("strict shapes: Conv's kernel_shape fits the input, shape operands are 1-D") {
  auto conv = model_proto();
  add_input(conv, "img", {1, 2, 5, 5});
  add_input(conv, "w", {4, 2, 3, 3});
  add_node(conv, "Conv", {"img", "w"}, {"y"}, "conv");
  CHECK(optimize(conv) == "");
  auto empty = conv;
  attr_ints(empty.mutable_graph()->mutable_node(0), "kernel_shape", {});
  CHECK(optimize(empty) == "shape inference: Conv 'conv': kernel_shape has 0 entries; the input has 2 spatial dims");
  // Reshape's shape input of rank 2 (a graph input, so only its rank is known).
  auto reshape = model_proto();
  auto* s = reshape.mutable_graph()->add_input();
  s->set_name("s");
  s->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  s->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  s->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  add_node(reshape, "Reshape", {"x", "s"}, {"y"}, "reshape");
  CHECK(optimize(reshape) == "shape inference: Reshape 'reshape': the shape input must be a 1-D tensor; it has rank 2");
}

TEST_CASE("strict shapes: Transpose's perm has no negative entries, Concat no scalars") {
  // mutate_models.py seed 1: m836 (perm [0, -2, 3, 1]), m937 (a Concat input's dims cleared).
  auto ok = model_proto();
  attr_ints(add_node(ok, "Transpose", {"x"}, {"y"}, "tr"), "perm", {1, 0});
  CHECK(optimize(ok) == "");
  auto neg = model_proto();
  attr_ints(add_node(neg, "Transpose", {"x"}, {"y"}, "tr"), "perm", {-1, 0});
  CHECK(optimize(neg) == "shape inference: Transpose 'tr': perm entry -1 is not an axis of input [2,3]");
  auto scalar = model_proto();
  add_input(scalar, "s", {});
  attr_int(add_node(scalar, "Concat", {"s", "s"}, {"y"}, "cat"), "axis", 0);
  CHECK(optimize(scalar) == "shape inference: Concat 'cat': a scalar input: Concat's inputs have rank 1 or more");
}

TEST_CASE("strict shapes: a Conv window that does not fit the input, window attributes in range") {
  // mutate_models.py seed 3 m46: kernel_shape [2147483647, 3].
  auto conv = model_proto();
  add_input(conv, "img", {1, 2, 5, 5});
  add_input(conv, "w", {4, 2, 3, 3});
  add_node(conv, "Conv", {"img", "w"}, {"y"}, "conv");
  auto big = conv;
  attr_ints(big.mutable_graph()->mutable_node(0), "kernel_shape", {2147483647, 3});
  CHECK(optimize(big) == "shape inference: Conv 'conv': spatial axis 0: the window (kernel 2147483647, dilation 1) "
                         "does not fit the input's 5 plus pads 0");
  auto stride = conv;
  attr_ints(stride.mutable_graph()->mutable_node(0), "strides", {0, 1});
  CHECK(optimize(stride) == "shape inference: Conv 'conv': strides entry 0 is out of range [1, 2^31]");
}

TEST_CASE("strict shapes: keepdims is 0 or 1") {
  // mutate_models.py seed 6 m798/m829: ONNX reads keepdims = 2 as "drop", kernels as "keep".
  auto ok = model_proto();
  auto* r = add_node(ok, "ReduceMean", {"x"}, {"y"}, "rm");
  attr_ints(r, "axes", {1});
  attr_int(r, "keepdims", 0);
  CHECK(optimize(ok) == "");
  auto two = model_proto();
  auto* n = add_node(two, "ReduceMean", {"x"}, {"y"}, "rm");
  attr_ints(n, "axes", {1});
  attr_int(n, "keepdims", 2);
  CHECK(optimize(two) == "shape inference: ReduceMean 'rm': keepdims is 2; it is 0 or 1");
}

namespace {
onnx::NodeProto* int_constant(onnx::ModelProto& m, const std::string& out, std::vector<int64_t> dims,
                              std::vector<int64_t> values) {
  auto* n = add_node(m, "Constant", {}, {out}, out);
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : dims) a->mutable_t()->add_dims(d);
  for (int64_t v : values) a->mutable_t()->add_int64_data(v);
  return n;
}
}  // namespace

TEST_CASE("strict shapes: Range's operands are scalars") {
  // mutate_models.py seed 13 m189: Shape(start=2, end=-2) made an empty [0] start; folded to
  // an initializer, it made the written Range invalid.
  auto range = [](std::vector<int64_t> start_dims, std::vector<int64_t> start) {
    auto m = model_proto();
    int_constant(m, "s", start_dims, start);
    int_constant(m, "l", {}, {6});
    int_constant(m, "d", {}, {1});
    add_node(m, "Range", {"s", "l", "d"}, {"r"}, "range");
    attr_int(add_node(m, "Cast", {"r"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
    return m;
  };
  CHECK(optimize(range({}, {2})) == "");
  CHECK(optimize(range({1}, {2})) == "shape inference: Range 'range': start is [1]; it is a scalar");
  CHECK(optimize(range({0}, {})) == "shape inference: Range 'range': start is [0]; it is a scalar");
}

TEST_CASE("strict shapes: GatherND's batch_dims is below both ranks") {
  // mutate_models.py seed 14 m497: batch_dims = INT64_MAX overflowed (UBSan) before the check.
  auto gather = [](int64_t batch_dims) {
    auto m = model_proto();
    int_constant(m, "idx", {2, 1}, {0, 1});
    attr_int(add_node(m, "GatherND", {"x", "idx"}, {"y"}, "gnd"), "batch_dims", batch_dims);
    return m;
  };
  CHECK(optimize(gather(0)) == "");
  CHECK(optimize(gather(1)) == "");
  CHECK(optimize(gather(2)) ==
        "shape inference: GatherND 'gnd': batch_dims 2 is out of range [0, 1] for data [2,3] and indices [2,1]");
  CHECK(optimize(gather(INT64_MAX)) == "shape inference: GatherND 'gnd': batch_dims 9223372036854775807 is out of "
                                       "range [0, 1] for data [2,3] and indices [2,1]");
  CHECK(optimize(gather(-1)) ==
        "shape inference: GatherND 'gnd': batch_dims -1 is out of range [0, 1] for data [2,3] and indices [2,1]");
}

TEST_CASE("strict shapes: a Reshape -1 next to a product of 0 is refused") {
  // A batch of 0 (mutate_models.py's dims mutation): ONNX refuses a -1 when the other dims
  // multiply to 0. The input passed the checker (the target came from Shape arithmetic);
  // fuseopt folded the target into a constant, and the written model did not.
  auto reshape = [](std::vector<int64_t> x_dims, std::vector<int64_t> target) {
    auto m = model_proto();
    set_dims(m.mutable_graph()->mutable_input(0), x_dims);
    int_constant(m, "shape", {static_cast<int64_t>(target.size())}, target);
    add_node(m, "Reshape", {"x", "shape"}, {"y"}, "rs");
    return m;
  };
  CHECK(optimize(reshape({2, 3}, {0, -1})) == "");
  CHECK(optimize(reshape({0, 3}, {0, 3})) == "");
  CHECK(optimize(reshape({0, 3}, {-1, 3})) == "");  // the others' product is 3: -1 is 0
  CHECK(optimize(reshape({0, 3}, {0, -1})) ==
        "shape inference: Reshape 'rs': cannot reshape [0,3] to [0,-1]: the other dims' product is 0, so the -1 is "
        "not determined");
}

TEST_CASE("strict shapes: an integer Div by a constant 0 is refused") {
  // mutate_models.py seed 14 m208: Unsqueeze -> Div made its axes [0] the divisor; ONNX
  // Runtime refuses the model when it loads it ("Integer division by zero").
  auto div = [](std::vector<int64_t> b) {
    auto m = model_proto();
    int_constant(m, "a", {2}, {6, 8});
    int_constant(m, "b", {static_cast<int64_t>(b.size())}, b);
    add_node(m, "Div", {"a", "b"}, {"q"}, "div");
    attr_int(add_node(m, "Cast", {"q"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
    return m;
  };
  CHECK(optimize(div({2, 4})) == "");
  CHECK(optimize(div({2, 0})) == "shape inference: Div 'div': integer division by zero (B holds 0 at element 1)");
}

TEST_CASE("strict shapes: an If body output declared with another rank than it computes") {
  // mutate_models.py seed 17 m881: the outer x one rank up, the bodies' outputs still
  // declared with the old rank; ONNX's checker refuses it.
  auto with_if = [](std::vector<int64_t> then_dims) {
    auto m = model_proto();
    auto* cond = m.mutable_graph()->add_input();
    cond->set_name("cond");
    cond->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
    cond->mutable_type()->mutable_tensor_type()->mutable_shape();
    auto* n = add_node(m, "If", {"cond"}, {"y"}, "if");
    for (const char* which : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(which);
      a->set_type(onnx::AttributeProto::GRAPH);
      auto* g = a->mutable_g();
      g->set_name(which);
      const std::string out = std::string(which) + "_out";
      add_node(g, "Neg", {"x"}, {out}, std::string(which) + "_neg");
      auto* o = g->add_output();
      o->set_name(out);
      o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      set_dims(o, std::string(which) == "then_branch" ? then_dims : std::vector<int64_t>{2, 3});
    }
    return m;
  };
  CHECK(optimize(with_if({2, 3})) == "");
  CHECK(optimize(with_if({2})) == "shape inference: If 'if': then_branch output 0 is declared [2] but computes [2,3]");
}

TEST_CASE("strict shapes: a type contradiction inside an If branch") {
  // mutate_models.py seed 30 m398: an outer initializer read by a branch turned
  // int32, compared there with a float the branch computes (its type declared
  // nowhere, so the load-time check cannot see it); ONNX's checker refuses it.
  auto with_if = [](onnx::TensorProto::DataType limit_type) {
    auto m = model_proto();
    auto* cond = m.mutable_graph()->add_input();
    cond->set_name("cond");
    cond->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
    cond->mutable_type()->mutable_tensor_type()->mutable_shape();
    auto limit = float_tensor("limit", {}, {0.0f});
    limit.set_data_type(limit_type);  // the same 4 bytes as a float or an int32
    add_initializer(m, limit);
    auto* n = add_node(m, "If", {"cond"}, {"y"}, "if");
    for (const char* which : {"then_branch", "else_branch"}) {
      auto* a = n->add_attribute();
      a->set_name(which);
      a->set_type(onnx::AttributeProto::GRAPH);
      auto* g = a->mutable_g();
      g->set_name(which);
      const std::string w(which), out = w + "_out";
      add_node(g, "Neg", {"x"}, {w + "_neg"}, w + "_neg");
      add_node(g, "Greater", {w + "_neg", "limit"}, {w + "_gt"}, w + "_gt");
      add_node(g, "Where", {w + "_gt", "x", w + "_neg"}, {out}, w + "_where");
      auto* o = g->add_output();
      o->set_name(out);
      o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    }
    return m;
  };
  CHECK(optimize(with_if(onnx::TensorProto::FLOAT)) == "");
  CHECK(optimize(with_if(onnx::TensorProto::INT32)) ==
        "shape inference: If 'if': then_branch: Greater 'then_branch_gt': input 1 'limit' is INT32 but input 0 "
        "'then_branch_neg' is FLOAT; both are Greater's T, one type");
  CHECK(optimize(with_if(onnx::TensorProto::INT32), false) == "");
}
