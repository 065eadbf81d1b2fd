// SkipLayerNorm fusion: residual Add (+ dense bias) before LayerNormalization,
// fuseopt.LayerNorm or fuseopt.RMSNorm; the Sum output when the residual
// stream goes on (pre-LN); legality rules 1, 2, 5, 6.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

struct SkipSpec {
  bool bias = true;
  bool residual_continues = false;  // the sum also feeds a later Add (pre-LN)
  bool bias_leaks = false;          // X + bias is read elsewhere too
  bool gamma_input = false;
  int64_t axis = -1;
  DType skip_dtype = DType::Float;
};

void build_skip(GraphBuilder& b, const SkipSpec& s) {
  Value* x = b.input("x", DType::Float, {2, 3, 8});
  Value* skip = b.input("skip", s.skip_dtype, {2, 3, 8});
  Value* xb = x;
  if (s.bias) xb = b.op("Add", {b.constant("bias", rand_tensor({8}, 21)), x}, {}, "bias_add");
  Value* sum = b.op("Add", {xb, skip}, {}, "residual");
  Value* gamma = s.gamma_input ? b.input("gamma", DType::Float, {8}) : b.constant("gamma", rand_tensor({8}, 22, 0.5f, 1.5f));
  Value* y = b.op("LayerNormalization", {sum, gamma, b.constant("beta", rand_tensor({8}, 23))},
                  {Attribute::make_int("axis", s.axis), Attribute::make_float("epsilon", 1e-5f)}, "ln");
  if (s.residual_continues) y = b.op("Add", {sum, b.op("Relu", {y})}, {}, "next_residual");
  b.output(y);
  if (s.bias_leaks) b.output(xb);
}

std::map<std::string, Tensor> feeds() {
  return {{"x", rand_tensor({2, 3, 8}, 31, -2.0f, 2.0f)}, {"skip", rand_tensor({2, 3, 8}, 32, -1.0f, 4.0f)}};
}

}  // namespace

