// CUDA fuseopt.FusedMatMul with its residual input (input 3: Y = act(alpha·A·op(B) + bias) +
// residual, the residual read in Y's row-major order) against the CPU kernel: every path the
// runtime takes — cuBLASLt with the residual as its C matrix (activation none), the decode
// GEMVs with it in their epilogue (rows 1-8), and the in-place add after the GEMM everywhere
// else (an activation, a batched B). Fresh random inputs, outputs poisoned by the harness, odd
// sizes, fp32 / fp16 / bf16.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemv_nk_mma.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};

void check_against_cpu(OpCase& c, DType dt) {
  auto got = c.run_cuda(dt);
  auto want = c.run_cpu(dt);
  REQUIRE(got[0].dims == want[0].dims);
  const double err = cuda_check::rel_error(got[0], want[0]);
  INFO("relative error " << err);
  CHECK(err < cuda_check::tolerance(dt));
}

// FusedMatMul over A [.., K] and B ([K, N] or [N, K] with transB), with bias and a residual of
// `res_shape` (Y's element count).
struct ResidualCase {
  OpCase c{"fuseopt", "FusedMatMul", 4, 1};
  Tensor a, b, bias, res;
  ResidualCase(const std::vector<int64_t>& a_shape, const std::vector<int64_t>& b_shape,
               const std::vector<int64_t>& res_shape, const char* act, int trans_b, float alpha, bool with_bias) {
    c.attr(Attribute::make_string("activation", act));
    c.attr(Attribute::make_int("transB", trans_b));
    if (alpha != 1.f) c.attr(Attribute::make_float("alpha", alpha));
    a = cuda_check::random_tensor(a_shape);
    b = cuda_check::random_tensor(b_shape);
    bias = cuda_check::random_tensor({trans_b ? b_shape[b_shape.size() - 2] : b_shape.back()});
    // The residual stream's magnitude, comparable to the product's: leaving either out fails.
    res = cuda_check::random_tensor(res_shape, -3.f, 3.f);
    c.inputs = {&a, &b, with_bias ? &bias : nullptr, &res};
  }
};

}  // namespace

TEST_CASE("cuda FusedMatMul residual: cuBLASLt's C and the add after an activation", "[cuda][gemm][residual]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (const char* act : {"none", "relu", "gelu"})
      for (int trans_b = 0; trans_b < 2; ++trans_b)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          // 74 rows of 130 columns: no tile divides them. The residual as [B, S, N] and as the
          // GEMM's flat [B·S, N] (what the pass attaches through a Reshape).
          for (const std::vector<int64_t>& rs : {std::vector<int64_t>{2, 37, 130}, std::vector<int64_t>{74, 130}}) {
            ResidualCase r({2, 37, 96}, trans_b ? std::vector<int64_t>{130, 96} : std::vector<int64_t>{96, 130}, rs, act,
                           trans_b, trans_b ? 0.5f : 1.f, with_bias != 0);
            INFO(cuda_check::short_name(dt) << " activation " << act << " transB " << trans_b << " bias " << with_bias
                                            << " residual rank " << rs.size());
            check_against_cpu(r.c, dt);
          }
        }
}

TEST_CASE("cuda FusedMatMul residual: batched B takes the add after the GEMM", "[cuda][gemm][residual]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes) {
    ResidualCase r({3, 19, 40}, {3, 40, 24}, {3, 19, 24}, "none", 0, 1.f, true);
    INFO(cuda_check::short_name(dt));
    check_against_cpu(r.c, dt);
  }
}

TEST_CASE("cuda FusedMatMul residual at decode rows: the GEMVs add it in their epilogue",
          "[cuda][gemm_small_m][residual]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_small_m(1);  // the weight-streaming kernels at every shape they handle
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int rows : {1, 2, 5})  // 1-2: the CUDA-core kernels; 3-8 with [N, K]: the tensor-core GEMV
      for (int trans_b = 0; trans_b < 2; ++trans_b)
        for (const char* act : {"none", "gelu_tanh"}) {
          ResidualCase r({rows, 1, 200}, trans_b ? std::vector<int64_t>{136, 200} : std::vector<int64_t>{200, 136},
                         {rows, 136}, act, trans_b, 1.f, true);
          INFO(cuda_check::short_name(dt) << " rows " << rows << " transB " << trans_b << " activation " << act);
          const long long before = cuda_fused::gemm_small_m_launch_count();
          check_against_cpu(r.c, dt);
          // The residual went through the GEMV's epilogue, not a GEMM plus an add.
          CHECK(cuda_fused::gemm_small_m_launch_count() == before + 1);
        }
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda FusedMatMul residual of the wrong size is an error naming the node", "[cuda][gemm][residual]") {
  if (!cuda_check::gpu_ready()) return;
  ResidualCase r({4, 32}, {32, 16}, {4, 15}, "none", 0, 1.f, false);
  try {
    r.c.run_cuda(DType::Float16);
    FAIL("a 60-element residual for a 64-element Y was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("FusedMatMul_under_test") != std::string::npos);
    CHECK(what.find("residual") != std::string::npos);
  }
}
