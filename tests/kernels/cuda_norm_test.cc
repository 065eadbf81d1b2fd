// CUDA fuseopt.LayerNorm / RMSNorm / SkipLayerNorm / AddRelu against the CPU
// kernels: fresh random inputs, NaN-poisoned outputs, widths that are and are
// not multiples of the vector width, fp32 / fp16 / bf16.
#include <catch2/catch.hpp>

#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};
const int64_t kWidths[] = {768, 37, 1000, 4096, 8};

void check_case(OpCase& c, DType dt, size_t outputs = 1) {
  auto got = c.run_cuda(dt);
  auto want = c.run_cpu(dt);
  for (size_t i = 0; i < outputs; ++i) {
    INFO(c.node.op_type << " " << cuda_check::short_name(dt) << " output " << i << " shape "
                        << shape_str(want[i].dims));
    REQUIRE(got[i].dims == want[i].dims);
    double err = cuda_check::rel_error(got[i], want[i]);
    INFO("relative error " << err);
    CHECK(err < cuda_check::tolerance(dt));
  }
}

}  // namespace

TEST_CASE("cuda LayerNorm and RMSNorm", "[cuda][norm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (int64_t d : kWidths)
      for (int with_beta = 0; with_beta < 2; ++with_beta) {
        // A large mean (offset 5) checks the variance is computed stably.
        Tensor x = cuda_check::random_tensor({3, 7, d}, 4.f, 6.f);
        Tensor gamma = cuda_check::random_tensor({d}, 0.5f, 1.5f), beta = cuda_check::random_tensor({d});
        OpCase ln("fuseopt", "LayerNorm", 3, 1);
        ln.attr(Attribute::make_float("epsilon", 1e-5f));
        ln.inputs = {&x, &gamma, with_beta ? &beta : nullptr};
        INFO("D " << d << " beta " << with_beta);
        check_case(ln, dt);
        OpCase rms("fuseopt", "RMSNorm", 2, 1);
        rms.inputs = {&x, &gamma};
        check_case(rms, dt);
      }
}

// Wide rows (more than 128 16-byte vectors: the one-block-per-row kernel) on
// both sides of kFewRows in fused_norm.cu: one vector per thread for a few rows
// (a decode step's 1-8 rows), about four per thread for many.
TEST_CASE("cuda LayerNorm and RMSNorm: wide rows, few and many", "[cuda][norm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{255}, int64_t{300}})
      for (int64_t d : {int64_t{2048}, int64_t{5000}}) {
        Tensor x = cuda_check::random_tensor({rows, d}, 4.f, 6.f);
        Tensor gamma = cuda_check::random_tensor({d}, 0.5f, 1.5f), beta = cuda_check::random_tensor({d});
        OpCase ln("fuseopt", "LayerNorm", 3, 1);
        ln.attr(Attribute::make_float("epsilon", 1e-5f));
        ln.inputs = {&x, &gamma, &beta};
        INFO("rows " << rows << " D " << d);
        check_case(ln, dt);
        OpCase rms("fuseopt", "RMSNorm", 2, 1);
        rms.inputs = {&x, &gamma};
        check_case(rms, dt);
      }
}

TEST_CASE("cuda SkipLayerNorm", "[cuda][norm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (int64_t d : kWidths)
      for (int variant = 0; variant < 4; ++variant) {
        // 0: beta+bias, Sum output; 1: rms, no beta/bias; 2: skip broadcast [S, D];
        // 3: X broadcast [S, D] against a full skip, Sum output.
        const bool rms = variant == 1, sum_out = variant == 0 || variant == 3;
        Tensor x = cuda_check::random_tensor(variant == 3 ? std::vector<int64_t>{5, d} : std::vector<int64_t>{2, 5, d});
        Tensor skip = cuda_check::random_tensor(variant == 2 ? std::vector<int64_t>{5, d}
                                                             : std::vector<int64_t>{2, 5, d});
        Tensor gamma = cuda_check::random_tensor({d}, 0.5f, 1.5f), beta = cuda_check::random_tensor({d});
        Tensor bias = cuda_check::random_tensor({d});
        OpCase c("fuseopt", "SkipLayerNorm", 5, sum_out ? 2 : 1);
        c.attr(Attribute::make_float("epsilon", 1e-6f));
        c.attr(Attribute::make_int("rms", rms));
        c.inputs = {&x, &skip, &gamma, rms ? nullptr : &beta, rms ? nullptr : &bias};
        INFO("D " << d << " variant " << variant);
        check_case(c, dt, sum_out ? 2 : 1);
      }
}

TEST_CASE("cuda AddRelu", "[cuda][elementwise]") {
  if (!cuda_check::gpu_ready()) return;
  struct Shapes {
    std::vector<int64_t> a, b;
  };
  const Shapes cases[] = {
      {{4, 64, 56, 56}, {4, 64, 56, 56}},  // residual, vectorised
      {{1001}, {1001}},                     // tail after the vector part
      {{2, 3, 33}, {33}},                   // bias-like broadcast
      {{2, 1, 7}, {5, 1}},                  // both sides broadcast
      {{}, {3, 4}},                         // scalar
  };
  for (DType dt : kFloatTypes)
    for (const Shapes& s : cases) {
      OpCase c("fuseopt", "AddRelu", 2, 1);
      Tensor a = cuda_check::random_tensor(s.a), b = cuda_check::random_tensor(s.b);
      c.inputs = {&a, &b};
      INFO("A " << shape_str(s.a) << " B " << shape_str(s.b));
      check_case(c, dt);
    }
}
