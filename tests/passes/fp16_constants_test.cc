// Fusions on half-precision models: pattern constants are matched within the
// precision of the constant's own dtype (sqrt(2) stored as float16 is
// 1.4140625, 0.044715 is 0.04470825), exactly representable constants still
// match exactly, and an fp32 constant is not matched at fp16 precision.
// The fused graphs run on the CPU backend, which computes fp16/bf16 models in
// fp32, against the unfused graph.
#include <cmath>

#include "rewrite/pattern.h"
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t M = 5, K = 6, N = 4;

// A float tensor stored as `d` (Float16 / BFloat16 / Float).
Tensor stored_as(const Tensor& f, DType d) {
  if (d == DType::Float) return f;
  Tensor r(d, f.dims);
  for (int64_t i = 0; i < f.numel(); ++i) {
    const float v = f.data<float>()[i];
    r.data<uint16_t>()[i] = d == DType::Float16 ? float_to_half(v) : float_to_bf16(v);
  }
  return r;
}

float as_float(const Tensor& t, int64_t i) { return static_cast<float>(t.as_double(i)); }

// A graph in one float dtype: every constant goes through `d`.
struct HalfGraph {
  GraphBuilder b{17};
  DType d;
  explicit HalfGraph(DType dt) : d(dt) {}
  Value* scalar(const std::string& name, double v) {
    return b.constant(name, stored_as(Tensor::scalar_float(static_cast<float>(v)), d));
  }
  Value* rand(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    return b.constant(name, stored_as(rand_tensor(std::move(dims), seed), d));
  }
  Value* linear(Value* a) {
    Value* y = b.op("MatMul", {a, rand("W", {K, N}, 1)}, {}, "mm");
    return b.op("Add", {y, rand("bias", {N}, 2)}, {}, "bias_add");
  }
  // BERT's erf GELU: (y * (1 + erf(y / sqrt2))) * 0.5, or y * 0.5 * (1 + erf(y * rsqrt2)).
  Value* erf_gelu(Value* y, bool div, double c) {
    Value* arg = b.op(div ? "Div" : "Mul", {y, scalar("c", c)});
    Value* p = b.op("Add", {b.op("Erf", {arg}), scalar("one", 1.0)});
    return b.op("Mul", {b.op("Mul", {y, p}), scalar("half", 0.5)});
  }
  Value* tanh_gelu(Value* y, double c, double k) {
    Value* cube = b.op("Pow", {y, scalar("three", 3.0)});
    Value* inner = b.op("Add", {y, b.op("Mul", {cube, scalar("c", c)})});
    Value* t = b.op("Tanh", {b.op("Mul", {inner, scalar("k", k)})});
    return b.op("Mul", {b.op("Mul", {y, scalar("half", 0.5)}), b.op("Add", {t, scalar("one", 1.0)})});
  }
  std::map<std::string, Tensor> feeds(std::vector<int64_t> dims) {
    return {{"a", stored_as(rand_tensor(std::move(dims), 3, -3.0f, 3.0f), d)}};
  }
};

// Both graphs on the CPU backend; outputs keep the declared dtype and agree
// within half-precision output rounding (the unfused graph also computes in fp32).
void require_close(const Graph& before, const Graph& after, const std::map<std::string, Tensor>& feeds, DType d) {
  std::vector<Tensor> want = run_cpu(before, feeds);
  std::vector<Tensor> got = run_cpu(after, feeds);
  REQUIRE(want.size() == got.size());
  const float tol = d == DType::BFloat16 ? 1.6e-2f : 2e-3f;  // 2 ulps of the output dtype
  for (size_t o = 0; o < want.size(); ++o) {
    REQUIRE(got[o].dtype == d);
    REQUIRE(want[o].dtype == d);
    REQUIRE(shape_str(got[o].dims) == shape_str(want[o].dims));
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float w = as_float(want[o], i), g = as_float(got[o], i);
      INFO("output " << o << " element " << i << ": got " << g << ", want " << w);
      REQUIRE(!std::isnan(g));
      REQUIRE(std::fabs(g - w) <= tol * std::max(1.0f, std::fabs(w)));
    }
  }
}

const Node* only_fused(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "FusedMatMul") return n.get();
  return nullptr;
}

}  // namespace

TEST_CASE("constant matching: the allowance is a few ulps of the constant's dtype", "[passes][fp16][pattern]") {
  // Exactly representable values match exactly in every dtype.
  for (DType d : {DType::Float16, DType::BFloat16, DType::Float}) {
    INFO(dtype_name(d));
    CHECK(dtype_match_tolerance(2.0, d) == 0.0);
    CHECK(dtype_match_tolerance(0.5, d) == 0.0);
    CHECK(const_value_matches(2.0, 2.0, 0.0, d));
  }
  CHECK_FALSE(const_value_matches(2.001953125, 2.0, 0.0, DType::Float16));  // 2 + 1 fp16 ulp is not 2
  // sqrt(2): fp16 and bf16 hold 1.4140625 (1.5e-4 away, more than the passes' 1e-5).
  CHECK(const_value_matches(1.4140625, 1.41421356, 1e-5, DType::Float16));
  CHECK(const_value_matches(1.4140625, 1.41421356, 1e-5, DType::BFloat16));
  CHECK_FALSE(const_value_matches(1.4140625, 1.41421356, 1e-5, DType::Float));  // fp32 holds it far closer
  CHECK_FALSE(const_value_matches(1.5, 1.41421356, 1e-5, DType::Float16));
  // The allowance scales with the value (relative) and is 2 ulps of fp16 at 0.0447.
  CHECK(dtype_match_tolerance(0.044715, DType::Float16) == Approx(2 * std::ldexp(1.0, -15)));
  CHECK(const_value_matches(half_to_float(float_to_half(0.044715f)), 0.044715, 1e-6, DType::Float16));
  CHECK_FALSE(const_value_matches(0.046, 0.044715, 1e-6, DType::Float16));
  CHECK_FALSE(const_value_matches(std::nan(""), 1.0, 1.0, DType::Float16));
}

