// ResidualMatMul: the pre-LN residual Add moved into the GEMM producing one summand
// (FusedMatMul input 3). Positive: GPT-2's form (Gemm on a 2-D view, Reshape back, the residual
// Add into the next LayerNormLinear with its Sum read later), the GEMM as either summand, a plain
// constant-weight MatMul (Llama's bias-free projections),
// symbolic shapes, the RMS (Llama) LayerNormLinear, SkipLayerNorm with its Sum read (rms 0 at
// opsets 17 and 14, rms 1), a Sum that is a graph output, Shape readers of the summand, a pre-LN
// block from primitives through every pass. Negative, with the reason and unchanged numbers:
// the Sum unused (post-LN), the GEMM output read elsewhere, a broadcast [1, S, D] residual, a GEMM
// with an activation, unknown or unequal shapes, another dtype, a SkipLayerNorm bias, a Reshape
// changing the last dim.
#include "residual_matmul_graphs.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace fuseopt::test::residual_matmul;
using Catch::Matchers::Contains;

namespace {

Value* gamma(GraphBuilder& b) { return b.constant("gamma", rand_tensor({D}, 3, 0.5f, 1.5f)); }
Value* beta(GraphBuilder& b) { return b.constant("beta", rand_tensor({D}, 4)); }

// LayerNormLinear(x, gamma, beta?, W1, b1, skip) -> Y, Sum (rms: no beta).
Node* lnl(GraphBuilder& b, Value* x, Value* skip, bool rms = false, int outputs = 2) {
  return b.node("LayerNormLinear",
                {x, gamma(b), rms ? nullptr : beta(b), b.constant("W1", rand_tensor({D, F}, 5)),
                 b.constant("b1", rand_tensor({F}, 6)), skip},
                outputs,
                {Attribute::make_float("epsilon", 1e-5f), Attribute::make_int("rms", rms ? 1 : 0),
                 Attribute::make_int("transB", 0), Attribute::make_string("activation", "gelu")},
                "fuseopt", "ln_2");
}

// SkipLayerNorm(x, skip, gamma, beta?) -> Y, Sum.
Node* sln(GraphBuilder& b, Value* x, Value* skip, bool rms = false, Value* bias = nullptr, int outputs = 2) {
  return b.node("SkipLayerNorm", {x, skip, gamma(b), rms ? nullptr : beta(b), bias}, outputs,
                {Attribute::make_float("epsilon", 1e-5f), Attribute::make_int("rms", rms ? 1 : 0)}, "fuseopt",
                "ln_f");
}

// The residual stream goes on: read by an Add after the norm (as the next residual Add would).
void read_sum(GraphBuilder& b, Node* norm) {
  b.output(norm->outputs[0]);
  b.output(b.op("Add", {norm->outputs[1], b.constant("next", rand_tensor({1}, 9))}, {}, "next_residual"));
}

// GPT-2's attention out-projection: Gemm on the [B*S, K] view, Reshape back to [B, S, D].
Value* gpt2_out_proj(GraphBuilder& b, Value* a, Node** gemm = nullptr, const std::string& act = "none") {
  Value* a2 = b.op("Reshape", {a, b.constant("flat", Tensor::from_ints({-1, K}, {2}))}, {}, "view");
  Node* g = fmm(b, a2, b.constant("Wo", rand_tensor({K, D}, 1)), b.constant("bo", rand_tensor({D}, 2)), act);
  if (gemm) *gemm = g;
  return b.op("Reshape", {g->outputs[0], b.constant("unflat", Tensor::from_ints({B, S, D}, {3}))}, {}, "unview");
}

std::map<std::string, Tensor> feeds(std::vector<int64_t> r_dims = {B, S, D}) {
  return {{"a", rand_tensor({B, S, K}, 7, -2.0f, 2.0f)}, {"r", rand_tensor(std::move(r_dims), 8, -1.0f, 1.0f)}};
}

const Node* find(const Graph& g, const std::string& domain, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->domain == domain && n->op_type == op) return n.get();
  return nullptr;
}

// One match: the GEMM gets the residual, the norm has no skip and no Sum; same numbers.
void check_fuses(GraphBuilder& b, const std::map<std::string, Tensor>& in, int matches = 1) {
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), kPass);
  INFO(reasons(r, kPass));
  REQUIRE(matched(r, kPass) == matches);
  const Node* f = residual_gemm(b.graph());
  REQUIRE(f);
  CHECK(f->inputs.size() == 4);
  CHECK(count_domain_op(b.graph(), "fuseopt", "SkipLayerNorm") == 0);
  if (const Node* n = find(b.graph(), "fuseopt", "LayerNormLinear")) {
    CHECK(n->inputs.size() <= 5);
    CHECK(n->outputs.size() == 1);
  }
  check_exact_idempotent(*before, b.graph(), in);
}

}  // namespace

