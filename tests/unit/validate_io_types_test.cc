// The load-time rules that keep a model ONNX's checker refuses from coming out
// of fuseopt as a model that is as invalid (found by fuzz/mutate_models.py):
// the main graph's input types, Constant's one value, the schema's type
// constraints over declared element types, and one-line messages whatever
// text the model quotes. Each rule: a valid neighbour passes, the broken one
// fails with its one line.
#include <catch2/catch.hpp>

#include "onnx_io/onnx_io.h"
#include "onnx_io/validate_model.h"
#include "support/model_proto.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Contains;

namespace {

void validate(const onnx::ModelProto& m) { validate_model(m, "m.onnx"); }

std::string message_of(const onnx::ModelProto& m) {
  try {
    validate(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

onnx::TypeProto_Tensor* typed(onnx::ValueInfoProto* vi, const std::string& name, int elem) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  return tt;
}

// A value_info entry declaring `name` as a tensor of `elem` (shape left out).
void declare(onnx::ModelProto& m, const std::string& name, int elem) {
  typed(m.mutable_graph()->add_value_info(), name, elem);
}

// A second graph input of `elem` [2, 3].
void add_input(onnx::ModelProto& m, const std::string& name, int elem) {
  auto* tt = typed(m.mutable_graph()->add_input(), name, elem);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  tt->mutable_shape()->add_dim()->set_dim_value(3);
}

onnx::ModelProto relu_model() {
  auto m = model_proto();
  add_node(m, "Relu", {"x"}, {"y"}, "relu");
  return m;
}

}  // namespace

TEST_CASE("messages: text from the model is escaped, so every message is one line") {
  CHECK(printable("a\nb\r\t\x01\x7f\\c") == "a\\nb\\r\\t\\x01\\x7f\\\\c");
  CHECK(printable("héllo /m/Gather_3") == "héllo /m/Gather_3");  // UTF-8 and punctuation stay
  CHECK(quoted("x\ny") == "'x\\ny'");
  // The last guard: an unescaped line break never reaches what().
  CHECK(std::string(Error("first\nsecond\r").what()) == "first\\nsecond\\r");

  auto m = model_proto();
  add_node(m, "Relu\nvalue*J", {"x"}, {"y"}, "/m/Constant_23\n");
  const std::string msg = message_of(m);
  CHECK(msg.find('\n') == std::string::npos);
  CHECK(msg == "m.onnx: node '/m/Constant_23\\n' (Relu\\nvalue*J, opset 17): Relu\\nvalue*J is not an ONNX operator");
  auto attr = relu_model();
  attr_int(attr.mutable_graph()->mutable_node(0), "al\npha", 1);
  CHECK_THAT(message_of(attr), Contains("attribute 'al\\npha' is not one of Relu's"));
}

TEST_CASE("validate: the main graph's inputs have a type, an element type and a shape field") {
  CHECK_NOTHROW(validate(relu_model()));  // y has no shape: outputs get theirs from inference
  auto symbolic = relu_model();
  symbolic.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_param("batch");
  CHECK_NOTHROW(validate(symbolic));
  auto scalar = relu_model();  // a shape field with no dims: a scalar, which is fine
  scalar.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->clear_dim();
  CHECK_NOTHROW(validate(scalar));

  auto untyped = relu_model();
  untyped.mutable_graph()->mutable_input(0)->clear_type();
  CHECK(message_of(untyped) == "m.onnx: graph input 'x': has no type");
  auto shapeless = relu_model();
  shapeless.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  CHECK_THAT(message_of(shapeless), Contains("graph input 'x': has no shape"));
  auto no_elem = relu_model();
  no_elem.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(0);
  CHECK(message_of(no_elem) == "m.onnx: graph input 'x': has no element type");
  auto seq = relu_model();
  seq.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type()->mutable_elem_type()
      ->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  CHECK_THAT(message_of(seq), Contains("graph input 'x': is a sequence whose element has no shape"));
  auto empty_seq = relu_model();
  empty_seq.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  CHECK_THAT(message_of(empty_seq), Contains("graph input 'x': is a sequence without an element type"));

  // A well-formed sequence input is valid ONNX, but fuseopt's values are tensors: the loader says so.
  auto shaped_seq = relu_model();
  auto* et = shaped_seq.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type()->mutable_elem_type()
                 ->mutable_tensor_type();
  et->set_elem_type(onnx::TensorProto::FLOAT);
  et->mutable_shape();
  CHECK_NOTHROW(validate(shaped_seq));
  REQUIRE_THROWS_WITH(load_model_from_bytes(shaped_seq.SerializeAsString(), ".", "m.onnx"),
                      Contains("m.onnx: graph input 'x' is not a tensor"));
}

TEST_CASE("validate: a Constant has exactly one value attribute") {
  auto one = model_proto();
  attr_float(add_node(one, "Constant", {}, {"y"}, "c"), "value_float", 1.0f);
  CHECK_NOTHROW(validate(one));

  auto none = model_proto();
  add_node(none, "Constant", {}, {"y"}, "c");
  CHECK(message_of(none) == "m.onnx: node 'c' (Constant, opset 17): a Constant needs exactly one of value, "
                            "value_float(s), value_int(s), value_string(s), sparse_value; it has none");
  auto two = model_proto();
  auto* n = add_node(two, "Constant", {}, {"y"}, "c");
  attr_float(n, "value_float", 1.0f);
  attr_int(n, "value_int", 1);
  CHECK_THAT(message_of(two), Contains("(Constant, opset 17): a Constant needs exactly one value attribute; it has "
                                       "value_float, value_int"));
}

TEST_CASE("validate: declared element types against the schema's type constraints") {
  // Gather's indices are Tind (int32, int64).
  auto gather = model_proto(14);
  add_input(gather, "ids", onnx::TensorProto::INT64);
  add_node(gather, "Gather", {"x", "ids"}, {"y"}, "embed");
  CHECK_NOTHROW(validate(gather));
  gather.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::FLOAT16);
  CHECK(message_of(gather) == "m.onnx: node 'embed' (Gather, opset 14): input 1 'ids' is FLOAT16, which Gather's "
                              "Tind does not allow (it allows INT32, INT64)");

  // Concat's inputs are all T: one type.
  auto cat = model_proto(18);
  add_input(cat, "z", onnx::TensorProto::FLOAT);
  attr_int(add_node(cat, "Concat", {"x", "z"}, {"y"}, "cat"), "axis", 0);
  CHECK_NOTHROW(validate(cat));
  cat.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  CHECK(message_of(cat) == "m.onnx: node 'cat' (Concat, opset 18): input 1 'z' is INT64 but input 0 'x' is FLOAT; "
                           "both are Concat's T, one type");

  // LayerNormalization's X and Y are both T (a value_info or graph output declares Y).
  auto ln = model_proto(17);
  add_initializer(ln, float_tensor("gamma", {3}, {1, 1, 1}));
  add_node(ln, "LayerNormalization", {"x", "gamma"}, {"y"}, "ln");
  CHECK_NOTHROW(validate(ln));
  ln.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::BFLOAT16);
  CHECK_THAT(message_of(ln), Contains("node 'ln' (LayerNormalization, opset 17): output 0 'y' is BFLOAT16 but input "
                                      "0 'x' is FLOAT; both are LayerNormalization's T"));

