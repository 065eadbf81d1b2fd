// Session: shape binding at run time, errors that name nodes and shapes, the
// one-shot missing-kernel check, views, constants (and which inputs a kernel may treat as
// constant), the profile.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>

#include "runtime/eval_node.h"
#include "runtime/session.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor filled(std::vector<int64_t> dims, float start = 0) {
  Tensor t(DType::Float, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}
}  // namespace

TEST_CASE("symbolic dims bind at run time and may change between runs", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {-1, -1, 4}, {"batch", "seq"});
  Value* w = b.constant("w", Tensor::from_floats({1, 0, 0, 1, 1, 1, 0, 0}, {4, 2}));
  b.output(b.op("MatMul", {x, w}));
  Session s(b.graph());
  for (auto dims : {std::vector<int64_t>{1, 3, 4}, {2, 5, 4}, {1, 3, 4}}) {
    Tensor in = filled(dims);
    std::vector<Tensor> out = s.run({{"x", in}});
    REQUIRE(out[0].dims == std::vector<int64_t>{dims[0], dims[1], 2});
    // row r: [x0 + x2, x1 + x2]
    const float* p = in.data<float>();
    CHECK(out[0].data<float>()[0] == p[0] + p[2]);
    CHECK(out[0].data<float>()[1] == p[1] + p[2]);
  }
}

TEST_CASE("inputs are validated against the model", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {-1, 4}, {"batch"});
  Value* m = b.input("m", DType::Float, {-1, 4}, {"batch"});
  b.output(b.op("Add", {x, m}));
  Session s(b.graph());
  REQUIRE_THROWS_WITH(s.run({{"x", filled({2, 4})}}), Catch::Contains("missing input 'm'"));
  REQUIRE_THROWS_WITH(s.run({{"x", filled({2, 4})}, {"m", filled({2, 4})}, {"z", filled({1})}}),
                      Catch::Contains("unknown input 'z'"));
  REQUIRE_THROWS_WITH(s.run({{"x", filled({2, 3})}, {"m", filled({2, 4})}}),
                      Catch::Contains("'x'") && Catch::Contains("[2,3]") && Catch::Contains("[batch,4]"));
  REQUIRE_THROWS_WITH(s.run({{"x", filled({2, 4})}, {"m", filled({3, 4})}}), Catch::Contains("batch"));
  REQUIRE_THROWS_WITH(s.run({{"x", Tensor::from_ints({1, 2, 3, 4}, {1, 4})}, {"m", filled({1, 4})}}),
                      Catch::Contains("int64") && Catch::Contains("float32"));
  // After errors the session still runs.
  CHECK(s.run({{"x", filled({1, 4})}, {"m", filled({1, 4})}})[0].dims == std::vector<int64_t>{1, 4});
}

TEST_CASE("missing kernels are all named at once, before running", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Value* a = b.op("NoSuchOp", {x}, {}, "first");
  Value* c = b.op("NoSuchOp", {a}, {}, "second");
  b.output(b.op("Other", {c}, {}, "third", "my.domain"));
  try {
    Session s(b.graph());
    FAIL("expected an Error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK(m.find("NoSuchOp") != std::string::npos);
    CHECK(m.find("'first'") != std::string::npos);
    CHECK(m.find("'second'") != std::string::npos);
    CHECK(m.find("Other (domain 'my.domain')") != std::string::npos);
    CHECK(m.find("'third'") != std::string::npos);
  }
  auto missing = Session::missing_kernels(b.graph(), Backend::CPU);
  CHECK(missing.size() == 1);
}

TEST_CASE("a run-time shape error names the node and the shapes", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {-1, 3}, {"n"});
  Value* shape = b.constant("shape", Tensor::from_ints({4, 4}, {2}));
  b.output(b.op("Reshape", {x, shape}, {}, "the_reshape"));
  Session s(b.graph());
  REQUIRE_THROWS_WITH(s.run({{"x", filled({2, 3})}}), Catch::Contains("the_reshape") && Catch::Contains("[2,3]"));
}

TEST_CASE("views, constant folding and outputs that are inputs or constants", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Value* shape = b.constant("shape", Tensor::from_ints({3, 2}, {2}));
  Value* r = b.op("Reshape", {x, shape});          // a view of the input
  Value* two = b.constant("two", Tensor::from_floats({2}, {1}));
  Value* four = b.op("Add", {two, two}, {}, "fold_me");  // constant inputs: folded at creation
  Value* y = b.op("Mul", {r, four});
  b.output(y);
  b.output(r);
  b.output(x);
  b.output(four);
  Session s(b.graph());
  Tensor in = filled({2, 3}, 1);
  std::vector<Tensor> out = s.run({{"x", in}});
  REQUIRE(out.size() == 4);
  CHECK(out[0].dims == std::vector<int64_t>{3, 2});
  for (int i = 0; i < 6; ++i) CHECK(out[0].data<float>()[i] == 4.f * (i + 1));
  CHECK(out[1].dims == std::vector<int64_t>{3, 2});
  CHECK(out[1].bytes == in.bytes);
  CHECK(out[2].dims == in.dims);
  CHECK(out[3].data<float>()[0] == 4.f);
  // The folded node does not appear in the profile (it never runs).
  for (const NodeProfile& n : s.profile().nodes) CHECK(n.name != "fold_me");
}

