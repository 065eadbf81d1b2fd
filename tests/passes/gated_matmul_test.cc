// GatedMatMul fusion: SwiGLU (x * Sigmoid(x) in both operand orders; ONNX's Swish-24 and
// SwiGLU-28 at alpha 1, refused at another alpha), ReGLU,
// GeGLU with every erf/tanh GELU spelling FusedMatMul knows, biases on both,
// one or neither GEMM; the pass order against FusedMatMul / QkvPack; legality
// rules 1-5 as negative tests with the report's reason.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t M = 5, K = 6, N = 4;

enum class Act { SiluMulSig, SiluSigMul, Relu, GeluDiv, GeluMulHalfFirst, GeluHalfOnSum, TanhPow, TanhMul, TanhFast };

const char* expected_attr(Act a) {
  switch (a) {
    case Act::SiluMulSig:
    case Act::SiluSigMul: return "silu";
    case Act::Relu: return "relu";
    case Act::GeluDiv:
    case Act::GeluMulHalfFirst:
    case Act::GeluHalfOnSum: return "gelu";
    default: return "gelu_tanh";
  }
}

Value* act(GraphBuilder& b, Value* x, Act a) {
  auto s = [&](const char* name, float v) { return b.scalar(name, v); };
  auto one_plus = [&](Value* v) { return b.op("Add", {v, s("one", 1.0f)}); };
  switch (a) {
    case Act::SiluMulSig: return b.op("Mul", {x, b.op("Sigmoid", {x})});  // TorchScript
    case Act::SiluSigMul: return b.op("Mul", {b.op("Sigmoid", {x}), x});
    case Act::Relu: return b.op("Relu", {x});
    case Act::GeluDiv:
      return b.op("Mul", {b.op("Mul", {x, one_plus(b.op("Erf", {b.op("Div", {x, s("sqrt2", 1.4142135f)})}))}),
                          s("half", 0.5f)});
    case Act::GeluMulHalfFirst:
      return b.op("Mul", {b.op("Mul", {x, s("half", 0.5f)}),
                          one_plus(b.op("Erf", {b.op("Mul", {x, s("rsqrt2", 0.70710678f)})}))});
    case Act::GeluHalfOnSum:
      return b.op("Mul", {x, b.op("Mul", {s("half", 0.5f),
                                          one_plus(b.op("Erf", {b.op("Div", {x, s("sqrt2", 1.4142135f)})}))})});
    case Act::TanhFast: {
      Value* cxx = b.op("Mul", {b.op("Mul", {s("c", 0.044715f), x}), x});
      Value* arg = b.op("Mul", {b.op("Mul", {x, s("k", 0.7978845608f)}), b.op("Add", {s("one_", 1.0f), cxx})});
      return b.op("Mul", {b.op("Mul", {s("half", 0.5f), x}), one_plus(b.op("Tanh", {arg}))});
    }
    case Act::TanhPow:
    case Act::TanhMul: {  // Gemma (TorchScript): (x * 0.5) * (1 + tanh(0.7978846 * (x + 0.044715 * x^3)))
      Value* cube = a == Act::TanhPow ? b.op("Pow", {x, s("three", 3.0f)}) : b.op("Mul", {b.op("Mul", {x, x}), x});
      Value* inner = b.op("Add", {x, b.op("Mul", {cube, s("c", 0.044715f)})});
      Value* t = b.op("Tanh", {b.op("Mul", {inner, s("k", 0.7978846f)})});
      return b.op("Mul", {b.op("Mul", {x, s("half", 0.5f)}), one_plus(t)});
    }
  }
  return x;
}

// x · W (+ bias), named `tag`_mm / `tag`_add.
Value* linear(GraphBuilder& b, Value* x, const std::string& tag, uint32_t seed, bool bias, int64_t n = N) {
  Value* y = b.op("MatMul", {x, b.constant("W" + tag, rand_tensor({K, n}, seed))}, {}, tag + "_mm");
  if (bias) y = b.op("Add", {y, b.constant("b" + tag, rand_tensor({n}, seed + 10))}, {}, tag + "_add");
  return y;
}

// Mul(act(gate), up) over one shared input a [2, M, K].
Value* gated_mlp(GraphBuilder& b, Act a, bool gate_bias, bool up_bias, bool up_first = false) {
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* g = act(b, linear(b, x, "gate", 1, gate_bias), a);
  Value* u = linear(b, x, "up", 2, up_bias);
  return up_first ? b.op("Mul", {u, g}, {}, "gate_up") : b.op("Mul", {g, u}, {}, "gate_up");
}

