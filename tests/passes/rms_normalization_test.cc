// OnnxRMSNorm: ONNX's RMSNormalization (opset 23, the dynamo exporter's form of T5 / Llama norms)
// becomes fuseopt.RMSNorm, so the residual Add + norm becomes SkipLayerNorm and a norm read by a
// GEMM becomes LayerNormLinear, as for the primitive chain. Negative: a norm over more than the
// last axis (rule 6), statistics in float16 (stash_type, rule 5), a scale that is not a constant
// (rule 2). Every positive case runs both graphs on the CPU Session.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, K = 8, N = 6;

Value* rms(GraphBuilder& b, Value* x, Value* scale, std::vector<Attribute> attrs = {}) {
  attrs.push_back(Attribute::make_float("epsilon", 1e-6f));
  return b.op("RMSNormalization", {x, scale}, attrs, "rms");
}

std::map<std::string, Tensor> feeds() {
  return {{"x", rand_tensor({B, S, K}, 9, -2.0f, 3.0f)}, {"skip", rand_tensor({B, S, K}, 10, -1.0f, 1.0f)}};
}

}  // namespace

TEST_CASE("OnnxRMSNorm: RMSNormalization over the last axis -> fuseopt.RMSNorm", "[passes][RMSNorm]") {
  for (int64_t axis : {-1, 2}) {
    INFO("axis " << axis);
    GraphBuilder b(23);
    Value* x = b.input("x", DType::Float, {B, S, K});
    b.output(rms(b, x, b.constant("scale", rand_tensor({K}, 5, 0.5f, 2.0f)), {Attribute::make_int("axis", axis)}));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "OnnxRMSNorm");
    CHECK(matched(r, "OnnxRMSNorm") == 1);
    REQUIRE(b.graph().num_nodes() == 1);
    const Node* f = b.graph().nodes().front().get();
    CHECK(f->domain == "fuseopt");
    CHECK(f->op_type == "RMSNorm");
    CHECK(f->attr_float("epsilon", 0) == 1e-6f);
    std::map<std::string, Tensor> in = feeds();
    in.erase("skip");
    require_same_outputs(*before, b.graph(), in, 1e-5f);
  }
}

TEST_CASE("OnnxRMSNorm: a residual Add before it and a GEMM after it fuse as for the primitive chain",
          "[passes][RMSNorm][SkipLayerNorm][LayerNormLinear]") {
  GraphBuilder b(23);
  Value* x = b.input("x", DType::Float, {B, S, K});
  Value* skip = b.input("skip", DType::Float, {B, S, K});
  Value* sum = b.op("Add", {x, skip}, {}, "residual");
  Value* n = rms(b, sum, b.constant("scale", rand_tensor({K}, 5, 0.5f, 2.0f)));
  Value* y = b.op("MatMul", {n, b.constant("W", rand_tensor({K, N}, 6))}, {}, "proj");
  b.output(y);
  b.output(sum);  // the residual stream goes on
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"OnnxRMSNorm", "SkipLayerNorm", "FusedMatMul", "LayerNormLinear"});
  INFO(reasons(r, "LayerNormLinear"));
  CHECK(matched(r, "OnnxRMSNorm") == 1);
  CHECK(count_op(b.graph(), "RMSNormalization") == 0);
  CHECK(count_op(b.graph(), "LayerNormLinear") == 1);
  CHECK(count_op(b.graph(), "MatMul") == 0);
  require_same_outputs(*before, b.graph(), feeds(), 1e-5f);
}

TEST_CASE("OnnxRMSNorm legality: axis, stash_type, a scale that is not a constant", "[passes][RMSNorm][legality]") {
  SECTION("rule 6: normalised from axis 1 (two axes)") {
    GraphBuilder b(23);
    Value* x = b.input("x", DType::Float, {B, S, K});
    b.output(rms(b, x, b.constant("scale", rand_tensor({S, K}, 5)), {Attribute::make_int("axis", 1)}));
    FusionReport r = run_one_pass(b.graph(), "OnnxRMSNorm");
    CHECK(matched(r, "OnnxRMSNorm") == 0);
    CHECK_THAT(reasons(r, "OnnxRMSNorm"), Contains("rule 6"));
  }
  SECTION("rule 5: statistics in float16") {
    GraphBuilder b(23);
    Value* x = b.input("x", DType::Float, {B, S, K});
    b.output(rms(b, x, b.constant("scale", rand_tensor({K}, 5)), {Attribute::make_int("stash_type", 10)}));
    FusionReport r = run_one_pass(b.graph(), "OnnxRMSNorm");
    CHECK(matched(r, "OnnxRMSNorm") == 0);
    CHECK_THAT(reasons(r, "OnnxRMSNorm"), Contains("rule 5") && Contains("stash_type"));
  }
  SECTION("rule 2: the scale is a graph input") {
    GraphBuilder b(23);
    Value* x = b.input("x", DType::Float, {B, S, K});
    b.output(rms(b, x, b.input("scale", DType::Float, {K})));
    FusionReport r = run_one_pass(b.graph(), "OnnxRMSNorm");
    CHECK(matched(r, "OnnxRMSNorm") == 0);
    CHECK_THAT(reasons(r, "OnnxRMSNorm"), Contains("scale"));
  }
}
