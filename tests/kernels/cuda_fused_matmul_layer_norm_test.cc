// CUDA fuseopt.FusedMatMulLayerNorm (cuBLASLt GEMM + bias epilogue into scratch,
// then one GELU + LayerNorm row kernel) against the CPU kernel: fresh random
// inputs, output and scratch poisoned with NaN (cuda_check::DeviceContext), row
// counts that do not divide the warp kernel's 4 rows per block, hidden sizes
// 768 and 1024 (BERT base / large), 80 and 1000, and sizes that take each of the
// row kernel's paths (warp, block with 16-byte vectors, block scalar, a row over
// 48 KB of shared memory); erf and tanh GELU, with and without bias and beta,
// transB and alpha, fp32 / tf32 / fp16 / bf16, K = 0, bad inputs.
// The residual form (skip, activation none): the Hopper cluster kernel (opt-in; forced on for every
// row count and two tile widths, its launches counted on a compute-capability 9.0 device so a case
// cannot pass through the fallback unnoticed) and the GEMM + SkipLayerNorm kernel path (fp32, the
// switch off: the default).
// Without a GPU every case returns after a WARN (cuda_check::gpu_ready).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cuda/fused_matmul_layer_norm.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

const DType kFloatTypes[] = {DType::Float, DType::Float16, DType::BFloat16};

struct Shape3 {
  std::vector<int64_t> a;  // A [..., K]
  int64_t n;
};

struct Inputs {
  Tensor a, w, bias, gamma, beta;
};

// W scaled by 2/sqrt(K), so h spreads over GELU's curved part instead of its linear tails.
Inputs random_inputs(const std::vector<int64_t>& a_shape, int64_t n, bool trans_b) {
  const int64_t K = a_shape.back();
  const float s = K > 0 ? 2.f / std::sqrt(static_cast<float>(K)) : 1.f;
  Inputs in;
  in.a = cuda_check::random_tensor(a_shape, -1.f, 1.f);
  in.w = cuda_check::random_tensor(trans_b ? std::vector<int64_t>{n, K} : std::vector<int64_t>{K, n}, -s, s);
  in.bias = cuda_check::random_tensor({n}, -0.5f, 0.5f);
  in.gamma = cuda_check::random_tensor({n}, 0.5f, 1.5f);
  in.beta = cuda_check::random_tensor({n}, -0.5f, 0.5f);
  return in;
}

void set_attrs(OpCase& c, const char* act, bool trans_b, float alpha, float eps = 1e-5f) {
  c.attr(Attribute::make_string("activation", act));
  c.attr(Attribute::make_int("transB", trans_b ? 1 : 0));
  c.attr(Attribute::make_float("alpha", alpha));
  c.attr(Attribute::make_float("epsilon", eps));
}

void check_case(OpCase& c, DType dt, Precision p = Precision::FP32) {
  auto got = c.run_cuda(dt, p);
  auto want = c.run_cpu(dt);
  INFO("FusedMatMulLayerNorm " << cuda_check::short_name(dt) << " Y " << shape_str(want[0].dims));
  REQUIRE(got[0].dims == want[0].dims);
  const double err = cuda_check::rel_error(got[0], want[0]);
  INFO("relative error " << err);
  CHECK(err < cuda_check::tolerance(dt, p));
}

// The row kernel the launcher picks for rows of n elements of dt (16-byte aligned pointers).
std::string path_for(DType dt, int64_t n) {
  cuda_fused::GeluLayerNormArgs a;
  a.dtype = dt;
  a.rows = 1;
  a.D = n;
  a.h = a.gamma = a.y = reinterpret_cast<void*>(uintptr_t{256});
  return cuda_fused::gelu_layer_norm_kernel_name(a);
}

}  // namespace