std::map<std::string, Tensor> feeds() { return {{"a", rand_tensor({2, M, K}, 3, -3.0f, 3.0f)}}; }

const Node* only_gated(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "GatedMatMul" && n->domain == "fuseopt") return n.get();
  return nullptr;
}

}  // namespace

TEST_CASE("GatedMatMul: every activation spelling, either Mul operand order", "[passes][GatedMatMul]") {
  for (Act a : {Act::SiluMulSig, Act::SiluSigMul, Act::Relu, Act::GeluDiv, Act::GeluMulHalfFirst, Act::GeluHalfOnSum,
                Act::TanhPow, Act::TanhMul, Act::TanhFast}) {
    for (bool up_first : {false, true}) {
      INFO("activation spelling " << static_cast<int>(a) << ", up first " << up_first);
      GraphBuilder b(17);
      b.output(gated_mlp(b, a, false, false, up_first));
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
      CHECK(matched(r, "GatedMatMul") == 1);
      CHECK(b.graph().num_nodes() == 1);
      const Node* f = only_gated(b.graph());
      REQUIRE(f);
      CHECK(f->attr_string("activation", "") == expected_attr(a));
      CHECK(f->input(2) == nullptr);
      // W is [K, 2N]: gate columns first, then up.
      REQUIRE(f->input(1)->const_data);
      CHECK(shape_str(f->input(1)->const_data->dims) == shape_str(std::vector<int64_t>{K, 2 * N}));
      require_same_outputs(*before, b.graph(), feeds());
    }
  }
}

TEST_CASE("GatedMatMul: GeGLU through ONNX's Gelu op (opset 20), either form", "[passes][GatedMatMul]") {
  for (const char* approximate : {"none", "tanh"}) {
    INFO("approximate " << approximate);
    GraphBuilder b(20);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* g = b.op("Gelu", {linear(b, x, "gate", 1, false)}, {Attribute::make_string("approximate", approximate)},
                    "gate_gelu");
    b.output(b.op("Mul", {g, linear(b, x, "up", 2, false)}, {}, "gate_up"));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    REQUIRE(only_gated(b.graph()));
    CHECK(only_gated(b.graph())->attr_string("activation", "") ==
          (std::string(approximate) == "tanh" ? "gelu_tanh" : "gelu"));
    require_same_outputs(*before, b.graph(), feeds(), 1e-5f);
  }
}

TEST_CASE("GatedMatMul: biases on both, one or the other GEMM", "[passes][GatedMatMul]") {
  for (auto [gb, ub] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    INFO("gate bias " << gb << ", up bias " << ub);
    GraphBuilder b(17);
    b.output(gated_mlp(b, Act::SiluMulSig, gb, ub));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 1);
    CHECK(b.graph().num_nodes() == 1);
    const Node* f = only_gated(b.graph());
    REQUIRE(f);
    REQUIRE(f->input(2));
    CHECK(f->input(2)->const_data->numel() == 2 * N);
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("GatedMatMul: erf GELU stays erf unless --approximate-gelu", "[passes][GatedMatMul]") {
  for (bool approx : {false, true}) {
    GraphBuilder b(17);
    b.output(gated_mlp(b, Act::GeluDiv, true, true));
    auto before = clone_graph(b.graph());
    PassOptions o;
    o.approximate_gelu = approx;
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul", o);
    CHECK(matched(r, "GatedMatMul") == 1);
    CHECK(only_gated(b.graph())->attr_string("activation", "") == (approx ? "gelu_tanh" : "gelu"));
    require_same_outputs(*before, b.graph(), feeds(), approx ? 1e-3f : 1e-5f);
  }
}

TEST_CASE("GatedMatMul: runs before FusedMatMul and QkvPack take the GEMMs apart", "[passes][GatedMatMul]") {
  // Gemma's case: without GatedMatMul, FusedMatMul folds tanh-GELU into the gate GEMM and
  // QkvPack can no longer pack it with up. With every fusion on, one op remains.
  GraphBuilder b(17);
  b.output(gated_mlp(b, Act::TanhMul, false, false));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"GatedMatMul", "FusedMatMul", "QkvPack"});
  CHECK(matched(r, "GatedMatMul") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(only_gated(b.graph()));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("GatedMatMul: idempotent (its own output changes nothing)", "[passes][GatedMatMul]") {
  GraphBuilder b(17);
  b.output(gated_mlp(b, Act::SiluMulSig, true, true));
  run_one_pass(b.graph(), "GatedMatMul");
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK(b.graph().num_nodes() == 1);
}

// ---- legality --------------------------------------------------------------------------

TEST_CASE("GatedMatMul rule 1: the gate product is read elsewhere", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* g = linear(b, x, "gate", 1, false);
  b.output(b.op("Mul", {act(b, g, Act::SiluMulSig), linear(b, x, "up", 2, false)}));
  b.output(g);  // the pre-activation gate is a graph output
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 2);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 1") && Contains("gate_mm"));
}

