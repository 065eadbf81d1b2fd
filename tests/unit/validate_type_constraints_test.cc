// Element types against the opset (src/onnx_io/validate_node.cc, type_constraint_problem): no
// operator of an opset takes an element type ONNX added in a later one.
#include <catch2/catch.hpp>

#include "onnx_io/validate_model.h"
#include "support/model_proto.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Contains;

TEST_CASE("validate: no operator takes an element type ONNX added in a later opset") {
  // mutate_models.py seed 40 m625: a FLOAT8E4M3FN input read by Shape at opset 18 passed (above
  // libonnx's opsets the type sets could not say it) and was written back; the float8s came
  // with opset 19, INT4/UINT4 with 21, FLOAT4E2M1 with 23.
  auto shape_of = [](int64_t opset, int elem) {
    auto m = model_proto(opset);
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    add_node(m, "Shape", {"x"}, {"y"}, "shape");
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    return m;
  };
  auto validate = [](const onnx::ModelProto& m) { validate_model(m, "m.onnx"); };
  REQUIRE_THROWS_WITH(validate(shape_of(18, 17)),
                      "m.onnx: node 'shape' (Shape, opset 18): input 0 'x' is FLOAT8E4M3FN, an element type ONNX's "
                      "operators take from opset 19 on; this is opset 18");
  CHECK_NOTHROW(validate(shape_of(19, 17)));
  CHECK_THROWS_WITH(validate(shape_of(19, 22)), Contains("is INT4, an element type ONNX's operators take from opset 21 on"));
  CHECK_NOTHROW(validate(shape_of(21, 22)));
  CHECK_NOTHROW(validate(shape_of(18, onnx::TensorProto::FLOAT16)));
}
