// CUDA fuseopt.GatedMatMul (cuBLASLt GEMM into scratch + fp32 act(g) * u)
// against the CPU kernel, fresh random inputs, output poisoned with NaN,
// odd sizes, every activation, with and without bias, fp32 / tf32 / fp16 / bf16.
// Without a GPU every case returns after a WARN (cuda_check::gpu_ready).
#include <catch2/catch.hpp>

#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};

void check_case(OpCase& c, DType dt, Precision p = Precision::FP32) {
  auto got = c.run_cuda(dt, p);
  auto want = c.run_cpu(dt);
  INFO("GatedMatMul " << cuda_check::short_name(dt) << " shape " << shape_str(want[0].dims));
  REQUIRE(got[0].dims == want[0].dims);
  const double err = cuda_check::rel_error(got[0], want[0]);
  INFO("relative error " << err);
  CHECK(err < cuda_check::tolerance(dt, p));
}

}  // namespace

TEST_CASE("cuda GatedMatMul hand-computed silu with bias", "[cuda][GatedMatMul]") {
  if (!cuda_check::gpu_ready()) return;
  // Same numbers as tests/kernels/cpu_fused_gated_matmul_test.cc (numpy, float64).
  OpCase c("fuseopt", "GatedMatMul", 3, 1);
  c.attr(Attribute::make_string("activation", "silu"));
  Tensor a = Tensor::from_floats({1, 2, 3, -1, 0.5f, 2}, {2, 3});
  Tensor w = Tensor::from_floats({1, -1, 0.5f, 1, 0.5f, 2, -1, 0.25f, -2, 1, 1.5f, -0.5f}, {3, 4});
  Tensor b = Tensor::from_floats({0.25f, -3, 0.5f, 1}, {4});
  c.inputs = {&a, &w, &b};
  auto y = c.run_cuda(DType::Float)[0];
  REQUIRE(y.dims == std::vector<int64_t>{2, 2});
  const float want[] = {-0.30157798f, 2.85772238f, -0.123603105f, -0.639676256f};
  for (int i = 0; i < 4; ++i) CHECK(y.data<float>()[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("cuda GatedMatMul activations, biases, shapes and dtypes", "[cuda][GatedMatMul]") {
  if (!cuda_check::gpu_ready()) return;
  struct Shapes {
    std::vector<int64_t> a;
    int64_t n;
  };
  // N % 8 == 0 (136, 256, 520) takes the 16-byte vector gate kernel for every
  // dtype; 130, 3 and 33 the scalar one.
  const Shapes cases[] = {{{2, 37, 96}, 130}, {{5, 7}, 3},     {{1, 1, 64}, 256},
                          {{129, 65}, 33},    {{2, 37, 96}, 136}, {{3, 201, 64}, 520}};
  const char* acts[] = {"silu", "gelu", "gelu_tanh", "relu"};
  for (DType dt : kFloatTypes)
    for (const char* act : acts)
      for (int with_bias = 0; with_bias < 2; ++with_bias)
        for (const Shapes& s : cases) {
          OpCase c("fuseopt", "GatedMatMul", 3, 1);
          c.attr(Attribute::make_string("activation", act));
          Tensor a = cuda_check::random_tensor(s.a, -2.f, 2.f);
          Tensor w = cuda_check::random_tensor({s.a.back(), 2 * s.n});
          Tensor bias = cuda_check::random_tensor({2 * s.n});
          c.inputs = {&a, &w, with_bias ? &bias : nullptr};
          INFO("activation " << act << " bias " << with_bias << " A " << shape_str(s.a) << " N " << s.n);
          check_case(c, dt);
        }
}

TEST_CASE("cuda GatedMatMul tf32", "[cuda][GatedMatMul]") {
  if (!cuda_check::gpu_ready()) return;
  OpCase c("fuseopt", "GatedMatMul", 3, 1);
  c.attr(Attribute::make_string("activation", "silu"));
  Tensor a = cuda_check::random_tensor({4, 100, 300}), w = cuda_check::random_tensor({300, 154});
  Tensor bias = cuda_check::random_tensor({154});
  c.inputs = {&a, &w, &bias};
  check_case(c, DType::Float, Precision::TF32);
}

TEST_CASE("cuda GatedMatMul bad inputs are errors", "[cuda][GatedMatMul]") {
  if (!cuda_check::gpu_ready()) return;
  OpCase c("fuseopt", "GatedMatMul", 3, 1);
  c.attr(Attribute::make_string("activation", "silu"));
  Tensor a = cuda_check::random_tensor({4, 6}), w = cuda_check::random_tensor({6, 5});  // odd 2N
  c.inputs = {&a, &w, nullptr};
  CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
}
