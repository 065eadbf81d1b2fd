// RMSNorm fusion (T5 / Llama spellings, optional exact casts) and its legality
// rules (5: a cast that changes precision, 6: axis / epsilon, 2: gamma).
#include "support/fusion_check.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

enum class Form { Reciprocal, Div, OneOver };

struct RMSSpec {
  Form form = Form::Reciprocal;
  bool casts = false;             // Cast(x, float) ... Cast(back to float)
  DType inner_cast = DType::Float;
  int64_t axis = -1;
  bool gamma_input = false;
  bool eps = true;  // false: Sqrt(ms) with no `+ eps` (Helium's dynamo export)
};

// A scalar constant in the chain's dtype (the Cast's, so the graph stays valid ONNX).
Value* chain_scalar(GraphBuilder& b, const RMSSpec& s, const std::string& name, float v) {
  if (!s.casts || s.inner_cast == DType::Float) return b.scalar(name, v);
  FUSE_CHECK(s.inner_cast == DType::Float16, "chain_scalar: float or float16");
  Tensor t(DType::Float16, {});
  t.data<uint16_t>()[0] = float_to_half(v);
  return b.constant(name, t);
}

void build_rms(GraphBuilder& b, const RMSSpec& s) {
  Value* x = b.input("x", DType::Float, {3, 6});
  Value* xc = s.casts ? b.op("Cast", {x}, {Attribute::make_int("to", static_cast<int64_t>(s.inner_cast))}) : x;
  Value* ms = b.op("ReduceMean", {b.op("Pow", {xc, chain_scalar(b, s, "two", 2.0f)})},
                   {Attribute::make_ints("axes", {s.axis}), Attribute::make_int("keepdims", 1)});
  Value* sd = b.op("Sqrt", {s.eps ? b.op("Add", {ms, chain_scalar(b, s, "eps", 1e-6f)}) : ms});
  Value* n;
  switch (s.form) {
    case Form::Reciprocal: n = b.op("Mul", {xc, b.op("Reciprocal", {sd})}); break;
    case Form::Div: n = b.op("Div", {xc, sd}); break;
    case Form::OneOver: n = b.op("Mul", {b.op("Div", {chain_scalar(b, s, "one", 1.0f), sd}), xc}); break;
  }
  if (s.casts) n = b.op("Cast", {n}, {Attribute::make_int("to", static_cast<int64_t>(DType::Float))});
  Value* gamma = s.gamma_input ? b.input("gamma", DType::Float, {6}) : b.constant("gamma", rand_tensor({6}, 5, 0.5f, 2.0f));
  b.output(b.op("Mul", {gamma, n}));
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({3, 6}, 9, -2.0f, 3.0f)}}; }

}  // namespace

TEST_CASE("RMSNorm: Llama form (Reciprocal) fuses", "[passes][RMSNorm]") {
  GraphBuilder b(17);
  build_rms(b, {});
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "RMSNorm") == 1);
  require_same_outputs(*before, b.graph(), feeds());
}