TEST_CASE("cuda FusedMatMulLayerNorm: the row-kernel paths the sizes below take", "[cuda][FusedMatMulLayerNorm]") {
  // Host-side choice only (no launch), so it runs without a GPU too: the shape
  // table of the next test covers every path of launch_gelu_layer_norm.
  CHECK(path_for(DType::Float16, 768) == "warp");
  CHECK(path_for(DType::BFloat16, 1024) == "warp");
  CHECK(path_for(DType::Float, 1024) == "warp");
  CHECK(path_for(DType::Float, 80) == "warp");
  CHECK(path_for(DType::Float16, 1000) == "warp");
  CHECK(path_for(DType::Float16, 1032) == "block_vec");
  CHECK(path_for(DType::Float, 1028) == "block_vec");
  CHECK(path_for(DType::Float16, 13000) == "block_vec");  // 52 KB of fp32 row: over the default 48 KB
  CHECK(path_for(DType::Float16, 97) == "block_scalar");
  CHECK(path_for(DType::Float, 1030) == "block_scalar");
}

TEST_CASE("cuda FusedMatMulLayerNorm: shapes, GELU forms, optional inputs and dtypes", "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  // Rows 74, 130, 7, 1, 5, 111, 37, 4: all but the last leave the warp kernel's
  // last block of 4 rows part-empty; K 100, 33 and 40 divide no GEMM tile.
  const Shape3 cases[] = {{{2, 37, 100}, 768},  {{130, 64}, 1024}, {{7, 33}, 80},   {{1, 1, 96}, 1000},
                          {{5, 48}, 97},        {{3, 37, 64}, 1032}, {{37, 40}, 1028}, {{2, 2, 32}, 13000}};
  for (DType dt : kFloatTypes)
    for (const char* act : {"gelu", "gelu_tanh"})
      for (const Shape3& s : cases) {
        const bool trans_b = s.n % 2 == 0;  // both layouts over the table
        Inputs in = random_inputs(s.a, s.n, trans_b);
        OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
        set_attrs(c, act, trans_b, 1.f);
        c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta};
        INFO(act << " A " << shape_str(s.a) << " N " << s.n << " transB " << trans_b << " path "
                 << path_for(dt, s.n));
        check_case(c, dt);
      }
}

TEST_CASE("cuda FusedMatMulLayerNorm: without bias or beta, with alpha", "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : kFloatTypes)
    for (int variant = 0; variant < 3; ++variant) {
      Inputs in = random_inputs({3, 41, 768}, 768, false);
      OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
      set_attrs(c, variant == 1 ? "gelu_tanh" : "gelu", false, variant == 2 ? 0.375f : 1.f, 1e-12f);
      c.inputs = {&in.a, &in.w, variant == 0 ? nullptr : &in.bias, &in.gamma, variant == 1 ? nullptr : &in.beta};
      INFO("variant " << variant << " (0: no bias, 1: no beta, 2: alpha)");
      check_case(c, dt);
    }
}

TEST_CASE("cuda FusedMatMulLayerNorm: tf32 and K = 0", "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  {
    Inputs in = random_inputs({4, 100, 300}, 1024, true);
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
    set_attrs(c, "gelu", true, 1.f);
    c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta};
    check_case(c, DType::Float, Precision::TF32);
  }
  for (DType dt : kFloatTypes) {
    // No product: every row is the norm of gelu(bias).
    Inputs in = random_inputs({2, 3, 0}, 80, false);
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
    set_attrs(c, "gelu", false, 1.f);
    c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta};
    check_case(c, dt);
  }
}

TEST_CASE("cuda FusedMatMulLayerNorm: bad inputs are errors", "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  Inputs in = random_inputs({4, 6}, 8, false);
  {
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
    set_attrs(c, "relu", false, 1.f);  // not a GELU
    c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta};
    CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
  }
  {
    Tensor w = cuda_check::random_tensor({5, 8});  // K = 6 against 5 rows
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
    set_attrs(c, "gelu", false, 1.f);
    c.inputs = {&in.a, &w, &in.bias, &in.gamma, &in.beta};
    CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
  }
  {
    Tensor g = cuda_check::random_tensor({7});  // gamma [7] for N = 8
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 5, 1);
    set_attrs(c, "gelu", false, 1.f);
    c.inputs = {&in.a, &in.w, &in.bias, &g, &in.beta};
    CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
  }
}

