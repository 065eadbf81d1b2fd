// Shape inference for Resize: constant scales and sizes, sizes computed from
// Shape(x) (symbolic), axes (opset 18), keep_aspect_ratio_policy, Resize-10
// (X, scales), and the kernel agreeing with the inferred shape.
#include <catch2/catch.hpp>

#include "ir/shape_inference.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
std::string sh(const Value* v) { return v->shape ? shape_str(*v->shape) : std::string("none"); }
Value* floats_c(GraphBuilder& b, const std::vector<float>& v) {
  return b.constant("f", Tensor::from_floats(v, {static_cast<int64_t>(v.size())}));
}
Value* ints_c(GraphBuilder& b, const std::vector<int64_t>& v) {
  return b.constant("i", Tensor::from_ints(v, {static_cast<int64_t>(v.size())}));
}
}  // namespace

TEST_CASE("Resize shape inference: scales, sizes, axes, keep_aspect_ratio_policy", "[shape][resize]") {
  GraphBuilder b(19);
  Value* x = b.input("x", DType::Float, {-1, 3, -1, -1}, {"n", "c", "h", "w"});
  Value* fixed = b.input("f", DType::Float, {2, 3, 7, 10});
  Value* sc = b.op("Resize", {fixed, nullptr, floats_c(b, {1, 1, 1.5f, 0.35f})});
  Value* sym_sc = b.op("Resize", {x, nullptr, floats_c(b, {1, 1, 2, 3})});
  Value* sz = b.op("Resize", {x, nullptr, nullptr, ints_c(b, {5, 6})}, {Attribute::make_ints("axes", {3, -2})});
  // Sizes from the input's own shape: [n, c, h*2, w*2].
  Value* shape = b.op("Shape", {x});
  Value* dyn = b.op("Resize", {x, nullptr, nullptr, b.op("Mul", {shape, ints_c(b, {1, 1, 2, 2})})});
  Value* not_larger = b.op("Resize", {fixed, nullptr, nullptr, ints_c(b, {20, 15})},
                           {Attribute::make_ints("axes", {2, 3}),
                            Attribute::make_string("keep_aspect_ratio_policy", "not_larger")});
  Value* not_smaller = b.op("Resize", {fixed, nullptr, nullptr, ints_c(b, {20, 15})},
                            {Attribute::make_ints("axes", {2, 3}),
                             Attribute::make_string("keep_aspect_ratio_policy", "not_smaller")});
  Value* keep_sym = b.op("Resize", {x, nullptr, nullptr, ints_c(b, {20, 15})},
                         {Attribute::make_ints("axes", {2, 3}),
                          Attribute::make_string("keep_aspect_ratio_policy", "not_larger")});
  Value* r10 = b.op("Resize", {fixed, floats_c(b, {1, 1, 0.6f, 2})});  // Resize-10 spelling
  infer_shapes(b.graph());
  CHECK(sh(sc) == "[2,3,10,3]");       // floor(7 * 1.5), floor(10 * 0.35)
  CHECK(sh(sym_sc) == "[n,3,h*2,w*3]");
  CHECK(sh(sz) == "[n,3,6,5]");  // axes [3, -2]
  CHECK(sh(dyn) == "[n,3,h*2,w*2]");
  CHECK(sh(not_larger) == "[2,3,11,15]");  // scale min(20/7, 1.5) = 1.5: 10.5 -> 11, 15
  CHECK(sh(not_smaller) == "[2,3,20,29]"); // scale 20/7: 20, 28.57 -> 29
  CHECK(sh(keep_sym) == "[n,3,?,?]");
  CHECK(sh(r10) == "[2,3,4,20]");
}

TEST_CASE("Resize: the kernel's output shape is the inferred one", "[shape][resize]") {
  GraphBuilder b(19);
  Value* x = b.input("x", DType::Float, {1, 2, 7, 10});
  Value* y = b.op("Resize", {x, nullptr, nullptr, ints_c(b, {20, 15})},
                  {Attribute::make_ints("axes", {2, 3}), Attribute::make_string("keep_aspect_ratio_policy", "not_smaller"),
                   Attribute::make_string("mode", "linear")});
  b.output(y);
  infer_shapes(b.graph());
  Tensor in(DType::Float, {1, 2, 7, 10});
  for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = static_cast<float>(i % 13);
  std::vector<Tensor> out = run_cpu(b.graph(), {{"x", in}});
  REQUIRE(out.size() == 1);
  CHECK(shape_str(out[0].dims) == "[1,2,20,29]");
  CHECK(sh(y) == "[1,2,20,29]");
}