  // An intermediate's value_info counts too (Shape's output, T1: int64 only).
  auto shape = model_proto(17);
  add_node(shape, "Shape", {"x"}, {"s"}, "shape");
  attr_int(add_node(shape, "Cast", {"s"}, {"y"}, "cast"), "to", onnx::TensorProto::FLOAT);
  declare(shape, "s", onnx::TensorProto::INT64);
  CHECK_NOTHROW(validate(shape));
  shape.mutable_graph()->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT32);
  CHECK_THAT(message_of(shape), Contains("node 'shape' (Shape, opset 17): output 0 's' is INT32, which Shape's "
                                         "T1 does not allow (it allows INT64)"));
}

TEST_CASE("validate: Cast's 'to' is an ONNX element type") {
  auto ok = model_proto();
  attr_int(add_node(ok, "Cast", {"x"}, {"y"}, "cast"), "to", onnx::TensorProto::INT64);
  CHECK_NOTHROW(validate(ok));
  auto bad = model_proto();
  attr_int(add_node(bad, "Cast", {"x"}, {"y"}, "cast"), "to", 2147483647);
  CHECK(message_of(bad) ==
        "m.onnx: node 'cast' (Cast, opset 17): attribute 'to' is 2147483647, which is not an ONNX element type");
  auto zero = model_proto();
  attr_int(add_node(zero, "Cast", {"x"}, {"y"}, "cast"), "to", 0);
  CHECK_THAT(message_of(zero), Contains("attribute 'to' is 0, which is not an ONNX element type"));
}

