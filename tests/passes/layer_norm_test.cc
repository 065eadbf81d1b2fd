// LayerNorm-from-primitives fusion: the exporter spellings (Pow or Mul,
// Div or Reciprocal+Mul, axes as attribute or opset-18 input), the opset
// choice of the fused op, and the legality rules (1, 2, 5, 6).
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

struct LNSpec {
  int64_t opset = 17;
  bool mul_square = false;     // d*d instead of Pow(d, 2)
  bool reciprocal = false;     // d * Reciprocal(sqrt) instead of Div
  bool one_over = false;       // d * (1 / sqrt)
  bool beta = true;
  int64_t axis = -1;
  int64_t keepdims = 1;
  bool eps_input = false;      // epsilon from a graph input (not a constant)
  bool gamma_input = false;    // gamma from a graph input
  bool leak_d = false;         // the centred value also goes to a graph output
  DType gamma_dtype = DType::Float;
};

// x [2, 5, 8] -> LayerNorm over the last axis, written in primitives.
void build_ln(GraphBuilder& b, const LNSpec& s) {
  Value* x = b.input("x", DType::Float, {2, 5, 8});
  auto reduce = [&](Value* v, const std::string& name) {
    std::vector<Attribute> attrs{Attribute::make_int("keepdims", s.keepdims)};
    if (s.opset >= 18) return b.op("ReduceMean", {v, b.constant(name + "_axes", Tensor::from_ints({s.axis}, {1}))}, attrs, name);
    attrs.push_back(Attribute::make_ints("axes", {s.axis}));
    return b.op("ReduceMean", {v}, attrs, name);
  };
  Value* d = b.op("Sub", {x, reduce(x, "mean")}, {}, "sub");
  Value* sq = s.mul_square ? b.op("Mul", {d, d}) : b.op("Pow", {d, b.scalar("two", 2.0f)});
  Value* eps = s.eps_input ? b.input("eps", DType::Float, {}) : b.scalar("eps", 1e-5f);
  Value* sd = b.op("Sqrt", {b.op("Add", {reduce(sq, "var"), eps})});
  Value* n = s.reciprocal ? b.op("Mul", {d, b.op("Reciprocal", {sd})})
             : s.one_over ? b.op("Mul", {b.op("Div", {b.scalar("one", 1.0f), sd}), d})
                          : b.op("Div", {d, sd});
  Tensor g = rand_tensor({8}, 7, 0.5f, 1.5f);
  Value* gamma;
  if (s.gamma_input) {
    gamma = b.input("gamma", DType::Float, {8});
  } else if (s.gamma_dtype == DType::Double) {
    Tensor gd(DType::Double, {8});
    for (int i = 0; i < 8; ++i) gd.data<double>()[i] = g.data<float>()[i];
    gamma = b.constant("gamma", gd);
  } else {
    gamma = b.constant("gamma", g);
  }
  Value* y = b.op("Mul", {gamma, n});
  if (s.beta) y = b.op("Add", {y, b.constant("beta", rand_tensor({8}, 8))});
  b.output(y);
  if (s.leak_d) b.output(d);
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({2, 5, 8}, 11, -3.0f, 5.0f)}}; }

}  // namespace