TEST_CASE("cuda FusedMatMulLayerNorm with skip: the Hopper cluster kernel and the two-kernel path",
          "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  struct Case {
    std::vector<int64_t> a;  // A [..., K]
    int64_t n;
    bool trans_b;
  };
  // N 768 = 4 x 192, 1024 = 4 x 256, 512 = 4 x 128, 384 = 2 x 192, 2048 = 8 x 256; rows 300 and 37
  // (the last row tile part-empty: its rows past M are computed and clipped by the TMA store),
  // 4103 (more row tiles than clusters at once: the persistent walk reuses the residual buffer
  // and both partial-sum sets), 1. K 200, 72 and 136 divide no 64-wide k-step.
  const Case cases[] = {{{300, 200}, 768, true},  {{2, 150, 72}, 1024, false}, {{4103, 64}, 768, false},
                        {{1, 1, 200}, 512, true}, {{3, 100, 96}, 384, false},  {{37, 136}, 768, false},
                        {{130, 64}, 2048, true}};
  const bool hopper = cuda_check::device_is_hopper();
  // Forced on with the tile width by shape, forced on with 128-column tiles (6-8 blocks a cluster,
  // and at 4103 rows more row tiles than clusters held), then off (the two-kernel path).
  for (int config = 0; config < 3; ++config) {
    const int forced = config < 2 ? 1 : 0;
    const int tile = config == 1 ? 128 : 0;
    cuda_fused::set_gemm_layer_norm_hopper(forced);
    cuda_fused::set_gemm_layer_norm_hopper_tile_n(tile);
    for (DType dt : kFloatTypes)
      for (const Case& s : cases)
        for (int variant = 0; variant < 2; ++variant) {
          Inputs in = random_inputs(s.a, s.n, s.trans_b);
          std::vector<int64_t> yshape = s.a;
          yshape.back() = s.n;
          Tensor skip = cuda_check::random_tensor(yshape, -2.f, 2.f);
          OpCase c("fuseopt", "FusedMatMulLayerNorm", 6, 1);
          set_attrs(c, "none", s.trans_b, variant ? 0.5f : 1.f, 1e-12f);
          // variant 1: no bias, no beta (their slots empty), alpha 0.5.
          c.inputs = {&in.a, &in.w, variant ? nullptr : &in.bias, &in.gamma, variant ? nullptr : &in.beta, &skip};
          INFO("skip: A " << shape_str(s.a) << " N " << s.n << " transB " << s.trans_b << " variant " << variant
                          << " config " << config << " (0: by shape, 1: 128-column tiles, 2: two kernels)");
          const long long before = cuda_fused::gemm_layer_norm_hopper_launch_count();
          check_case(c, dt);
          const long long launched = cuda_fused::gemm_layer_norm_hopper_launch_count() - before;
          const int64_t slices = tile ? s.n / tile : 0;
          const bool fits = tile == 0 || (s.n % tile == 0 && (slices == 2 || slices == 3 || slices == 4 ||
                                                              slices == 6 || slices == 8));
          if (forced && hopper && dt != DType::Float && fits) CHECK(launched == 1);
          else CHECK(launched == 0);
        }
  }
  cuda_fused::set_gemm_layer_norm_hopper(-1);
  cuda_fused::set_gemm_layer_norm_hopper_tile_n(0);
}

TEST_CASE("cuda FusedMatMulLayerNorm with skip: bad inputs are errors", "[cuda][FusedMatMulLayerNorm]") {
  if (!cuda_check::gpu_ready()) return;
  Inputs in = random_inputs({4, 6}, 8, false);
  {
    Tensor skip = cuda_check::random_tensor({4, 8});
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 6, 1);
    set_attrs(c, "gelu", false, 1.f);  // a GELU with a residual is not this op's form
    c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta, &skip};
    CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
  }
  {
    Tensor skip = cuda_check::random_tensor({1, 8});  // broadcast, not Y's shape
    OpCase c("fuseopt", "FusedMatMulLayerNorm", 6, 1);
    set_attrs(c, "none", false, 1.f);
    c.inputs = {&in.a, &in.w, &in.bias, &in.gamma, &in.beta, &skip};
    CHECK_THROWS_AS(c.run_cuda(DType::Float), Error);
  }
}