TEST_CASE("GatedMatMul rule 1: the activated gate has another consumer", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* ag = b.op("Relu", {linear(b, x, "gate", 1, false)}, {}, "gate_relu");
  b.output(b.op("Mul", {ag, linear(b, x, "up", 2, false)}));
  b.output(b.op("Neg", {ag}));
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 1") && Contains("gate_relu"));
}

TEST_CASE("GatedMatMul rule 2: the up weight is not a constant, or not 2-D", "[passes][GatedMatMul][legality]") {
  {
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* wu = b.input("wu", DType::Float, {K, N});
    b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), b.op("MatMul", {x, wu})}));
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 0);
    CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 2") && Contains("'wu'"));
  }
  {
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* up = b.op("MatMul", {x, b.constant("Wu3", rand_tensor({2, K, N}, 7))});
    b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), up}));
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 0);
    CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 2") && Contains("Wu3"));
  }
}

TEST_CASE("GatedMatMul rule 3: an up bias that broadcasts along rows", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* up = b.op("Add", {linear(b, x, "up", 2, false), b.constant("rowbias", rand_tensor({M, N}, 8))});
  b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), up}));
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 3") && Contains("rowbias"));
}

TEST_CASE("GatedMatMul rule 4: gate and up widths differ (the product broadcasts)", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), linear(b, x, "up", 2, false, 1)}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 2);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 4") && Contains("broadcast"));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("GatedMatMul rule 4: gate and up are one GEMM", "[passes][GatedMatMul][legality]") {
  // x * silu(x) with x = a·W: a gated form, but not two GEMMs to pack.
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* g = linear(b, x, "gate", 1, false);
  b.output(b.op("Mul", {act(b, g, Act::SiluMulSig), g}));
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 1);
}

TEST_CASE("GatedMatMul rule 5: a bias of another dtype", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Tensor bd(DType::Double, {N});
  Value* up = b.op("Add", {linear(b, x, "up", 2, false), b.constant("bias64", bd)});
  b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), up}));
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 5"));
}

TEST_CASE("GatedMatMul: gate and up reading different inputs are not fused", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* x2 = b.input("a2", DType::Float, {2, M, K});
  b.output(b.op("Mul", {act(b, linear(b, x, "gate", 1, false), Act::SiluMulSig), linear(b, x2, "up", 2, false)}));
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 2);
}

// ---- packed gate/up: one GEMM, halves taken by Split or two Slices (Phi-3) ---------------

namespace {

enum class Halves { Split18, Split13Sizes, Split11Attr, Slices, SlicesIntMaxEnd };

// Mul(act(gate), up) with gate/up the halves of a [K, 2N] GEMM (+ bias).
// gate_second: Mul(up, act(gate)) with the gate the SECOND half (diffusers' GEGLU).
Value* packed_mlp(GraphBuilder& b, Halves h, bool bias, Act a = Act::SiluMulSig, bool gate_second = false) {
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N}, 4))}, {}, "gate_up_mm");
  if (bias) p = b.op("Add", {p, b.constant("bp", rand_tensor({2 * N}, 5))}, {}, "gate_up_add");
  Value *g = nullptr, *u = nullptr;
  switch (h) {
    case Halves::Split18:
    case Halves::Split13Sizes:
    case Halves::Split11Attr: {
      std::vector<Value*> in{p};
      std::vector<Attribute> at{Attribute::make_int("axis", h == Halves::Split18 ? -1 : 2)};
      if (h == Halves::Split18) at.push_back(Attribute::make_int("num_outputs", 2));
      if (h == Halves::Split13Sizes) in.push_back(b.constant("sizes", Tensor::from_ints({N, N}, {2})));
      if (h == Halves::Split11Attr) at.push_back(Attribute::make_ints("split", {N, N}));
      Node* sp = b.node("Split", in, 2, at, "", "gate_up_split");
      g = sp->outputs[0];
      u = sp->outputs[1];
      break;
    }
    case Halves::Slices:
    case Halves::SlicesIntMaxEnd: {
      auto i64 = [&](const std::string& name, int64_t v) { return b.constant(name, Tensor::from_ints({v}, {1})); };
      Value* axes = i64("axes", -1);
      g = b.op("Slice", {p, i64("s0", 0), i64("e0", N), axes}, {}, "gate_slice");
      u = b.op("Slice", {p, i64("s1", N), i64("e1", h == Halves::Slices ? 2 * N : INT64_MAX), axes}, {}, "up_slice");
      break;
    }
  }
  if (gate_second) std::swap(g, u);
  return b.op("Mul", {act(b, g, a), u}, {}, "gate_up");
}