TEST_CASE("LayerNorm: opset 17 primitives become LayerNormalization", "[passes][LayerNorm]") {
  GraphBuilder b(17);
  build_ln(b, {});
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(count_op(b.graph(), "LayerNormalization") == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("LayerNorm: opset 14, Mul square and Reciprocal become fuseopt.LayerNorm", "[passes][LayerNorm]") {
  LNSpec s;
  s.opset = 14;
  s.mul_square = true;
  s.reciprocal = true;
  GraphBuilder b(14);
  build_ln(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "LayerNorm") == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("LayerNorm: the 1 / sqrt spelling", "[passes][LayerNorm]") {
  LNSpec s;
  s.one_over = true;
  GraphBuilder b(17);
  build_ln(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("LayerNorm: opset 18 axes input, no beta", "[passes][LayerNorm]") {
  LNSpec s;
  s.opset = 18;
  s.beta = false;
  GraphBuilder b(18);
  build_ln(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
  CHECK(count_op(b.graph(), "LayerNormalization") == 1);
  CHECK(count_op(b.graph(), "ReduceMean") == 0);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("LayerNorm: positive last axis (2 of rank 3) is the last axis", "[passes][LayerNorm]") {
  LNSpec s;
  s.axis = 2;
  GraphBuilder b(17);
  build_ln(b, s);
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
}

TEST_CASE("LayerNorm: a scalar Add after the norm is not taken for beta", "[passes][LayerNorm]") {
  LNSpec s;
  s.beta = false;
  GraphBuilder b(17);
  build_ln(b, s);
  // y + 1.0 after the (beta-less) LayerNorm: fuse the norm, keep the Add.
  Value* y = b.graph().outputs[0];
  y->is_graph_output = false;
  b.graph().outputs.clear();
  b.output(b.op("Add", {y, b.scalar("plus_one", 1.0f)}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 1);
  CHECK(count_op(b.graph(), "LayerNormalization") == 1);
  CHECK(count_op(b.graph(), "Add") == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("LayerNorm rule 6: reduction over a non-last axis", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.axis = 1;
  GraphBuilder b(17);
  build_ln(b, s);
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK(count_op(b.graph(), "ReduceMean") == 2);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 6") && Contains("axis 1"));
}

TEST_CASE("LayerNorm rule 6: keepdims 0", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.keepdims = 0;
  GraphBuilder b(17);
  build_ln(b, s);
  // x - mean([2,5]) cannot broadcast: inconsistent on purpose, so without the
  // up-front strict inference (the pass's own rule 6 is under test).
  FusionReport r = run_passes_unchecked(b.graph(), {"LayerNorm"});
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 6") && Contains("keepdims"));
}

TEST_CASE("LayerNorm rule 6: epsilon is not a constant", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.eps_input = true;
  GraphBuilder b(17);
  build_ln(b, s);
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 6") && Contains("epsilon"));
}

TEST_CASE("LayerNorm rule 2: gamma is not a constant", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.gamma_input = true;
  GraphBuilder b(17);
  build_ln(b, s);
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 2") && Contains("gamma"));
}

TEST_CASE("LayerNorm rule 1: the centred value is also a graph output", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.leak_d = true;
  GraphBuilder b(17);
  build_ln(b, s);
  FusionReport r = run_one_pass(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK(count_op(b.graph(), "LayerNormalization") == 0);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 1"));
}

TEST_CASE("LayerNorm rule 5: gamma of another dtype", "[passes][LayerNorm][legality]") {
  LNSpec s;
  s.gamma_dtype = DType::Double;
  GraphBuilder b(17);
  build_ln(b, s);
  // Invalid ONNX (mixed types in one type variable): only --no-validate input reaches the pass.
  FusionReport r = run_one_pass_unchecked(b.graph(), "LayerNorm");
  CHECK(matched(r, "LayerNorm") == 0);
  CHECK_THAT(reasons(r, "LayerNorm"), Contains("rule 5"));
}

// ---- half-precision TorchScript exports (opset < 17 after model.half()) --------------------
//   d = x - ReduceMean(x) (half); dc = Cast(d, double | float); y = Cast(dc / Sqrt(var(dc) + eps), half)
//   * gamma + beta (half)
namespace {

struct HalfLN {
  DType t = DType::Float16;
  DType wide = DType::Double;     // the Cast of the centred value
  DType back = DType::Undefined;  // the Cast after the norm (Undefined: t; Float16 for an fp32 x means none)
  bool no_back = false;
};

Tensor ln_half(const Tensor& f, DType t) {
  Tensor r(t, f.dims);
  for (int64_t i = 0; i < f.numel(); ++i)
    r.data<uint16_t>()[i] = t == DType::Float16 ? float_to_half(f.data<float>()[i]) : float_to_bf16(f.data<float>()[i]);
  return r;
}

Value* typed_scalar(GraphBuilder& b, const std::string& n, DType t, double v) {
  if (t == DType::Double) {
    Tensor d(DType::Double, {});
    d.data<double>()[0] = v;
    return b.constant(n, d);
  }
  if (t == DType::Float) return b.scalar(n, static_cast<float>(v));
  return b.constant(n, ln_half(Tensor::scalar_float(static_cast<float>(v)), t));
}

void build_half_ln(GraphBuilder& b, const HalfLN& s) {
  Value* x = b.input("x", DType::Float, {2, 5, 8});
  if (s.t != DType::Float) x = b.op("Cast", {x}, {Attribute::make_int("to", static_cast<int64_t>(s.t))}, "x_half");
  auto reduce = [&](Value* v, const std::string& name) {
    return b.op("ReduceMean", {v}, {Attribute::make_int("keepdims", 1), Attribute::make_ints("axes", {-1})}, name);
  };
  Value* d = b.op("Sub", {x, reduce(x, "mean")}, {}, "sub");
  Value* dc = b.op("Cast", {d}, {Attribute::make_int("to", static_cast<int64_t>(s.wide))}, "widen");
  Value* sq = b.op("Pow", {dc, typed_scalar(b, "two", s.wide, 2.0)});
  Value* sd = b.op("Sqrt", {b.op("Add", {reduce(sq, "var"), typed_scalar(b, "eps", s.wide, 1e-5)})});
  Value* n = b.op("Div", {dc, sd});
  const DType back = s.back == DType::Undefined ? s.t : s.back;
  if (!s.no_back) n = b.op("Cast", {n}, {Attribute::make_int("to", static_cast<int64_t>(back))}, "narrow");
  const DType pt = s.no_back ? s.wide : back;
  auto param = [&](const std::string& name, uint32_t seed, float lo, float hi) {
    Tensor f = rand_tensor({8}, seed, lo, hi);
    if (pt == DType::Float) return b.constant(name, f);
    if (pt == DType::Double) {
      Tensor d(DType::Double, {8});
      for (int i = 0; i < 8; ++i) d.data<double>()[i] = f.data<float>()[i];
      return b.constant(name, d);
    }
    return b.constant(name, ln_half(f, pt));
  };
  Value* y = b.op("Add", {b.op("Mul", {param("gamma", 7, 0.5f, 1.5f), n}), param("beta", 8, -1.0f, 1.0f)});
  if (pt != DType::Float) y = b.op("Cast", {y}, {Attribute::make_int("to", static_cast<int64_t>(DType::Float))}, "y");
  b.output(y);
}

}  // namespace

TEST_CASE("LayerNorm: fp16 / bf16 opset-14 TorchScript form (centred value widened, cast back) fuses",
          "[passes][LayerNorm]") {
  for (DType t : {DType::Float16, DType::BFloat16}) {
    for (DType wide : {DType::Double, DType::Float}) {
      HalfLN s;
      s.t = t;
      s.wide = wide;
      GraphBuilder b(14);
      build_half_ln(b, s);
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "LayerNorm");
      INFO(dtype_name(t) << " widened to " << dtype_name(wide) << ": " << reasons(r, "LayerNorm"));
      REQUIRE(matched(r, "LayerNorm") == 1);
      CHECK(count_domain_op(b.graph(), "fuseopt", "LayerNorm") == 1);
      CHECK(count_op(b.graph(), "ReduceMean") == 0);
      CHECK(count_op(b.graph(), "Cast") == 2);  // x_half and y
      require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 5, 8}, 11, -3.0f, 5.0f)}},
                           t == DType::BFloat16 ? 3e-2f : 5e-3f);
    }
  }
}

TEST_CASE("LayerNorm rule 5: the casts of the half form that do not fit", "[passes][LayerNorm][legality]") {
  struct Case {
    HalfLN s;
    const char* reason;
  };
  HalfLN fp32_double;  // fp32 x with double statistics: the fused op's fp32 ones are narrower
  fp32_double.t = DType::Float;
  fp32_double.back = DType::Float;
  HalfLN other_back;  // bf16 x, normalised value cast to fp16
  other_back.t = DType::BFloat16;
  other_back.back = DType::Float16;
  HalfLN to_half;  // bf16 x "widened" to fp16 (which rounds: fewer exponent bits)
  to_half.t = DType::BFloat16;
  to_half.wide = DType::Float16;
  for (const Case& c : {Case{fp32_double, "rule 5: Cast 'widen' casts the centred float32 input to float64"},
                        Case{other_back, "rule 5: Cast 'narrow' casts to float16, not back to the input's bfloat16"},
                        Case{to_half, "rule 5: Cast 'widen' casts the centred bfloat16 input to float16"}}) {
    GraphBuilder b(14);
    build_half_ln(b, c.s);
    FusionReport r = run_one_pass(b.graph(), "LayerNorm");
    CHECK(matched(r, "LayerNorm") == 0);
    CHECK(count_op(b.graph(), "ReduceMean") == 2);
    CHECK_THAT(reasons(r, "LayerNorm"), Contains(c.reason));
  }
}