// ---- LayerNormLinear with skip ---------------------------------------------------------------------

TEST_CASE("ResidualMatMul: GPT-2's out-projection (Gemm view + Reshape) into the next LayerNormLinear",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Node* gemm = nullptr;
  Value* o = gpt2_out_proj(b, a, &gemm);
  Node* n = lnl(b, o, r);  // GPT-2: hidden = attn_out + residual
  read_sum(b, n);
  check_fuses(b, feeds());
  const Node* f = residual_gemm(b.graph());
  CHECK(f->input(3)->name == "r");  // [B, S, D] on the [B*S, D] GEMM: read row-major
  const Node* ln = find(b.graph(), "fuseopt", "LayerNormLinear");
  REQUIRE(ln);
  CHECK(ln->input(0)->producer->op_type == "Reshape");  // the Sum, now the Reshape of the GEMM output
  CHECK(ln->input(0)->producer->input(0) == f->output(0));
}

TEST_CASE("ResidualMatMul: the GEMM as the skip summand, symbolic shapes", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
  Value* r = b.input("r", DType::Float, {-1, -1, D}, {"batch", "seq"});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  read_sum(b, lnl(b, r, o));  // X = residual, skip = GEMM output
  check_fuses(b, feeds());
  CHECK(residual_gemm(b.graph())->input(2) == nullptr);  // no bias: the slot stays empty
}

TEST_CASE("ResidualMatMul: RMS LayerNormLinear (Llama), the Sum a graph output", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  Node* n = lnl(b, r, o, /*rms=*/true);
  b.output(n->outputs[0]);
  b.output(n->outputs[1]);
  const std::string sum_name = n->outputs[1]->name;
  check_fuses(b, feeds());
  // The graph output keeps its name, now the GEMM's output.
  CHECK(b.graph().outputs[1]->name == sum_name);
  CHECK(b.graph().outputs[1]->producer == residual_gemm(b.graph()));
}

TEST_CASE("ResidualMatMul: a plain MatMul (Llama's o_proj / down_proj, no bias) becomes the FusedMatMul",
          "[passes][ResidualMatMul]") {
  for (bool sln_root : {false, true}) {
    INFO((sln_root ? "SkipLayerNorm" : "LayerNormLinear"));
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
    Value* r = b.input("r", DType::Float, {-1, -1, D}, {"batch", "seq"});
    Value* o = b.op("MatMul", {a, b.constant("Wo", rand_tensor({K, D}, 1))}, {}, "o_proj");
    read_sum(b, sln_root ? sln(b, r, o, /*rms=*/true) : lnl(b, r, o, /*rms=*/true));
    check_fuses(b, feeds());
    const Node* f = residual_gemm(b.graph());
    CHECK(f->attr_string("activation", "") == "none");
    CHECK(f->attr_int("transB", 1) == 0);
    CHECK(f->input(2) == nullptr);
    CHECK(count_op(b.graph(), "MatMul") == 0);
  }
}

TEST_CASE("ResidualMatMul: Shape readers of the summand (GPT-2 TorchScript) read the Sum",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Node* gemm = nullptr;
  Value* o = gpt2_out_proj(b, a, &gemm);
  Node* n = lnl(b, o, r);
  read_sum(b, n);
  // The sizes feed an Expand (float outputs for the comparison).
  Value* one = b.scalar("one", 1.0f);
  b.output(b.op("Expand", {one, b.op("Shape", {o}, {}, "size")}));
  b.output(b.op("Expand", {one, b.op("Shape", {gemm->outputs[0]}, {}, "size2d")}));
  check_fuses(b, feeds());
}

// ---- SkipLayerNorm with its Sum read -----------------------------------------------------------------

TEST_CASE("ResidualMatMul: SkipLayerNorm (rms 0) becomes LayerNormalization at opset 17, LayerNorm at 14",
          "[passes][ResidualMatMul]") {
  for (int64_t opset : {17, 14}) {
    INFO("opset " << opset);
    GraphBuilder b(opset);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.input("r", DType::Float, {B, S, D});
    Value* o = gpt2_out_proj(b, a);
    read_sum(b, sln(b, o, r));
    check_fuses(b, feeds());
    if (opset >= 17) {
      REQUIRE(find(b.graph(), "", "LayerNormalization"));
      CHECK(find(b.graph(), "", "LayerNormalization")->attr_int("axis", 0) == -1);
    } else {
      CHECK(find(b.graph(), "fuseopt", "LayerNorm"));
    }
  }
}