int64_t opset_for(Halves h) { return h == Halves::Split18 ? 18 : h == Halves::Split11Attr ? 11 : 17; }

}  // namespace

TEST_CASE("GatedMatMul: a packed GEMM split by Split or by two Slices", "[passes][GatedMatMul]") {
  for (Halves h : {Halves::Split18, Halves::Split13Sizes, Halves::Split11Attr, Halves::Slices, Halves::SlicesIntMaxEnd})
    for (bool bias : {false, true})
      for (Act a : {Act::SiluMulSig, Act::TanhMul}) {
        INFO("halves " << static_cast<int>(h) << ", bias " << bias << ", activation " << static_cast<int>(a));
        GraphBuilder b(opset_for(h));
        b.output(packed_mlp(b, h, bias, a));
        auto before = clone_graph(b.graph());
        FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
        CHECK(matched(r, "GatedMatMul") == 1);
        CHECK(b.graph().num_nodes() == 1);
        const Node* f = only_gated(b.graph());
        REQUIRE(f);
        CHECK(f->attr_string("activation", "") == expected_attr(a));
        CHECK((f->input(2) != nullptr) == bias);
        require_same_outputs(*before, b.graph(), feeds());
      }
}

TEST_CASE("GatedMatMul: the gate may be the packed GEMM's second half (diffusers GEGLU)", "[passes][GatedMatMul]") {
  for (Halves h : {Halves::Split18, Halves::Split13Sizes, Halves::Slices, Halves::SlicesIntMaxEnd})
    for (bool bias : {false, true})
      for (Act a : {Act::SiluMulSig, Act::GeluDiv}) {
        INFO("halves " << static_cast<int>(h) << ", bias " << bias << ", activation " << static_cast<int>(a));
        GraphBuilder b(opset_for(h));
        b.output(packed_mlp(b, h, bias, a, /*gate_second=*/true));
        auto before = clone_graph(b.graph());
        FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
        INFO(reasons(r, "GatedMatMul"));
        CHECK(matched(r, "GatedMatMul") == 1);
        const Node* f = only_gated(b.graph());
        REQUIRE(f);
        CHECK(f->input(1)->name != "Wp");  // a new weight with the halves swapped, the model's own untouched
        require_same_outputs(*before, b.graph(), feeds());
      }
}

