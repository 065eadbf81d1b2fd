// ResidualMatMul, second root form: a standard Add of a GEMM output (FusedMatMul without activation
// or residual, or a constant-weight MatMul; directly or through a Reshape keeping N) and a tensor of
// exactly its shape becomes FusedMatMul(A, W, bias?, residual). Positive: OPT's form (the Add on the
// [B*S, D] GEMM output, Reshaped before the norm), GPT-2's Gemm view with the Reshape before the Add,
// the parallel residual in both association orders (GPT-J / NeoX / Falcon / Phi / CodeGen), a plain
// MatMul, the GEMM as the Add's second operand, the Add's output a graph output, a parallel block from
// primitives through every pass. Negative, with the reason and unchanged numbers: broadcast operands
// (a [1, S, D] table, a [D] vector, a [B, S, D] residual on an [S, D] GEMM), the GEMM output read
// elsewhere, a GEMM with an activation, another dtype, unknown shapes; a GEMM that already has a
// residual (no candidate, no rejection).
#include "residual_matmul_graphs.h"

using namespace fuseopt;
using namespace fuseopt::test;
using namespace fuseopt::test::residual_matmul;
using Catch::Matchers::Contains;

namespace {

// A [K, D] GEMM with bias on `a` (seeds make the weights differ between projections).
Value* proj(GraphBuilder& b, Value* a, const std::string& name, uint32_t seed, const std::string& act = "none") {
  return fmm(b, a, b.constant(name + "_W", rand_tensor({K, D}, seed)), b.constant(name + "_b", rand_tensor({D}, seed + 1)),
             act, name)
      ->outputs[0];
}

// The common candidate: inputs a [B, S, K] and r [B, S, D]; Add(proj(a), r) a graph output.
// Returns the GEMM's output (tests add other readers of it).
Value* residual_add_on_proj(GraphBuilder& b, const std::string& act = "none") {
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* h = proj(b, a, "out_proj", 1, act);
  b.output(b.op("Add", {h, r}, {}, "residual_add"));
  return h;
}

Value* layer_norm(GraphBuilder& b, Value* v) {
  return b.op("LayerNormalization",
              {v, b.constant("gamma", rand_tensor({D}, 3, 0.5f, 1.5f)), b.constant("beta", rand_tensor({D}, 4))},
              {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)}, "norm");
}

std::map<std::string, Tensor> feeds(std::vector<int64_t> a_dims = {B, S, K}, std::vector<int64_t> r_dims = {B, S, D}) {
  return {{"a", rand_tensor(std::move(a_dims), 7, -2.0f, 2.0f)}, {"r", rand_tensor(std::move(r_dims), 8, -1.0f, 1.0f)}};
}

// `matches` Adds gone into GEMMs; no Add left unless `adds_left`; check_exact_idempotent.
// The rewrite's GEMM keeps the old one's name as a prefix ("attn_proj" -> "attn_proj_1").
bool named(const Node* n, const std::string& prefix) { return n && n->name.rfind(prefix, 0) == 0; }

void check_fuses(GraphBuilder& b, const std::map<std::string, Tensor>& in, int matches = 1, int adds_left = 0) {
  auto before = clone_graph(b.graph());
  const int adds = count_op(b.graph(), "Add");
  FusionReport r = run_one_pass(b.graph(), kPass);
  INFO(reasons(r, kPass));
  REQUIRE(matched(r, kPass) == matches);
  CHECK(reasons(r, kPass).empty());
  CHECK(static_cast<int>(residual_gemms(b.graph()).size()) == matches);
  CHECK(count_op(b.graph(), "Add") == adds - matches);
  CHECK(count_op(b.graph(), "Add") == adds_left);
  for (const Node* f : residual_gemms(b.graph())) {
    CHECK(f->inputs.size() == 4);
    CHECK(f->attr_string("activation", "") == "none");
  }
  check_exact_idempotent(*before, b.graph(), in);
}

}  // namespace

// ---- positive ------------------------------------------------------------------------------------

