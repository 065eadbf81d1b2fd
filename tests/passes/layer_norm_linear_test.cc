// LayerNormLinear: a norm whose output feeds only GEMMs (pre-LN blocks).
// LayerNormalization + FusedMatMul, RMSNorm + MatMul, SkipLayerNorm keeping
// its Sum output, several GEMM readers, GPT-2's [-1, K] flattening Reshape and
// Shape readers, the residual bias folded into the producing GEMM; legality
// rules 1, 2, 5, 6 with reasons.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t K = 8;

Node* fmm(GraphBuilder& b, Value* x, Value* w, Value* bias, const std::string& act = "none") {
  std::vector<Value*> in = {x, w};
  if (bias) in.push_back(bias);
  return b.node("FusedMatMul", in, 1,
                {Attribute::make_int("transB", 0), Attribute::make_float("alpha", 1.0f),
                 Attribute::make_string("activation", act)},
                "fuseopt");
}

Value* layer_norm(GraphBuilder& b, Value* x, int64_t axis = -1) {
  return b.op("LayerNormalization",
              {x, b.constant("gamma", rand_tensor({K}, 1, 0.5f, 1.5f)), b.constant("beta", rand_tensor({K}, 2))},
              {Attribute::make_int("axis", axis), Attribute::make_float("epsilon", 1e-5f)}, "ln");
}

std::map<std::string, Tensor> feeds() {
  return {{"x", rand_tensor({2, 3, K}, 7, -2, 2)}, {"skip", rand_tensor({2, 3, K}, 8, -1, 1)}};
}

}  // namespace

TEST_CASE("LayerNormLinear: LayerNormalization feeding one FusedMatMul with GELU", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x);
  b.output(fmm(b, y, b.constant("W", rand_tensor({K, 6}, 3)), b.constant("bias", rand_tensor({6}, 4)), "gelu")->outputs[0]);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(b.graph().nodes().front()->op_type == "LayerNormLinear");
  CHECK(b.graph().nodes().front()->attr_string("activation", "") == "gelu");
  require_same_outputs(*before, b.graph(), {{"x", feeds()["x"]}}, 1e-4f);
  CHECK(matched(run_one_pass(b.graph(), "LayerNormLinear"), "LayerNormLinear") == 0);  // idempotent
}

TEST_CASE("LayerNormLinear: RMSNorm feeding two plain MatMuls (each gets its own node)", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = b.op("RMSNorm", {x, b.constant("gamma", rand_tensor({K}, 1, 0.5f, 1.5f))},
                  {Attribute::make_float("epsilon", 1e-6f)}, "rms", "fuseopt");
  b.output(b.op("MatMul", {y, b.constant("W1", rand_tensor({K, 4}, 3))}));
  b.output(b.op("MatMul", {y, b.constant("W2", rand_tensor({K, 5}, 4))}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "LayerNormLinear") == 2);
  CHECK(count_domain_op(b.graph(), "fuseopt", "RMSNorm") == 0);
  require_same_outputs(*before, b.graph(), {{"x", feeds()["x"]}}, 1e-4f);
}

TEST_CASE("LayerNormLinear: SkipLayerNorm keeps the residual Sum; its bias folds into the GEMM",
          "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x0 = b.input("x", DType::Float, {2, 3, K});
  Value* skip = b.input("skip", DType::Float, {2, 3, K});
  Value* x = b.op("MatMul", {x0, b.constant("Wprev", rand_tensor({K, K}, 9))}, {}, "prev_gemm");
  Node* sln = b.node("SkipLayerNorm",
                     {x, skip, b.constant("gamma", rand_tensor({K}, 1, 0.5f, 1.5f)), b.constant("beta", rand_tensor({K}, 2)),
                      b.constant("rbias", rand_tensor({K}, 5))},
                     2, {Attribute::make_float("epsilon", 1e-5f), Attribute::make_int("rms", 0)}, "fuseopt");
  Value* g = fmm(b, sln->outputs[0], b.constant("W", rand_tensor({K, 6}, 3)), nullptr)->outputs[0];
  b.output(g);
  b.output(b.op("Add", {sln->outputs[1], b.constant("later", rand_tensor({K}, 6))}, {}, "residual_goes_on"));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  INFO(reasons(r, "LayerNormLinear"));
  CHECK(matched(r, "LayerNormLinear") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "SkipLayerNorm") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 0);  // the previous GEMM took the residual bias
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
}

TEST_CASE("LayerNormLinear: GPT-2 flattening Reshape and Shape readers", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x);
  Value* shp = b.op("Shape", {y});
  Value* flat = b.op("Reshape", {y, b.constant("flat", Tensor::from_ints({-1, K}, {2}))});
  Value* g = fmm(b, flat, b.constant("W", rand_tensor({K, 6}, 3)), b.constant("bias", rand_tensor({6}, 4)))->outputs[0];
  Value* back = b.op("Reshape", {g, b.op("Concat", {b.op("Slice", {shp, b.constant("s0", Tensor::from_ints({0}, {1})),
                                                                     b.constant("s1", Tensor::from_ints({2}, {1}))}),
                                                   b.constant("n", Tensor::from_ints({6}, {1}))},
                                             {Attribute::make_int("axis", 0)})});
  b.output(back);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  INFO(reasons(r, "LayerNormLinear"));
  CHECK(matched(r, "LayerNormLinear") == 1);
  CHECK(count_op(b.graph(), "LayerNormalization") == 0);
  require_same_outputs(*before, b.graph(), {{"x", feeds()["x"]}}, 1e-4f);
}

TEST_CASE("LayerNormLinear rule 1: the normalised value has a non-GEMM reader", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x);
  b.output(b.op("MatMul", {y, b.constant("W", rand_tensor({K, 4}, 3))}));
  b.output(b.op("Add", {y, x}, {}, "post_ln_residual"));
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 0);
  CHECK_THAT(reasons(r, "LayerNormLinear"), Contains("rule 1") && Contains("post_ln_residual"));
}

TEST_CASE("LayerNormLinear rule 2: a GEMM weight that is not a constant", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x);
  b.output(b.op("MatMul", {y, b.input("w_dyn", DType::Float, {K, 4})}));
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 0);
  CHECK_THAT(reasons(r, "LayerNormLinear"), Contains("rule 2"));
}

TEST_CASE("LayerNormLinear rule 6: a norm over a non-last axis", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x, 1);
  b.output(b.op("MatMul", {y, b.constant("W", rand_tensor({K, 4}, 3))}));
  FusionReport r = run_one_pass(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 0);
  CHECK_THAT(reasons(r, "LayerNormLinear"), Contains("rule 6"));
}

TEST_CASE("LayerNormLinear rule 5: weight dtype differs from the normalised input", "[passes][LayerNormLinear]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {2, 3, K});
  Value* y = layer_norm(b, x);
  b.output(b.op("MatMul", {y, b.constant("W16", Tensor(DType::Float16, {K, 4}))}));
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "LayerNormLinear");
  CHECK(matched(r, "LayerNormLinear") == 0);
  CHECK_THAT(reasons(r, "LayerNormLinear"), Contains("rule 5"));
}