TEST_CASE("GatedMatMul rule 4: a Split that is not two halves of the last axis", "[passes][GatedMatMul][legality]") {
  {  // unequal sizes {2N - 1, 1}: up is one column that broadcasts over the gate
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N}, 4))});
    Node* sp = b.node("Split", {p, b.constant("sizes", Tensor::from_ints({2 * N - 1, 1}, {2}))}, 2,
                      {Attribute::make_int("axis", -1)}, "", "uneven_split");
    b.output(b.op("Mul", {act(b, sp->outputs[0], Act::SiluMulSig), sp->outputs[1]}));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 0);
    CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 4") && Contains("uneven_split") && Contains("two halves"));
    require_same_outputs(*before, b.graph(), feeds());
  }
  {  // split along rows (axis 1), halves of equal size
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, 2 * M, K});
    Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N}, 4))});
    Node* sp = b.node("Split", {p}, 2, {Attribute::make_int("axis", 1)}, "", "row_split");
    b.output(b.op("Mul", {act(b, sp->outputs[0], Act::SiluMulSig), sp->outputs[1]}));
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 0);
    CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 4") && Contains("row_split"));
  }
  {  // no sizes on a 2N+2 wide GEMM: equal halves of N+1 each, still exact
    GraphBuilder b(17);
    Value* x = b.input("a", DType::Float, {2, M, K});
    Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N + 2}, 4))});
    Node* sp = b.node("Split", {p}, 2, {Attribute::make_int("axis", -1)}, "", "wide_split");
    b.output(b.op("Mul", {act(b, sp->outputs[0], Act::SiluMulSig), sp->outputs[1]}));
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
    CHECK(matched(r, "GatedMatMul") == 1);  // N + 1 each: still exact halves
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("GatedMatMul rule 4: Slices that are not the first and second half", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N}, 4))});
  auto i64 = [&](const std::string& name, int64_t v) { return b.constant(name, Tensor::from_ints({v}, {1})); };
  Value* axes = i64("axes", -1);
  Value* g = b.op("Slice", {p, i64("s0", 1), i64("e0", N + 1), axes}, {}, "shifted_gate");  // [1, N+1)
  Value* u = b.op("Slice", {p, i64("s1", N), i64("e1", 2 * N), axes}, {}, "up_slice");
  b.output(b.op("Mul", {act(b, g, Act::SiluMulSig), u}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 4") && Contains("shifted_gate"));
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("GatedMatMul rule 1: a half of the packed GEMM is read elsewhere", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(18);
  Value* x = b.input("a", DType::Float, {2, M, K});
  Value* p = b.op("MatMul", {x, b.constant("Wp", rand_tensor({K, 2 * N}, 4))});
  Node* sp = b.node("Split", {p}, 2, {Attribute::make_int("axis", -1), Attribute::make_int("num_outputs", 2)}, "",
                    "gate_up_split");
  b.output(b.op("Mul", {act(b, sp->outputs[0], Act::SiluMulSig), sp->outputs[1]}));
  b.output(sp->outputs[1]);
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 1") && Contains("gate_up_split"));
}

TEST_CASE("GatedMatMul rule 3: a 1 x N bias would add a dim to the product of a vector", "[passes][GatedMatMul][legality]") {
  GraphBuilder b(17);
  Value* x = b.input("avec", DType::Float, {K});  // A·W is [N]; + [1, N] makes it [1, N]
  Value* g = b.op("Add", {b.op("MatMul", {x, b.constant("Wg", rand_tensor({K, N}, 1))}),
                          b.constant("bias2d", rand_tensor({1, N}, 9))});
  Value* u = b.op("MatMul", {x, b.constant("Wu", rand_tensor({K, N}, 2))});
  b.output(b.op("Mul", {act(b, g, Act::SiluMulSig), u}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
  CHECK(matched(r, "GatedMatMul") == 0);
  CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 3") && Contains("bias2d"));
  require_same_outputs(*before, b.graph(), {{"avec", rand_tensor({K}, 3)}});
}

TEST_CASE("GatedMatMul: opset 24's Swish and opset 28's SwiGLU are silu at alpha 1", "[passes][GatedMatMul]") {
  for (int form = 0; form < 2; ++form) {  // 0: Mul(Swish(gate), up) at opset 24; 1: SwiGLU(gate, up) at 28
    for (float alpha : {1.0f, 1.702f}) {
      INFO((form ? "SwiGLU" : "Swish") << " alpha " << alpha);
      GraphBuilder b(form ? 28 : 24);
      Value* x = b.input("a", DType::Float, {2, M, K});
      Value* g = linear(b, x, "gate", 1, true);
      Value* u = linear(b, x, "up", 2, false);
      const std::vector<Attribute> attrs = {Attribute::make_float("alpha", alpha)};
      Value* y = form ? b.op("SwiGLU", {g, u}, attrs, "swiglu") : b.op("Mul", {b.op("Swish", {g}, attrs, "swish"), u}, {}, "gate_up");
      b.output(y);
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "GatedMatMul");
      if (alpha == 1.0f) {
        CHECK(matched(r, "GatedMatMul") == 1);
        const Node* f = only_gated(b.graph());
        REQUIRE(f);
        CHECK(f->attr_string("activation", "") == std::string("silu"));
        CHECK(b.graph().num_nodes() == 1);
        require_same_outputs(*before, b.graph(), feeds());
      } else {
        CHECK(matched(r, "GatedMatMul") == 0);
        CHECK_THAT(reasons(r, "GatedMatMul"), Contains("rule 4") && Contains("alpha") && Contains(form ? "swiglu" : "swish"));
      }
    }
  }
}