TEST_CASE("ResidualMatMul Add: OPT's form (Add on the [B*S, D] GEMM output, Reshape, then the norm)",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B * S, K});
  Value* r = b.input("r", DType::Float, {B * S, D});
  Value* h = proj(b, a, "out_proj", 1);
  Value* t = b.op("Add", {r, h}, {}, "residual_add");
  Value* t3 = b.op("Reshape", {t, b.constant("unflat", Tensor::from_ints({B, S, D}, {3}))}, {}, "unview");
  b.output(layer_norm(b, t3));
  check_fuses(b, feeds({B * S, K}, {B * S, D}));
  const Node* f = residual_gemms(b.graph())[0];
  CHECK(f->input(3)->name == "r");
  CHECK(f->input(2) != nullptr);  // the bias stays
  // The Reshape reads the GEMM's output now.
  CHECK(f->output(0)->uses.size() == 1);
  CHECK(f->output(0)->uses[0].node->op_type == "Reshape");
}

TEST_CASE("ResidualMatMul Add: GPT-2's Gemm view with the Reshape before the Add, symbolic shapes",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* a2 = b.op("Reshape", {a, b.constant("flat", Tensor::from_ints({-1, K}, {2}))}, {}, "view");
  Value* h = proj(b, a2, "c_proj", 1);
  Value* o = b.op("Reshape", {h, b.constant("unflat", Tensor::from_ints({B, S, D}, {3}))}, {}, "unview");
  b.output(b.op("Add", {o, r}, {}, "residual_add"));
  check_fuses(b, feeds());
  const Node* f = residual_gemms(b.graph())[0];
  CHECK(f->input(3)->name == "r");  // [B, S, D] on the [B*S, D] GEMM: read row-major
  REQUIRE(b.graph().outputs[0]->producer);
  CHECK(b.graph().outputs[0]->producer->op_type == "Reshape");
  CHECK(b.graph().outputs[0]->producer->input(0) == f->output(0));
}

TEST_CASE("ResidualMatMul Add: parallel residual x + attn + mlp, both association orders",
          "[passes][ResidualMatMul]") {
  SECTION("t = attn + x; y = t + mlp: each Add takes one GEMM") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
    Value* x = b.input("r", DType::Float, {-1, -1, D}, {"batch", "seq"});
    Value* t = b.op("Add", {proj(b, a, "attn_proj", 1), x}, {}, "add_attn");
    Value* y = b.op("Add", {t, proj(b, a, "mlp_proj", 11)}, {}, "add_mlp");
    b.output(layer_norm(b, y));
    b.output(y);  // the residual stream goes on
    const std::string y_name = y->name;
    check_fuses(b, feeds(), 2);
    auto fs = residual_gemms(b.graph());
    REQUIRE(fs.size() == 2);
    const Node* attn = named(fs[0], "attn_proj") ? fs[0] : fs[1];
    const Node* mlp = named(fs[0], "attn_proj") ? fs[1] : fs[0];
    CHECK(named(attn, "attn_proj"));
    CHECK(named(mlp, "mlp_proj"));
    CHECK(attn->input(3)->name == "r");
    CHECK(mlp->input(3) == attn->output(0));  // R = t, itself a residual GEMM
    CHECK(b.graph().outputs[1]->producer == mlp);
    CHECK(b.graph().outputs[1]->name == y_name);  // the graph output keeps its name
  }
  SECTION("u = attn + mlp (the HF exports); y = u + x: the first GEMM takes the other as residual") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* x = b.input("r", DType::Float, {B, S, D});
    Value* u = b.op("Add", {proj(b, a, "attn_proj", 1), proj(b, a, "mlp_proj", 11)}, {}, "add_branches");
    Value* y = b.op("Add", {u, x}, {}, "add_residual");
    b.output(y);
    check_fuses(b, feeds(), 1, /*adds_left=*/1);
    auto fs = residual_gemms(b.graph());
    REQUIRE(fs.size() == 1);
    CHECK(named(fs[0], "attn_proj"));
    REQUIRE(fs[0]->input(3)->producer);
    CHECK(named(fs[0]->input(3)->producer, "mlp_proj"));  // stays a plain GEMM
    CHECK(!fs[0]->input(3)->producer->input(3));
    CHECK(count_domain_op(b.graph(), "fuseopt", "FusedMatMul") == 2);
  }
  SECTION("both summands GEMMs, the first refused: the second takes the first as residual") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* attn = proj(b, a, "attn_proj", 1);
    Value* u = b.op("Add", {attn, proj(b, a, "mlp_proj", 11)}, {}, "add_branches");
    b.output(u);
    b.output(b.op("Relu", {attn}, {}, "other_reader"));  // attn_proj's output is read elsewhere
    check_fuses(b, {{"a", rand_tensor({B, S, K}, 7, -2.0f, 2.0f)}});
    CHECK(named(residual_gemms(b.graph())[0], "mlp_proj"));
  }
}