TEST_CASE("FusedMatMul: erf GELU with float16 / bfloat16 constants folds into the activation",
          "[passes][FusedMatMul][fp16]") {
  for (DType d : {DType::Float16, DType::BFloat16}) {
    for (bool div : {true, false}) {
      INFO(dtype_name(d) << (div ? " Div by sqrt(2)" : " Mul by 1/sqrt(2)"));
      HalfGraph h(d);
      h.b.output(h.erf_gelu(h.linear(h.b.input("a", d, {2, M, K})), div, div ? 1.41421356 : 0.70710678));
      auto before = clone_graph(h.b.graph());
      FusionReport r = run_one_pass(h.b.graph(), "FusedMatMul");
      CHECK(matched(r, "FusedMatMul") == 1);
      CHECK(h.b.graph().num_nodes() == 1);
      REQUIRE(only_fused(h.b.graph()));
      CHECK(only_fused(h.b.graph())->attr_string("activation", "") == "gelu");
      require_close(*before, h.b.graph(), h.feeds({2, M, K}), d);
    }
  }
}

TEST_CASE("FusedMatMul: tanh GELU with float16 constants folds into the activation", "[passes][FusedMatMul][fp16]") {
  HalfGraph h(DType::Float16);
  h.b.output(h.tanh_gelu(h.linear(h.b.input("a", DType::Float16, {2, M, K})), 0.044715, 0.7978845608));
  auto before = clone_graph(h.b.graph());
  FusionReport r = run_one_pass(h.b.graph(), "FusedMatMul");
  CHECK(matched(r, "FusedMatMul") == 1);
  CHECK(h.b.graph().num_nodes() == 1);
  REQUIRE(only_fused(h.b.graph()));
  CHECK(only_fused(h.b.graph())->attr_string("activation", "") == "gelu_tanh");
  require_close(*before, h.b.graph(), h.feeds({2, M, K}), DType::Float16);
}

TEST_CASE("FusedMatMul: a float16 constant that is not sqrt(2) is not a GELU", "[passes][FusedMatMul][fp16]") {
  HalfGraph h(DType::Float16);
  h.b.output(h.erf_gelu(h.linear(h.b.input("a", DType::Float16, {2, M, K})), true, 1.5));
  auto before = clone_graph(h.b.graph());
  run_one_pass(h.b.graph(), "FusedMatMul");
  CHECK(count_op(h.b.graph(), "Erf") == 1);  // the activation stays outside
  if (const Node* f = only_fused(h.b.graph())) CHECK(f->attr_string("activation", "") == "none");
  require_close(*before, h.b.graph(), h.feeds({2, M, K}), DType::Float16);
}

TEST_CASE("FusedMatMul: an fp32 constant is matched at fp32 precision, not fp16's", "[passes][FusedMatMul][fp16]") {
  // 1.4140625 (sqrt(2) as fp16) stored as float32 is a different model: no GELU.
  HalfGraph h(DType::Float);
  h.b.output(h.erf_gelu(h.linear(h.b.input("a", DType::Float, {2, M, K})), true, 1.4140625));
  run_one_pass(h.b.graph(), "FusedMatMul");
  CHECK(count_op(h.b.graph(), "Erf") == 1);
}

TEST_CASE("LayerNorm and RMSNorm from float16 primitives fuse with the fp16 epsilon", "[passes][LayerNorm][fp16]") {
  for (bool rms : {false, true}) {
    INFO((rms ? "RMSNorm" : "LayerNorm"));
    HalfGraph h(DType::Float16);
    Value* x = h.b.input("a", DType::Float16, {2, M, K});
    Value* axes = h.b.constant("axes", Tensor::from_ints({-1}, {1}));
    auto mean = [&](Value* v) { return h.b.op("ReduceMean", {v, axes}); };
    Value* d = rms ? x : h.b.op("Sub", {x, mean(x)});
    Value* var = mean(h.b.op("Pow", {d, h.scalar("two", 2.0)}));
    Value* sd = h.b.op("Sqrt", {h.b.op("Add", {var, h.scalar("eps", 1e-5)})});  // 1e-5 is subnormal in fp16
    Value* y = h.b.op("Mul", {h.b.op("Div", {d, sd}), h.rand("gamma", {K}, 5)});
    if (!rms) y = h.b.op("Add", {y, h.rand("beta", {K}, 6)});
    h.b.output(y);
    h.b.graph().opset_imports[""] = 18;  // ReduceMean axes as an input
    auto before = clone_graph(h.b.graph());
    FusionReport r = run_one_pass(h.b.graph(), rms ? "RMSNorm" : "LayerNorm");
    CHECK(matched(r, rms ? "RMSNorm" : "LayerNorm") == 1);
    REQUIRE(h.b.graph().num_nodes() == 1);
    const Node& f = **h.b.graph().nodes().begin();
    CHECK(f.op_type == (rms ? "RMSNorm" : "LayerNormalization"));
    // The epsilon the model adds: 1e-5 as fp16 holds it.
    CHECK(f.attr_float("epsilon", 0) == half_to_float(float_to_half(1e-5f)));
    require_close(*before, h.b.graph(), h.feeds({2, M, K}), DType::Float16);
  }
}
