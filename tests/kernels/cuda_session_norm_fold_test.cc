// The session's RMSNorm fold (session_setup.cc, fold_rms_norms): in a 16-bit CUDA session an
// RMSNorm whose only reader is a GatedMatMul becomes part of that step. At 128 rows and more on
// Hopper the gated GEMM applies each row's 1/rms itself (gemm_hopper_prenorm.cuh), with the
// norm's gamma folded into the uploaded weight; below, and off Hopper, the step runs the norm
// kernel (without gamma) first. Each route against the CPU backend (1e-2 norm-wise),
// with the captured graph's replay bit-identical to the eager run; and the folds that must not
// happen: the normalised value is also a graph output, the weight is shared with another
// GatedMatMul (it cannot hold two gammas), or FUSEOPT_FOLD_NORM unset (opt-in until measured).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/cuda_session_check.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

namespace {

constexpr int64_t kK = 264, kN = 520;  // K off the 64-wide k-tile; N a whole number of neither tile

// x [1, S, K] -> RMSNorm(gamma) -> GatedMatMul(W [K, 2N], bias, silu) -> y; with `norm_out` the
// normalised value is a graph output too (its only GEMM reader is then not its only reader).
std::unique_ptr<Graph> build(bool norm_out) {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {1, -1, kK}, {"", "seq"});
  Value* z = b.op("RMSNorm", {x, b.constant("gamma", uniform({kK}, 0.5f, 1.5f))},
                  {Attribute::make_float("epsilon", 1e-6f)}, "norm", "fuseopt");
  Value* y = b.op("GatedMatMul", {z, b.constant("w", randn({kK, 2 * kN}, 0.1f)), b.constant("bias", randn({2 * kN}, 0.5f))},
                  {Attribute::make_string("activation", "silu")}, "gate_up", "fuseopt");
  b.output(y);
  if (norm_out) b.output(z);
  return b.release();
}

// Two layers' norms (their own gammas) before GatedMatMuls that share one weight (ALBERT-style
// sharing): the weight cannot hold both gammas, so neither norm is folded.
std::unique_ptr<Graph> build_shared_weight() {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {1, -1, kK}, {"", "seq"});
  Value* w = b.constant("w", randn({kK, 2 * kK}, 0.1f));
  Value* h = x;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string l = std::to_string(layer);
    Value* z = b.op("RMSNorm", {h, b.constant("gamma" + l, uniform({kK}, 0.5f, 1.5f))},
                    {Attribute::make_float("epsilon", 1e-6f)}, "norm" + l, "fuseopt");
    h = b.op("GatedMatMul", {z, w}, {Attribute::make_string("activation", "silu")}, "gate_up" + l, "fuseopt");
  }
  b.output(h);
  return b.release();
}

// Every output of g on CUDA at p, at seq rows, against the CPU (float_output_errors: eager,
// captured and replayed, the replay bit-identical).
void check_rows(const Graph& g, Precision p, int64_t seq) {
  INFO(precision_name(p) << " rows " << seq);
  for (double err : float_output_errors(g, {{"x", randn({1, seq, kK}, 2.f, 0.5f)}}, p)) {
    INFO("norm-wise relative error " << err);
    CHECK(err <= 1e-2);
  }
}

// FUSEOPT_FOLD_NORM set for the scope (the fold is opt-in), restored after.
struct FoldSwitch {
  std::string old;
  bool had = false;
  explicit FoldSwitch(const char* v) {
    if (const char* e = std::getenv("FUSEOPT_FOLD_NORM")) old = e, had = true;
    if (v) setenv("FUSEOPT_FOLD_NORM", v, 1);
    else unsetenv("FUSEOPT_FOLD_NORM");
  }
  ~FoldSwitch() {
    if (had) setenv("FUSEOPT_FOLD_NORM", old.c_str(), 1);
    else unsetenv("FUSEOPT_FOLD_NORM");
  }
};

size_t folded(const Graph& g, Precision p) {
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.precision = p;
  return Session(g, o).norms_folded();
}

}  // namespace

TEST_CASE("cuda Session runs an RMSNorm inside the GatedMatMul that reads it", "[cuda][session][norm][gemm_hopper]") {
  std::unique_ptr<Graph> g = build(false);
  FoldSwitch on("1");
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  REQUIRE(Session(*g, cpu_o).norms_folded() == 0);  // the CPU backend keeps the norm step (runs in CI too)
  if (!gpu_ready()) return;
  for (Precision p : {Precision::FP16, Precision::BF16}) {
    CHECK(folded(*g, p) == 1);
    // 128 and 300 rows: the gated Hopper GEMM with the norm inside (on compute capability 9.0);
    // 100: the norm kernel then cuBLASLt and the gate pass; 4: the norm kernel then the decode GEMV.
    for (int64_t seq : {128, 300, 100, 4}) check_rows(*g, p, seq);
  }
  CHECK(folded(*g, Precision::FP32) == 0);  // only 16-bit sessions
}

TEST_CASE("cuda Session keeps the RMSNorms it cannot fold", "[cuda][session][norm]") {
  if (!gpu_ready()) return;
  {
    FoldSwitch on("1");
    std::unique_ptr<Graph> g = build(true);
    CHECK(folded(*g, Precision::FP16) == 0);
    check_rows(*g, Precision::FP16, 128);
    std::unique_ptr<Graph> shared = build_shared_weight();
    CHECK(folded(*shared, Precision::FP16) == 0);
    check_rows(*shared, Precision::FP16, 128);
  }
  std::unique_ptr<Graph> plain = build(false);
  FoldSwitch off(nullptr);  // unset: the default keeps the norm steps (opt-in until measured)
  CHECK(folded(*plain, Precision::FP16) == 0);
}