TEST_CASE("ResidualMatMul: RMS SkipLayerNorm becomes RMSNorm", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), b.constant("bo", rand_tensor({D}, 2)))->outputs[0];
  read_sum(b, sln(b, r, o, /*rms=*/true));
  check_fuses(b, feeds());
  const Node* n = find(b.graph(), "fuseopt", "RMSNorm");
  REQUIRE(n);
  CHECK(n->inputs.size() == 2);
  CHECK(n->attr_float("epsilon", 0) == 1e-5f);
}

// ---- from primitives, every pass -----------------------------------------------------------------

TEST_CASE("ResidualMatMul: a pre-LN block from primitives through every pass", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {B, S, D});  // the residual stream entering the layer
  auto ln = [&](Value* v, const std::string& name, uint32_t seed) {
    return b.op("LayerNormalization",
                {v, b.constant(name + "_g", rand_tensor({D}, seed, 0.5f, 1.5f)),
                 b.constant(name + "_b", rand_tensor({D}, seed + 1))},
                {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, name);
  };
  auto linear = [&](Value* v, int64_t n_in, int64_t n_out, const std::string& name, uint32_t seed) {
    Value* p = b.op("MatMul", {v, b.constant(name + "_W", rand_tensor({n_in, n_out}, seed))}, {}, name);
    return b.op("Add", {p, b.constant(name + "_bias", rand_tensor({n_out}, seed + 1))}, {}, name + "_add");
  };
  // "attention" stand-in: ln_1 -> c_attn -> Tanh -> c_proj; residual Add; ln_2 -> MLP; residual Add; ln_f.
  Value* h = b.op("Tanh", {linear(ln(x, "ln_1", 10), D, D, "c_attn", 20)});
  Value* h1 = b.op("Add", {linear(h, D, D, "attn_c_proj", 30), x}, {}, "residual_1");
  Value* m = b.op("Relu", {linear(ln(h1, "ln_2", 40), D, F, "c_fc", 50)});
  Value* h2 = b.op("Add", {h1, linear(m, F, D, "mlp_c_proj", 60)}, {}, "residual_2");
  b.output(ln(h2, "ln_f", 70));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"cleanup", "fusion"});
  INFO(reasons(r, kPass));
  // ln_2 (LayerNormLinear with skip, Sum read by residual_2) takes attn_c_proj's residual; ln_f's
  // Sum is not read (the final norm): FusedMatMulLayerNorm has taken it with mlp_c_proj (post-LN form).
  CHECK(matched(r, kPass) == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMulLayerNorm") == 1);
  REQUIRE(residual_gemm(b.graph()));
  CHECK(residual_gemm(b.graph())->input(3)->name == "x");
  CHECK(count_op(b.graph(), "Add") == 0);
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, S, D}, 7, -2.0f, 2.0f)}}, 1e-5f);
}

// ---- rejected ---------------------------------------------------------------------------------

TEST_CASE("ResidualMatMul: Sum not read (post-LN, a final norm) is not a candidate", "[passes][ResidualMatMul]") {
  // Not a rejection either: every pre-LN model's final norm looks like this, and the report
  // would name one per model.
  auto check_left_alone = [](GraphBuilder& g) {
    auto before = clone_graph(g.graph());
    FusionReport r = run_one_pass(g.graph(), kPass);
    CHECK(matched(r, kPass) == 0);
    CHECK(reasons(r, kPass).empty());
    CHECK(residual_gemm(g.graph()) == nullptr);
    require_same_outputs(*before, g.graph(), feeds(), 0.0f);
  };
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = gpt2_out_proj(b, a);
  Node* n = lnl(b, o, r);
  b.output(n->outputs[0]);
  check_left_alone(b);
  GraphBuilder c(17);
  a = c.input("a", DType::Float, {B, S, K});
  r = c.input("r", DType::Float, {B, S, D});
  c.output(sln(c, gpt2_out_proj(c, a), r, false, nullptr, 1)->outputs[0]);
  check_left_alone(c);
}

TEST_CASE("ResidualMatMul: the GEMM output read elsewhere", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  read_sum(b, lnl(b, o, r));
  b.output(b.op("Relu", {o}, {}, "other_reader"));
  check_rejected(b, "rule 1", "is also read by Relu 'other_reader'", feeds());
}