TEST_CASE("ResidualMatMul Add: a plain MatMul (no bias) as the Add's second operand", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {-1, -1, K}, {"batch", "seq"});
  Value* r = b.input("r", DType::Float, {-1, -1, D}, {"batch", "seq"});
  Value* o = b.op("MatMul", {a, b.constant("Wo", rand_tensor({K, D}, 1))}, {}, "o_proj");
  b.output(b.op("Add", {r, o}, {}, "residual_add"));
  check_fuses(b, feeds());
  const Node* f = residual_gemms(b.graph())[0];
  CHECK(f->attr_int("transB", 1) == 0);
  CHECK(f->input(2) == nullptr);  // no bias: the slot stays empty
  CHECK(f->input(3)->name == "r");
  CHECK(count_op(b.graph(), "MatMul") == 0);
}

TEST_CASE("ResidualMatMul Add: Shape readers of the GEMM output read the new GEMM", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* h = residual_add_on_proj(b);
  b.output(b.op("Expand", {b.scalar("one", 1.0f), b.op("Shape", {h}, {}, "size")}));
  check_fuses(b, feeds());
}

// ---- a parallel block from primitives, every pass ---------------------------------------------------

TEST_CASE("ResidualMatMul Add: a parallel-residual block from primitives through every pass",
          "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {B, S, D});
  auto linear = [&](Value* v, int64_t n_in, int64_t n_out, const std::string& name, uint32_t seed) {
    Value* p = b.op("MatMul", {v, b.constant(name + "_W", rand_tensor({n_in, n_out}, seed))}, {}, name);
    return b.op("Add", {p, b.constant(name + "_bias", rand_tensor({n_out}, seed + 1))}, {}, name + "_add");
  };
  Value* n = layer_norm(b, x);
  Value* attn = linear(b.op("Tanh", {linear(n, D, D, "qkv", 20)}), D, D, "out_proj", 30);
  Value* mlp = linear(b.op("Relu", {linear(n, D, F, "fc_in", 40)}), F, D, "fc_out", 50);
  // GPT-J: attn_output + feed_forward_hidden_states + residual.
  Value* y = b.op("Add", {b.op("Add", {attn, mlp}, {}, "add_branches"), x}, {}, "add_residual");
  b.output(y);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"cleanup", "fusion"});
  INFO(reasons(r, kPass));
  CHECK(matched(r, kPass) == 1);
  CHECK(reasons(r, kPass).empty());
  REQUIRE(residual_gemms(b.graph()).size() == 1);
  CHECK(count_op(b.graph(), "Add") == 1);  // x + (attn + mlp)
  require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, S, D}, 7, -2.0f, 2.0f)}}, 1e-5f);
}

// ---- no candidate ---------------------------------------------------------------------------------

TEST_CASE("ResidualMatMul Add: a GEMM that already has a residual gets no second one", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Float, {B, S, D});
  Value* r2 = b.input("r2", DType::Float, {B, S, D});
  Node* g = b.node("FusedMatMul", {a, b.constant("Wo", rand_tensor({K, D}, 1)), nullptr, r}, 1,
                   {Attribute::make_string("activation", "none")}, "fuseopt", "gemm");
  b.output(b.op("Add", {g->outputs[0], r2}, {}, "next_residual"));
  auto before = clone_graph(b.graph());
  FusionReport rep = run_one_pass(b.graph(), kPass);
  CHECK(matched(rep, kPass) == 0);
  CHECK(reasons(rep, kPass).empty());  // not a candidate: no rejection either
  CHECK(count_op(b.graph(), "Add") == 1);
  auto in = feeds();
  in["r2"] = rand_tensor({B, S, D}, 9);
  require_same_outputs(*before, b.graph(), in, 0.0f);
}