TEST_CASE("validate: a value declared twice has one element type") {
  // fuzz/regressions/load_reload_declared_vs_inferred_dtype.onnx: value_info
  // declared 'add_24' INT64 and again FLOAT; the check read the first, the
  // loader the last, and the model fuseopt wrote out did not load again.
  auto m = model_proto(18);
  add_input(m, "z", onnx::TensorProto::FLOAT);
  add_node(m, "Add", {"x", "z"}, {"s"}, "add");
  add_node(m, "Relu", {"s"}, {"y"}, "relu");
  declare(m, "s", onnx::TensorProto::FLOAT);
  declare(m, "s", onnx::TensorProto::FLOAT);  // the same type twice is fine
  CHECK_NOTHROW(validate(m));
  auto twice = m;
  twice.mutable_graph()->mutable_value_info(1)->mutable_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  CHECK(message_of(twice) == "m.onnx: value_info 's': declares element type INT64, but another value_info declares "
                             "it FLOAT (a value has one type)");
  // A graph output and a value_info of it.
  auto out = model_proto(18);
  add_node(out, "Relu", {"x"}, {"y"}, "relu");
  declare(out, "y", onnx::TensorProto::INT64);
  CHECK(message_of(out) == "m.onnx: value_info 'y': declares element type INT64, but the graph output declares it "
                           "FLOAT (a value has one type)");
}

TEST_CASE("validate: integer formals keep their type above libonnx's opsets, domains of one version") {
  // Unsqueeze's axes is tensor(int64) at every opset (libonnx's row is opset 13's).
  auto ok = model_proto(18);
  add_input(ok, "axes", onnx::TensorProto::INT64);
  add_node(ok, "Unsqueeze", {"x", "axes"}, {"y"}, "unsq");
  CHECK_NOTHROW(validate(ok));
  auto bad = model_proto(18);
  add_node(bad, "Unsqueeze", {"x", "x"}, {"y"}, "unsq");
  CHECK_THAT(message_of(bad), Contains("(Unsqueeze, opset 18): input 1 'x' is FLOAT, which Unsqueeze's 'axes' does "
                                       "not allow (it takes INT64)"));
  // Split-18 (our table) takes its types from Split-13: split is tensor(int64).
  auto split = model_proto(18);
  add_node(split, "Split", {"x", "x"}, {"y", "z"}, "sp");
  CHECK_THAT(message_of(split), Contains("input 1 'x' is FLOAT, which Split's 'split' does not allow"));
  // A variable of one bool type too: Where's condition B (mutate_models.py seed 8 m246).
  auto where = model_proto(18);
  add_input(where, "c", onnx::TensorProto::UINT8);
  add_node(where, "Where", {"c", "x", "x"}, {"y"}, "w");
  CHECK_THAT(message_of(where), Contains("(Where, opset 18): input 0 'c' is UINT8, which Where's B does not allow "
                                         "(it allows BOOL)"));
  // ONNX Runtime has com.microsoft at version 1 only.
  auto ms = model_proto(17);
  add_node(ms, "Relu", {"x"}, {"y"}, "relu");
  import_opset(ms, "com.microsoft", 1);
  CHECK_NOTHROW(validate(ms));
  auto ms99 = model_proto(17);
  add_node(ms99, "Relu", {"x"}, {"y"}, "relu");
  import_opset(ms99, "com.microsoft", 99);
  CHECK(message_of(ms99) == "m.onnx: opset_import: domain 'com.microsoft' has version 99; it has version 1 only (ONNX "
                            "Runtime refuses any other)");
}