TEST_CASE("RMSNorm: Div and 1/x forms with no-op float casts fuse", "[passes][RMSNorm]") {
  for (Form f : {Form::Div, Form::OneOver}) {
    RMSSpec s;
    s.form = f;
    s.casts = true;
    GraphBuilder b(17);
    build_rms(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "RMSNorm");
    CHECK(matched(r, "RMSNorm") == 1);
    CHECK(b.graph().num_nodes() == 1);
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("RMSNorm: without an epsilon fuses with epsilon 0", "[passes][RMSNorm]") {
  for (Form f : {Form::Reciprocal, Form::Div}) {
    RMSSpec s;
    s.form = f;
    s.eps = false;
    GraphBuilder b(17);
    build_rms(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "RMSNorm");
    CHECK(matched(r, "RMSNorm") == 1);
    REQUIRE(b.graph().num_nodes() == 1);
    const Node& n = *b.graph().nodes().front();
    CHECK(n.op_type == "RMSNorm");
    CHECK(n.attr_float("epsilon", -1.0f) == 0.0f);
    require_same_outputs(*before, b.graph(), feeds());
  }
}

TEST_CASE("RMSNorm rule 5: a Cast to fp16 inside the chain", "[passes][RMSNorm][legality]") {
  RMSSpec s;
  s.casts = true;
  s.inner_cast = DType::Float16;
  GraphBuilder b(17);
  build_rms(b, s);
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 5"));
}

TEST_CASE("RMSNorm rule 6: mean over the first axis", "[passes][RMSNorm][legality]") {
  RMSSpec s;
  s.axis = 0;
  GraphBuilder b(17);
  build_rms(b, s);
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 6"));
}

TEST_CASE("RMSNorm rule 2: gamma is not a constant", "[passes][RMSNorm][legality]") {
  RMSSpec s;
  s.gamma_input = true;
  GraphBuilder b(17);
  build_rms(b, s);
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 2"));
}

TEST_CASE("RMSNorm rule 1: the mean square is read elsewhere", "[passes][RMSNorm][legality]") {
  GraphBuilder b(17);
  build_rms(b, {});
  // Also expose ReduceMean's output.
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "ReduceMean") b.output(n->output(0));
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK(count_op(b.graph(), "ReduceMean") == 1);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 1") && Contains("graph output"));
}

// ---- half-precision exports (HF LlamaRMSNorm after model.half()) -------------------------
//   xw = Cast(x, float) (x fp16/bf16); n = xw * (1 / Sqrt(ReduceMean(Pow(xw, 2)) + eps))
//   y  = gamma (x's dtype) * Cast(n, x's dtype)
// The widened xw may also feed the residual Add (the exporter shares one Cast): it stays for it.
namespace {

struct HalfRms {
  DType t = DType::Float16;
  DType back = DType::Undefined;  // the Cast after the norm (Undefined: t)
  bool shared_up = false;         // Cast(x, float) also read by a residual Add
  bool leak_normed = false;       // the fp32 normalised value is also a graph output
};

Tensor half_tensor(const Tensor& f, DType t) {
  Tensor r(t, f.dims);
  for (int64_t i = 0; i < f.numel(); ++i)
    r.data<uint16_t>()[i] = t == DType::Float16 ? float_to_half(f.data<float>()[i]) : float_to_bf16(f.data<float>()[i]);
  return r;
}

Value* cast_to(GraphBuilder& b, Value* x, DType to, const std::string& n) {
  return b.op("Cast", {x}, {Attribute::make_int("to", static_cast<int64_t>(to))}, n);
}

void build_half_rms(GraphBuilder& b, const HalfRms& s) {
  Value* x = cast_to(b, b.input("x", DType::Float, {3, 6}), s.t, "x_half");
  Value* xw = cast_to(b, x, DType::Float, "up");
  Value* ms = b.op("ReduceMean", {b.op("Pow", {xw, b.scalar("two", 2.0f)})},
                   {Attribute::make_ints("axes", {-1}), Attribute::make_int("keepdims", 1)});
  Value* sd = b.op("Sqrt", {b.op("Add", {ms, b.scalar("eps", 1e-6f)})});
  Value* n = b.op("Mul", {xw, b.op("Div", {b.scalar("one", 1.0f), sd})}, {}, "normed");
  Value* back = cast_to(b, n, s.back == DType::Undefined ? s.t : s.back, "down");
  Value* g = b.constant("gamma", half_tensor(rand_tensor({6}, 5, 0.5f, 2.0f), s.back == DType::Undefined ? s.t : s.back));
  b.output(cast_to(b, b.op("Mul", {g, back}, {}, "scale"), DType::Float, "y"));
  if (s.shared_up) b.output(b.op("Add", {xw, b.input("r", DType::Float, {3, 6})}, {}, "residual"));
  if (s.leak_normed) b.output(n);
}

std::map<std::string, Tensor> half_feeds(bool shared) {
  std::map<std::string, Tensor> f{{"x", rand_tensor({3, 6}, 9, -2.0f, 3.0f)}};
  if (shared) f.emplace("r", rand_tensor({3, 6}, 11));
  return f;
}

}  // namespace

TEST_CASE("RMSNorm: fp16 and bf16 input, fp32 statistics, cast back, fuses", "[passes][RMSNorm]") {
  for (DType t : {DType::Float16, DType::BFloat16}) {
    for (bool shared : {false, true}) {
      HalfRms s;
      s.t = t;
      s.shared_up = shared;
      GraphBuilder b(17);
      build_half_rms(b, s);
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "RMSNorm");
      INFO(dtype_name(t) << (shared ? " shared widening Cast" : "") << ": " << reasons(r, "RMSNorm"));
      REQUIRE(matched(r, "RMSNorm") == 1);
      CHECK(count_domain_op(b.graph(), "fuseopt", "RMSNorm") == 1);
      CHECK(count_op(b.graph(), "ReduceMean") == 0);
      // x_half and y, plus Cast(x, float) only where the residual Add still reads it.
      CHECK(count_op(b.graph(), "Cast") == (shared ? 3 : 2));
      for (const auto& n : b.graph().nodes())
        if (n->op_type == "RMSNorm") CHECK(n->input(0)->name == "x_half_y");
      require_same_outputs(*before, b.graph(), half_feeds(shared), t == DType::BFloat16 ? 2e-2f : 2e-3f);
    }
  }
}

TEST_CASE("RMSNorm rule 5: bf16 input cast back to fp16", "[passes][RMSNorm][legality]") {
  HalfRms s;
  s.t = DType::BFloat16;
  s.back = DType::Float16;
  s.shared_up = true;
  GraphBuilder b(17);
  build_half_rms(b, s);
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK(count_op(b.graph(), "ReduceMean") == 1);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 5: Cast 'down' casts to float16, not back to the input's bfloat16"));
}

TEST_CASE("RMSNorm rule 1: fp16 form whose fp32 normalised value is read elsewhere", "[passes][RMSNorm][legality]") {
  HalfRms s;
  s.leak_normed = true;
  GraphBuilder b(17);
  build_half_rms(b, s);
  FusionReport r = run_one_pass(b.graph(), "RMSNorm");
  CHECK(matched(r, "RMSNorm") == 0);
  CHECK(count_op(b.graph(), "ReduceMean") == 1);
  CHECK_THAT(reasons(r, "RMSNorm"), Contains("rule 1") && Contains("Mul 'normed'"));
}