TEST_CASE("SkipLayerNorm: bias + residual + LayerNormalization fuse into one node", "[passes][SkipLayerNorm]") {
  GraphBuilder b(17);
  build_skip(b, {});
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  const Node& n = *b.graph().nodes().front();
  CHECK(n.op_type == "SkipLayerNorm");
  CHECK(n.input(4) != nullptr);   // the bias was absorbed
  CHECK(n.outputs.size() == 1);  // nobody reads the sum
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("SkipLayerNorm: a GEMM's bias is left to FusedMatMul", "[passes][SkipLayerNorm]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {2, 3, 5});
  Value* skip = b.input("skip", DType::Float, {2, 3, 8});
  Value* p = b.op("MatMul", {a, b.constant("W", rand_tensor({5, 8}, 24))});
  Value* sum = b.op("Add", {b.op("Add", {p, b.constant("bias", rand_tensor({8}, 21))}), skip});
  b.output(b.op("LayerNormalization", {sum, b.constant("gamma", rand_tensor({8}, 22)), b.constant("beta", rand_tensor({8}, 23))},
                {Attribute::make_float("epsilon", 1e-5f)}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 1);
  CHECK(count_op(b.graph(), "Add") == 1);  // the bias Add stays for FusedMatMul
  run_one_pass(b.graph(), "FusedMatMul");
  CHECK(b.graph().num_nodes() == 2);
  CHECK(count_op(b.graph(), "FusedMatMul") == 1);
  require_same_outputs(*before, b.graph(), {{"a", rand_tensor({2, 3, 5}, 25)}, {"skip", rand_tensor({2, 3, 8}, 26)}});
}

TEST_CASE("SkipLayerNorm: pre-LN residual stream keeps the Sum output", "[passes][SkipLayerNorm]") {
  SkipSpec s;
  s.residual_continues = true;
  s.bias = false;
  GraphBuilder b(17);
  build_skip(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "SkipLayerNorm") == 1);
  CHECK(count_op(b.graph(), "LayerNormalization") == 0);
  CHECK(count_op(b.graph(), "Add") == 1);  // the next residual Add reads Sum
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "SkipLayerNorm") CHECK((n->outputs.size() == 2 && n->output(1)->num_uses() == 1));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("SkipLayerNorm: after the LayerNorm / RMSNorm fusions (fuseopt ops)", "[passes][SkipLayerNorm]") {
  for (const char* op : {"LayerNorm", "RMSNorm"}) {
    GraphBuilder b(14);
    Value* x = b.input("x", DType::Float, {4, 8});
    Value* skip = b.input("skip", DType::Float, {4, 8});
    Value* sum = b.op("Add", {x, skip});
    std::vector<Value*> in{sum, b.constant("gamma", rand_tensor({8}, 41, 0.5f, 1.5f))};
    if (std::string(op) == "LayerNorm") in.push_back(b.constant("beta", rand_tensor({8}, 42)));
    b.output(b.op(op, in, {Attribute::make_float("epsilon", 1e-6f)}, "", "fuseopt"));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
    CHECK(matched(r, "SkipLayerNorm") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(b.graph().nodes().front()->attr_int("rms", -1) == (std::string(op) == "RMSNorm" ? 1 : 0));
    require_same_outputs(*before, b.graph(),
                         {{"x", rand_tensor({4, 8}, 43)}, {"skip", rand_tensor({4, 8}, 44)}});
  }
}

TEST_CASE("SkipLayerNorm rule 1: the biased value is read elsewhere", "[passes][SkipLayerNorm][legality]") {
  SkipSpec s;
  s.bias_leaks = true;
  GraphBuilder b(17);
  build_skip(b, s);
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 0);
  CHECK(count_op(b.graph(), "LayerNormalization") == 1);
  CHECK_THAT(reasons(r, "SkipLayerNorm"), Contains("rule 1") && Contains("bias_add"));
}

TEST_CASE("SkipLayerNorm rule 2: gamma is not a constant", "[passes][SkipLayerNorm][legality]") {
  SkipSpec s;
  s.gamma_input = true;
  GraphBuilder b(17);
  build_skip(b, s);
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 0);
  CHECK_THAT(reasons(r, "SkipLayerNorm"), Contains("rule 2") && Contains("gamma"));
}

TEST_CASE("SkipLayerNorm rule 5: residual of another dtype", "[passes][SkipLayerNorm][legality]") {
  SkipSpec s;
  s.skip_dtype = DType::Double;
  GraphBuilder b(17);
  build_skip(b, s);
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 0);
  CHECK_THAT(reasons(r, "SkipLayerNorm"), Contains("rule 5"));
}

TEST_CASE("SkipLayerNorm rule 6: LayerNormalization from axis 1", "[passes][SkipLayerNorm][legality]") {
  SkipSpec s;
  s.axis = 1;
  GraphBuilder b(17);
  build_skip(b, s);
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 0);
  CHECK_THAT(reasons(r, "SkipLayerNorm"), Contains("rule 6"));
}

TEST_CASE("SkipLayerNorm rule 3: a bias that would broadcast the sum to more dims", "[passes][SkipLayerNorm][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {3, 8});
  Value* skip = b.input("skip", DType::Float, {3, 8});
  Value* xb = b.op("Add", {x, b.constant("bias4d", rand_tensor({1, 1, 1, 8}, 21))});
  b.output(b.op("LayerNormalization", {b.op("Add", {xb, skip}), b.constant("gamma", rand_tensor({8}, 22))},
                {Attribute::make_float("epsilon", 1e-5f)}));
  FusionReport r = run_one_pass(b.graph(), "SkipLayerNorm");
  CHECK(matched(r, "SkipLayerNorm") == 0);
  CHECK_THAT(reasons(r, "SkipLayerNorm"), Contains("rule 3") && Contains("bias4d"));
}