// ---- rejected ---------------------------------------------------------------------------------

TEST_CASE("ResidualMatMul Add: broadcast operands are bias, not residual", "[passes][ResidualMatMul]") {
  SECTION("a [1, S, D] table") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.input("r", DType::Float, {1, S, D});
    b.output(b.op("Add", {proj(b, a, "out_proj", 1), r}, {}, "pos_add"));
    check_rejected(b, "rule 3", "residual 'r' [1,3,8]", feeds({B, S, K}, {1, S, D}));
  }
  SECTION("a [D] vector (not a constant: no bias for FusedMatMul)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.input("r", DType::Float, {D});
    b.output(b.op("Add", {r, proj(b, a, "out_proj", 1)}, {}, "bias_add"));
    check_rejected(b, "rule 3", "residual 'r' [8]", feeds({B, S, K}, {D}));
  }
  SECTION("a [B, S, D] residual on an [S, D] GEMM output (the GEMM side would broadcast)") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {S, K});
    Value* r = b.input("r", DType::Float, {B, S, D});
    b.output(b.op("Add", {proj(b, a, "out_proj", 1), r}, {}, "bcast_add"));
    check_rejected(b, "rule 3", "is not provably of the shape of", feeds({S, K}, {B, S, D}));
  }
}

TEST_CASE("ResidualMatMul Add: the GEMM output read elsewhere", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* h = residual_add_on_proj(b);
  b.output(b.op("Relu", {h}, {}, "other_reader"));
  check_rejected(b, "rule 1", "is also read by Relu 'other_reader'", feeds());
}

TEST_CASE("ResidualMatMul Add: the GEMM output a graph output", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  Value* h = residual_add_on_proj(b);
  b.output(h);
  check_rejected(b, "rule 1", "is a graph output", feeds());
}

TEST_CASE("ResidualMatMul Add: a GEMM with an activation", "[passes][ResidualMatMul]") {
  GraphBuilder b(17);
  residual_add_on_proj(b, "gelu");
  check_rejected(b, "has activation 'gelu'", "out_proj", feeds());
}

TEST_CASE("ResidualMatMul Add: unknown or unequal shapes", "[passes][ResidualMatMul]") {
  SECTION("different symbols") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {-1, S, K}, {"batch"});
    Value* r = b.input("r", DType::Float, {-1, S, D}, {"other_batch"});
    b.output(b.op("Add", {proj(b, a, "out_proj", 1), r}, {}, "residual_add"));
    check_rejected(b, "rule 3", "is not provably of the shape of", feeds());
  }
  SECTION("a residual whose shape is known only at run time") {
    GraphBuilder b(17);
    Value* a = b.input("a", DType::Float, {B, S, K});
    Value* r = b.op("Reshape", {b.input("r", DType::Float, {B * S * D}), b.input("rs", DType::Int64, {3})}, {},
                    "runtime_view");
    b.output(b.op("Add", {proj(b, a, "out_proj", 1), r}, {}, "residual_add"));
    auto in = feeds({B, S, K}, {B * S * D});
    in["rs"] = Tensor::from_ints({B, S, D}, {3});
    check_rejected(b, "rule 3", "residual 'runtime_view_y' [?,?,?]", in);
  }
}

TEST_CASE("ResidualMatMul Add: a residual of another dtype", "[passes][ResidualMatMul]") {
  // Not a valid graph to run (the Add mixes dtypes): the pass's own refusal.
  GraphBuilder b(17);
  Value* a = b.input("a", DType::Float, {B, S, K});
  Value* r = b.input("r", DType::Double, {B, S, D});
  b.output(b.op("Add", {proj(b, a, "out_proj", 1), r}, {}, "residual_add"));
  FusionReport rep = run_one_pass_unchecked(b.graph(), kPass);
  CHECK(matched(rep, kPass) == 0);
  CHECK(residual_gemms(b.graph()).empty());
  CHECK_THAT(reasons(rep, kPass), Contains("rule 5") && Contains("dtypes differ"));
}