TEST_CASE("ResidualMatMul: a broadcast [1, S, D] residual (position table)", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {1, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  read_sum(b, sln(b, o, r));
  check_rejected(b, "rule 3", "residual 'r' [1,3,8]", feeds({1, S, D}));
}

TEST_CASE("ResidualMatMul: a GEMM with an activation", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr, "gelu")->outputs[0];
  read_sum(b, lnl(b, o, r));
  check_rejected(b, "has activation 'gelu'", "out_proj", feeds());
}

TEST_CASE("ResidualMatMul: unknown or unequal shapes", "[passes][ResidualMatMul]") {
  SECTION("different symbols") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {-1, S, K}, {"batch"});
    Value* r = b.input("r", DType::Float, {-1, S, D}, {"other_batch"});
    Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
    read_sum(b, lnl(b, o, r));
    check_rejected(b, "rule 3", "is not provably of the shape of", feeds());
  }
  SECTION("unknown dims (a Reshape to a shape known only at run time)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.op("Reshape", {b.input("r", DType::Float, {B * S * D}), b.input("rs", DType::Int64, {3})}, {},
                    "runtime_view");
    Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
    read_sum(b, lnl(b, o, r));
    auto in = feeds({B * S * D});
    in["rs"] = Tensor::from_ints({B, S, D}, {3});
    check_rejected(b, "rule 3", "is not provably of the shape of", in);
  }
  SECTION("a Reshape that changes the last dim is no summand of the GEMM's rows") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.input("r", DType::Float, {B, S * 2, D / 2});
    Value* h = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
    Value* o = b.op("Reshape", {h, b.constant("split", Tensor::from_ints({B, S * 2, D / 2}, {3}))}, {}, "halves");
    Node* n = b.node("SkipLayerNorm",
                     {o, r, b.constant("g4", rand_tensor({D / 2}, 3, 0.5f, 1.5f))}, 2,
                     {Attribute::make_float("epsilon", 1e-5f), Attribute::make_int("rms", 0)}, "fuseopt", "ln_f");
    read_sum(b, n);
    check_rejected(b, "rule 4", "Reshape 'halves'", feeds({B, S * 2, D / 2}));
  }
}

TEST_CASE("ResidualMatMul: a residual of another dtype", "[passes][ResidualMatMul]") {
  // Not a valid graph to run (the norm's summands differ): the pass's own refusal.
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Double, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  read_sum(b, lnl(b, o, r));
  FusionReport rep = run_one_pass_unchecked(b.graph(), kPass);
  CHECK(matched(rep, kPass) == 0);
  CHECK(residual_gemm(b.graph()) == nullptr);
  CHECK_THAT(reasons(rep, kPass), Contains("rule 5") && Contains("dtypes differ"));
}

TEST_CASE("ResidualMatMul: a SkipLayerNorm with its own bias", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* o = fmm(b, a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr)->outputs[0];
  read_sum(b, sln(b, o, r, false, b.constant("sbias", rand_tensor({D}, 11))));
  check_rejected(b, "rule 3", "adds its own bias 'sbias'", feeds());
}

// ---- the other fusions leave a FusedMatMul with a residual alone -----------------------------------

TEST_CASE("ResidualMatMul: a FusedMatMul with a residual is no GEMM for LayerNormLinear or FusedMatMulLayerNorm",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, D});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* n = b.op("LayerNormalization", {a, gamma(b), beta(b)},
                  {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, "ln");
  Node* g = b.node("FusedMatMul", {n, b.constant("Wo", rand_tensor({D, D}, 1)), nullptr, r}, 1,
                   {Attribute::make_string("activation", "gelu")}, "fuseopt", "gemm");
  Value* y = b.op("LayerNormalization", {g->outputs[0], gamma(b), beta(b)},
                  {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, "ln_after");
  b.output(y);
  auto before = clone_graph(b.graph());
  FusionReport rep = run_passes(b.graph(), {"FusedMatMulLayerNorm", "LayerNormLinear", "QkvPack", kPass});
  CHECK(matched(rep, "FusedMatMulLayerNorm") == 0);
  CHECK(matched(rep, "LayerNormLinear") == 0);
  REQUIRE(residual_gemm(b.graph()));
  require_same_outputs(*before, b.graph(), {{"a", rand_tensor({B, S, D}, 7)}, {"r", rand_tensor({B, S, D}, 8)}},
                       0.0f);
}