TEST_CASE("profile counts node executions and groups by op type", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {8});
  b.output(b.op("Relu", {b.op("Neg", {b.op("Relu", {x})})}));
  SessionOptions o;
  o.profile = true;
  Session s(b.graph(), o);
  for (int i = 0; i < 3; ++i) s.run({{"x", filled({8}, -4)}});
  CHECK(s.profile().runs == 3);
  REQUIRE(s.profile().nodes.size() == 3);
  for (const NodeProfile& n : s.profile().nodes) CHECK(n.calls == 3);
  auto ops = s.profile().by_op_type();
  REQUIRE(ops.size() == 2);
  int64_t relu_nodes = 0;
  for (const OpProfile& op : ops)
    if (op.op == "Relu") relu_nodes = op.nodes;
  CHECK(relu_nodes == 2);
}

TEST_CASE("CPU backend refuses fp16/bf16 and computes tf32 as fp32", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  b.output(b.op("Relu", {x}));
  SessionOptions o;
  o.precision = Precision::FP16;
  REQUIRE_THROWS_WITH(Session(b.graph(), o), Catch::Contains("fp16") && Catch::Contains("cpu"));
  o.precision = Precision::TF32;
  Session s(b.graph(), o);
  CHECK(s.run({{"x", Tensor::from_floats({-1, 2}, {2})}})[0].data<float>()[1] == 2.f);
}

TEST_CASE("eval_node_cpu throws for an op without a kernel", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Node* n = b.node("NoSuchOp", {x});
  Tensor t = Tensor::from_floats({1, 2}, {2});
  REQUIRE_THROWS_WITH(eval_node_cpu(*n, {&t}), Catch::Contains("NoSuchOp"));
  CHECK(!has_cpu_kernel(*n, {&t}));
}

TEST_CASE("Softmax in an opset-11 model flattens to 2-D at axis 1", "[session]") {
  GraphBuilder b(11);
  Value* x = b.input("x", DType::Float, {1, 2, 2});
  b.output(b.op("Softmax", {x}));
  Session s(b.graph());
  // One row of 4: softmax over all of [1,2,3,4] (opset 13 would do rows of 2).
  std::vector<Tensor> out = s.run({{"x", Tensor::from_floats({1, 2, 3, 4}, {1, 2, 2})}});
  const float want[] = {0.0320586f, 0.0871443f, 0.2368828f, 0.6439142f};
  for (int i = 0; i < 4; ++i) CHECK(out[0].data<float>()[i] == Approx(want[i]).epsilon(1e-5));
  GraphBuilder b13(13);
  Value* x13 = b13.input("x", DType::Float, {1, 2, 2});
  b13.output(b13.op("Softmax", {x13}));
  Session s13(b13.graph());
  out = s13.run({{"x", Tensor::from_floats({1, 2, 3, 4}, {1, 2, 2})}});
  CHECK(out[0].data<float>()[0] == Approx(0.2689414f).epsilon(1e-5));
}

// FUSEOPT_WEIGHT_NK=1 applies the weight layout of 16-bit CUDA sessions on the CPU backend too
// (FusedMatMul only there): a constant B read only as FusedMatMul's weight is stored [N, K]
// and the step runs with transB; one with another reader keeps its layout. Same results.
TEST_CASE("weight layout: constant FusedMatMul weights stored [N, K] where that is all they are", "[session]") {
  struct Env {
    explicit Env(const char* v) { setenv("FUSEOPT_WEIGHT_NK", v, 1); }
    ~Env() { unsetenv("FUSEOPT_WEIGHT_NK"); }
  };
  auto build = [](bool shared) {
    GraphBuilder b;
    Value* x = b.input("x", DType::Float, {2, 3, 4});
    Value* w = b.constant("w", Tensor::from_floats({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}));
    Value* y = b.op("FusedMatMul", {x, w}, {}, "mm", "fuseopt");
    b.output(y);
    if (shared) b.output(b.op("Add", {b.input("z", DType::Float, {4, 3}), w}));  // another reader: the layout stays
    return b.release();
  };
  Tensor in = filled({2, 3, 4}, -3.f);
  for (bool shared : {false, true}) {
    INFO("shared " << shared);
    auto g = build(shared);
    Session plain(*g);
    std::map<std::string, Tensor> feeds{{"x", in}};
    if (shared) feeds["z"] = filled({4, 3});
    const std::vector<Tensor> want = plain.run(feeds);
    CHECK(plain.weights_stored_nk() == 0);
    Env on("1");
    Session nk(*g);
    const std::vector<Tensor> got = nk.run(feeds);
    CHECK(nk.weights_stored_nk() == (shared ? 0u : 1u));
    REQUIRE(got[0].dims == want[0].dims);
    for (int64_t i = 0; i < want[0].numel(); ++i) CHECK(got[0].data<float>()[i] == want[0].data<float>()[i]);
  }
}