TEST_CASE("validate: a declaration of an initializer has its dims") {
  // mutate_models.py seeds 1, 2, 5 (m937, m842, m664, m550): an initializer's dims changed
  // under a value_info that kept the old shape; the loader took the value_info's.
  auto m = model_proto(17);
  add_initializer(m, float_tensor("b", {3}, {1, 2, 3}));
  add_node(m, "Add", {"x", "b"}, {"y"}, "add");
  auto* vi = m.mutable_graph()->add_value_info();
  typed(vi, "b", onnx::TensorProto::FLOAT)->mutable_shape()->add_dim()->set_dim_value(3);
  CHECK_NOTHROW(validate(m));
  auto sym = m;  // a symbol for a known dim is no contradiction
  sym.mutable_graph()->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_param("n");
  CHECK_NOTHROW(validate(sym));
  auto rank = m;
  rank.mutable_graph()->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()
      ->set_dim_value(1);
  CHECK(message_of(rank) == "m.onnx: value_info 'b': declares shape [3,1], but the initializer's dims are [3]");
  auto dim = m;
  dim.mutable_graph()->mutable_value_info(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)
      ->set_dim_value(4);
  CHECK(message_of(dim) == "m.onnx: value_info 'b': declares shape [4], but the initializer's dims are [3]");
}

TEST_CASE("validate: a float-only type variable stays float-only above libonnx's opsets") {
  // mutate_models.py seed 19 m189: an int64 X of LayerNormalization (T: float types; libonnx's
  // row is opset 17's) passed at opset 18 and came out invalid. Later opsets added float types
  // only (float8, float4) to such sets, so the float ones pass whatever the set says.
  auto ln = [](int elem) {
    auto m = model_proto(18);
    add_input(m, "xi", elem);
    add_input(m, "g", elem);
    add_node(m, "LayerNormalization", {"xi", "g"}, {"y"}, "ln");
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    return m;
  };
  CHECK_NOTHROW(validate(ln(onnx::TensorProto::FLOAT)));
  CHECK_NOTHROW(validate(ln(onnx::TensorProto::BFLOAT16)));
  CHECK(message_of(ln(onnx::TensorProto::INT64)) ==
        "m.onnx: node 'ln' (LayerNormalization, opset 18): input 0 'xi' is INT64, which LayerNormalization's T does "
        "not allow (it takes floating types only)");
  auto sm = model_proto(21);
  add_input(sm, "xi", onnx::TensorProto::INT32);
  add_node(sm, "Softmax", {"xi"}, {"y"}, "sm");
  CHECK_THAT(message_of(sm), Contains("input 0 'xi' is INT32, which Softmax's T does not allow (it takes floating types only)"));
  // A set with integers may have grown (int4 in Reshape-21): only one variable, one type there.
  auto rs = model_proto(21);
  add_input(rs, "xi", 22);  // INT4
  add_input(rs, "shape", onnx::TensorProto::INT64);
  add_node(rs, "Reshape", {"xi", "shape"}, {"r"}, "rs");
  add_node(rs, "Cast", {"r"}, {"y"}, "cast")->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(onnx::TensorProto::FLOAT);
    return a;
  }());
  CHECK(message_of(rs) == "");
}

TEST_CASE("validate: an integer-only type variable takes no float32/16/64 or bool above libonnx's opsets") {
  // mutate_models.py seed 20 m203/m210: Add -> Gather made a float tensor the indices (Tind:
  // int32, int64) at opset 18. Such sets gained integers and the float8/float4 of the
  // quantization ops since, nothing else.
  auto gather = [](int idx_type) {
    auto m = model_proto(18);
    add_input(m, "i", idx_type);
    add_node(m, "Gather", {"x", "i"}, {"y"}, "g");
    return m;
  };
  CHECK_NOTHROW(validate(gather(onnx::TensorProto::INT64)));
  CHECK(message_of(gather(onnx::TensorProto::FLOAT)) ==
        "m.onnx: node 'g' (Gather, opset 18): input 1 'i' is FLOAT, which Gather's Tind does not allow (it takes "
        "integer types)");
  CHECK_THAT(message_of(gather(onnx::TensorProto::BOOL)), Contains("input 1 'i' is BOOL"));
}
