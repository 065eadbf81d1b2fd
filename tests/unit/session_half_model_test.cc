// float16 / bfloat16 models on the CPU backend: computed in fp32 (constants
// converted once, half inputs on entry, outputs back to their declared dtype,
// Cast to the half type computes as FLOAT), and eval_node_cpu (constant
// folding) runs half nodes on the fp32 kernels with one rounding at the end.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/eval_node.h"
#include "runtime/session.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

Tensor half_tensor(DType d, const std::vector<float>& v, std::vector<int64_t> dims) {
  Tensor t(d, std::move(dims));
  for (size_t i = 0; i < v.size(); ++i)
    t.data<uint16_t>()[i] = d == DType::Float16 ? float_to_half(v[i]) : float_to_bf16(v[i]);
  return t;
}

float element(const Tensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::Float16: return half_to_float(t.data<uint16_t>()[i]);
    case DType::BFloat16: return bf16_to_float(t.data<uint16_t>()[i]);
    default: return t.data<float>()[i];
  }
}

// The value fp32 compute then one rounding to `d` gives.
float rounded(float v, DType d) {
  return d == DType::Float16 ? half_to_float(float_to_half(v)) : bf16_to_float(float_to_bf16(v));
}

}  // namespace

TEST_CASE("a float16/bfloat16 model runs on the CPU backend in fp32", "[session][fp16]") {
  for (DType d : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(d));
    GraphBuilder b;
    Value* x = b.input("x", d, {2, 3});
    Value* c = b.node("Constant", {}, 1, {Attribute::make_tensor("value", half_tensor(d, {0.5f, 1.5f, -2.f}, {3}))})
                   ->outputs[0];
    Value* a = b.op("Add", {x, c});
    Value* f = b.op("Cast", {a}, {Attribute::make_int("to", static_cast<int64_t>(DType::Float))});
    Value* m = b.op("Mul", {f, b.constant("three", Tensor::scalar_float(3.f))});  // a Float part
    Value* h = b.op("Cast", {m}, {Attribute::make_int("to", static_cast<int64_t>(d))});
    Value* q = b.op("ConstantOfShape", {b.op("Shape", {x})},
                    {Attribute::make_tensor("value", half_tensor(d, {0.25f}, {1}))});
    Value* s = b.op("Sqrt", {b.constant("seven", half_tensor(d, {7.f}, {}))});  // folded at creation
    Value* y = b.op("Mul", {b.op("Add", {h, q}), s});
    y->dtype = d;  // declared, as an exporter writes it
    b.output(y);
    m->dtype = DType::Float;
    b.output(m);
    b.output(x);

    Session sess(b.graph());
    const std::vector<float> xs = {0.1f, -1.3f, 2.7f, 100.3f, -0.01f, 7.77f};
    Tensor in = half_tensor(d, xs, {2, 3});
    std::vector<Tensor> out = sess.run({{"x", in}});
    REQUIRE(out.size() == 3);
    REQUIRE(out[0].dtype == d);
    REQUIRE(out[0].dims == std::vector<int64_t>{2, 3});
    REQUIRE(out[1].dtype == DType::Float);
    CHECK(out[2].bytes == in.bytes);  // an input returned as it came
    const float cs[3] = {0.5f, 1.5f, -2.f};
    // sqrt(7) folds in fp32 and rounds to the model's dtype once.
    const float sqrt7 = rounded(std::sqrt(7.f), d);
    for (int64_t i = 0; i < 6; ++i) {
      const float xi = element(in, i);
      const float ci = rounded(cs[i % 3], d);
      const float mi = (xi + ci) * 3.f;  // fp32 throughout: no rounding to half in between
      INFO("element " << i);
      CHECK(out[1].data<float>()[i] == mi);
      CHECK(element(out[0], i) == rounded((mi + 0.25f) * sqrt7, d));
    }
  }
}

TEST_CASE("a half model's input must still have its declared dtype", "[session][fp16]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float16, {2});
  b.output(b.op("Relu", {x}));
  Session s(b.graph());
  REQUIRE_THROWS_WITH(s.run({{"x", Tensor::from_floats({1, 2}, {2})}}),
                      Catch::Contains("'x'") && Catch::Contains("float16"));
  // --precision fp16 on the CPU backend is still refused, half model or not.
  SessionOptions o;
  o.precision = Precision::FP16;
  REQUIRE_THROWS_WITH(Session(b.graph(), o), Catch::Contains("fp16") && Catch::Contains("cpu"));
}

TEST_CASE("eval_node_cpu runs a half node on the fp32 kernel and rounds once", "[session][fp16]") {
  for (DType d : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(d));
    GraphBuilder b;
    Value* x = b.input("x", d, {3});
    Node* sq = b.node("Sqrt", {x});
    Node* div = b.node("Div", {x, x});
    Node* cast = b.node("Cast", {x}, 1, {Attribute::make_int("to", static_cast<int64_t>(d))});
    Tensor t = half_tensor(d, {2.f, 9.f, 0.3f}, {3});
    REQUIRE(has_cpu_kernel(*sq, {&t}));
    std::vector<Tensor> r = eval_node_cpu(*sq, {&t});
    REQUIRE(r[0].dtype == d);
    for (int64_t i = 0; i < 3; ++i) CHECK(element(r[0], i) == rounded(std::sqrt(element(t, i)), d));
    r = eval_node_cpu(*div, {&t, &t});
    REQUIRE(r[0].dtype == d);
    for (int64_t i = 0; i < 3; ++i) CHECK(element(r[0], i) == 1.f);
    r = eval_node_cpu(*cast, {&t});
    REQUIRE(r[0].dtype == d);
    CHECK(r[0].bytes == t.bytes);
  }
  // A half node whose op has no fp32 kernel either is still reported by name.
  GraphBuilder b;
  Value* x = b.input("x", DType::Float16, {1});
  Node* n = b.node("NoSuchOp", {x});
  Tensor h = half_tensor(DType::Float16, {1.f}, {1});
  CHECK(!has_cpu_kernel(*n, {&h}));
  REQUIRE_THROWS_WITH(eval_node_cpu(*n, {&h}), Catch::Contains("NoSuchOp"));
}
