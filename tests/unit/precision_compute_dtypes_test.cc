// node_in_compute_dtypes (src/runtime/precision.cc): the nodes whose attributes name a float dtype
// are rewritten for the compute precision (fp16/bf16 on a device), so that their outputs meet the
// other lowered floats.
#include <catch2/catch.hpp>

#include "runtime/precision.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using fuseopt::test::GraphBuilder;

namespace {

DType to_half(DType d) { return d == DType::Float ? DType::Float16 : d; }
DType keep(DType d) { return d; }

}  // namespace

TEST_CASE("ConstantOfShape without a value (ONNX's float32 0) computes in the compute dtype", "[precision]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Node* n = b.node("ConstantOfShape", {b.op("Shape", {x})});
  std::unique_ptr<Node> r = node_in_compute_dtypes(*n, to_half);
  REQUIRE(r);
  const Attribute* v = r->attr("value");
  REQUIRE(v);
  REQUIRE(v->t);
  CHECK(v->t->dtype == DType::Float16);
  CHECK(v->t->numel() == 1);
  CHECK(v->t->data<uint16_t>()[0] == 0);  // +0 in half
  // fp32 compute: nothing to change.
  CHECK_FALSE(node_in_compute_dtypes(*n, keep));
}

TEST_CASE("ConstantOfShape with an integer or float value", "[precision]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Node* ints = b.node("ConstantOfShape", {b.op("Shape", {x})}, 1,
                      {Attribute::make_tensor("value", Tensor::from_ints({7}, {1}))});
  CHECK_FALSE(node_in_compute_dtypes(*ints, to_half));  // int64 stays
  Node* floats = b.node("ConstantOfShape", {b.op("Shape", {x})}, 1,
                        {Attribute::make_tensor("value", Tensor::from_floats({0.25f}, {1}))});
  std::unique_ptr<Node> r = node_in_compute_dtypes(*floats, to_half);
  REQUIRE(r);
  CHECK(r->attr("value")->t->dtype == DType::Float16);
}