// LayerNormLinear's W (input 3) takes the same layout (the decode rows' norm + GEMV kernel
// needs [N, K]); its gamma (input 1), read by the same step, is never a weight.
TEST_CASE("weight layout: LayerNormLinear's W stored [N, K], its gamma left alone", "[session]") {
  struct Env {
    explicit Env(const char* v) { setenv("FUSEOPT_WEIGHT_NK", v, 1); }
    ~Env() { unsetenv("FUSEOPT_WEIGHT_NK"); }
  };
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 4});
  Value* gamma = b.constant("gamma", Tensor::from_floats({1.f, 0.5f, 2.f, -1.f}, {4}));
  Value* w = b.constant("w", Tensor::from_floats({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}));
  Value* y = b.op("LayerNormLinear", {x, gamma, nullptr, w}, {Attribute::make_int("rms", 1)}, "lnl", "fuseopt");
  b.output(y);
  auto g = b.release();
  const Tensor in = Tensor::from_floats({0.5f, -1.f, 2.f, 3.f, -2.f, 1.f, 0.25f, 4.f}, {2, 4});
  Session plain(*g);
  const std::vector<Tensor> want = plain.run({{"x", in}});
  Env on("1");
  Session nk(*g);
  const std::vector<Tensor> got = nk.run({{"x", in}});
  CHECK(nk.weights_stored_nk() == 1u);
  REQUIRE(got[0].dims == want[0].dims);
  for (int64_t i = 0; i < want[0].numel(); ++i) CHECK(got[0].data<float>()[i] == Approx(want[0].data<float>()[i]).epsilon(1e-6));
}

// KernelContext::input_is_constant / input_is_run_stable: the CUDA GEMVs read a weight, the decode
// attention a mask, before their programmatic-launch wait only where the session says no kernel of
// the run writes it (a wrong "true" would be a race). A probe kernel (test-only op) reports both for
// each of its inputs: a graph input, an initializer, a Constant node's output, a value computed by a step.
namespace {
FUSEOPT_KERNEL(cpu_test_const_probe, "fuseopt.test", "ConstProbe", Backend::CPU, {}) {
  const int64_t n = static_cast<int64_t>(ctx.num_inputs());
  RtTensor* y = ctx.output(0, DType::Float, {2, n + 1});
  float* p = y->ptr<float>();
  for (int64_t i = 0; i <= n; ++i) {  // index n: past the inputs
    p[i] = ctx.input_is_constant(size_t(i)) ? 1.f : 0.f;
    p[n + 1 + i] = ctx.input_is_run_stable(size_t(i)) ? 1.f : 0.f;
  }
}
}  // namespace

TEST_CASE("input_is_constant and input_is_run_stable: what no kernel of a run writes", "[session]") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2});
  Value* w = b.constant("w", Tensor::from_floats({1.f, 2.f}, {2}));
  Value* c = b.op("Constant", {}, {Attribute::make_tensor("value", Tensor::from_floats({3.f, 4.f}, {2}))}, "c");
  Value* r = b.op("Relu", {x}, {}, "r");
  Value* probe = b.op("ConstProbe", {x, w, c, r}, {}, "probe", "fuseopt.test");
  b.output(probe);
  b.output(r);
  Session s(b.graph());
  const std::vector<Tensor> out = s.run({{"x", Tensor::from_floats({-1.f, 1.f}, {2})}});
  REQUIRE(out[0].numel() == 10);
  const float* constant = out[0].data<float>();
  const float* stable = constant + 5;
  // graph input (copied in as given), initializer, Constant node (folded at setup), computed, none
  const float want_constant[5] = {0.f, 1.f, 1.f, 0.f, 0.f};
  const float want_stable[5] = {1.f, 1.f, 1.f, 0.f, 0.f};
  for (int i = 0; i < 5; ++i) {
    INFO("input " << i);
    CHECK(constant[i] == want_constant[i]);
    CHECK(stable[i] == want_stable[i]);
  }
}
