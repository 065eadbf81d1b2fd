// The split-K Hopper GEMM for few rows (kernels/cuda/gemm_splitk_hopper.cu): against a host fp64
// reference on fresh random inputs with Y NaN-poisoned first, at sizes that divide none of its
// tiles (64 / 128 rows, 128 columns, 64 of K) — 1, 37, 64, 65 and 128 rows; N 8, 136, 776; K 8
// to 3080 — with 1 block a tile (no reduction), several, an uneven split of the k-tiles, and 16
// (the non-portable cluster); fp16 and bf16; B [K, N] and [N, K]; every activation; bias and
// residual on and off; B requested before the launch wait or after; bit-identical reruns; the
// arguments it must refuse (nothing launched); and FusedMatMul / LayerNormLinear through the
// kernel registry with the switch on (the launch count says the kernel ran). On a GPU that is not
// compute capability 9.0 the cases report skipped, with the reason.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_splitk_hopper.h"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_check::ck;
using cuda_check::DevBuf;
using cuda_check::download;
using cuda_check::OpCase;
using cuda_check::upload;
using cuda_fused::HopperGemmAct;

bool hopper_ready() {
  if (!cuda_check::gpu_ready()) return false;
  int dev = 0, major = 0, minor = 0;
  ck(cudaGetDevice(&dev), "device");
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) {
    WARN("CUDA tests skipped: the split-K Hopper GEMM needs compute capability 9.0, this device is " << major << "."
                                                                                                    << minor);
    return false;
  }
  return true;
}

// A [M, K], B [K, N] (and its [N, K] copy), bias [N], residual [M, N]; the fp64 product once.
struct Problem {
  DType dt;
  int64_t M, K, N;
  std::vector<float> A, B, bias, res;
  std::vector<double> pre;
  DevBuf dA, dB, dBt, dbias, dres, dY;
  Problem(DType d, int64_t m, int64_t k, int64_t n)
      : dt(d), M(m), K(k), N(n), A(cuda_check::random_values(d, m * k, -2.f, 2.f)),
        B(cuda_check::random_values(d, k * n, -0.3f, 0.3f)), bias(cuda_check::random_values(d, n, -1.f, 1.f)),
        res(cuda_check::random_values(d, m * n, -1.f, 1.f)), dA(m * k * 2), dB(k * n * 2), dBt(k * n * 2),
        dbias(n * 2), dres(m * n * 2), dY(m * n * 2 + 16) {
    upload(dt, dA.p, A);
    upload(dt, dB.p, B);
    std::vector<float> bt(k * n);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t nn = 0; nn < n; ++nn) bt[nn * k + kk] = B[kk * n + nn];
    upload(dt, dBt.p, bt);
    upload(dt, dbias.p, bias);
    upload(dt, dres.p, res);
    pre.assign(M * N, 0.0);
    for (int64_t mm = 0; mm < M; ++mm)
      for (int64_t kk = 0; kk < K; ++kk) {
        const double a = A[mm * K + kk];
        for (int64_t nn = 0; nn < N; ++nn) pre[mm * N + nn] += a * B[kk * N + nn];
      }
  }
  void poison(cudaStream_t s) { ck(cudaMemsetAsync(dY.p, 0xFF, M * N * 2, s), "poison"); }
  std::vector<double> reference(bool with_bias, bool with_res, HopperGemmAct act) const {
    std::vector<double> y(M * N);
    for (int64_t i = 0; i < M * N; ++i) {
      double v = pre[i] + (with_bias ? bias[i % N] : 0.0);
      switch (act) {
        case HopperGemmAct::Relu: v = v > 0 ? v : 0; break;
        case HopperGemmAct::GeluErf: v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
        case HopperGemmAct::GeluTanh:
          v = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          break;
        case HopperGemmAct::Relu2: v = v > 0 ? v * v : 0; break;
        default: break;
      }
      y[i] = v + (with_res ? res[i] : 0.0);
    }
    return y;
  }
  cuda_fused::SplitKGemm args(bool b_nk, bool with_bias, bool with_res, HopperGemmAct act, bool b_const) {
    cuda_fused::SplitKGemm s;
    s.g.dt = dt;
    s.g.a = dA.p;
    s.g.b = b_nk ? dBt.p : dB.p;
    s.g.b_nk = b_nk;
    s.g.bias = with_bias ? dbias.p : nullptr;
    s.g.y = dY.p;
    s.g.M = M;
    s.g.N = N;
    s.g.K = K;
    s.g.act = act;
    s.residual = with_res ? dres.p : nullptr;
    s.b_const = b_const;
    return s;
  }
};

const char* act_name(HopperGemmAct a) {
  switch (a) {
    case HopperGemmAct::Relu: return "relu";
    case HopperGemmAct::GeluErf: return "gelu";
    case HopperGemmAct::GeluTanh: return "gelu_tanh";
    case HopperGemmAct::Relu2: return "relu2";
    default: return "none";
  }
}

}  // namespace

TEST_CASE("cuda split-K Hopper GEMM matches the reference", "[cuda][gemm][gemm_splitk]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  struct Shape { int64_t M, K, N; };
  // Rows 1 / 37 / 64 (one m64 MMA a k-step) and 65 / 100 / 128 (two); N 8 (one chunk of a tile),
  // 136 and 776 (a partial last tile); K 8 (one partial k-tile), 200, 776 and 3080 (48.1 k-tiles:
  // a ring of 3 stages refilled, uneven splits).
  const Shape shapes[] = {{1, 776, 136}, {37, 200, 776}, {64, 3080, 136}, {65, 8, 8}, {100, 776, 776},
                          {128, 3080, 776}};
  const HopperGemmAct acts[] = {HopperGemmAct::None, HopperGemmAct::GeluErf, HopperGemmAct::Relu,
                                HopperGemmAct::GeluTanh, HopperGemmAct::Relu2};
  // Blocks a tile: by shape (0), 1 (no reduction), 3 (uneven over the k-tiles), 16 (non-portable).
  const int split_sets[] = {0, 1, 3, 16};
  int turn = 0;
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      Problem p(dt, s.M, s.K, s.N);
      for (int splits : split_sets)
        for (int b_nk = 0; b_nk < 2; ++b_nk) {
          cuda_fused::set_splitk_gemm_splits(splits);
          const HopperGemmAct act = acts[turn % 5];
          const bool with_bias = turn % 2 == 0, with_res = turn % 3 != 0, b_const = turn % 4 < 2;
          ++turn;
          INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " N " << s.N << " splits " << splits
                                          << (b_nk ? " B [N,K]" : " B [K,N]") << " bias " << with_bias << " residual "
                                          << with_res << " act " << act_name(act) << " b_const " << b_const);
          p.poison(st.s);
          const long long before = cuda_fused::splitk_gemm_launch_count();
          REQUIRE(cuda_fused::launch_gemm_splitk(p.args(b_nk, with_bias, with_res, act, b_const), st.s));
          REQUIRE(cuda_fused::splitk_gemm_launch_count() == before + 1);
          const int used = cuda_fused::splitk_gemm_last_splits();
          const int k_tiles = int((s.K + 63) / 64);
          INFO("blocks a tile " << used);
          if (splits > 0) CHECK(used == std::min(splits, k_tiles));  // 16 fits a cluster on an H100 / H200
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto got = download(dt, p.dY.p, p.M * p.N);
          const double err = cuda_check::rel_err(got, p.reference(with_bias, with_res, act));
          INFO("relative error " << err);
          CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
          p.poison(st.s);
          REQUIRE(cuda_fused::launch_gemm_splitk(p.args(b_nk, with_bias, with_res, act, b_const), st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto again = download(dt, p.dY.p, p.M * p.N);
          CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0);
        }
    }
  cuda_fused::set_splitk_gemm_splits(0);
}

TEST_CASE("cuda split-K Hopper GEMM with the gate in its epilogue matches the reference", "[cuda][gemm][gemm_splitk]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  // B [K, 2h] (gate, then up) or [2h, K]; h 136 (a partial last 64-column tile: its gate columns
  // run into the up's, computed and not stored), 40 (one partial tile), 200.
  struct Shape { int64_t M, K, h; };
  const Shape shapes[] = {{128, 776, 136}, {9, 3080, 40}, {77, 200, 200}};
  const HopperGemmAct acts[] = {HopperGemmAct::Silu, HopperGemmAct::GeluErfExact, HopperGemmAct::GeluTanh,
                                HopperGemmAct::Relu};
  int turn = 0;
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& sh : shapes) {
      Problem p(dt, sh.M, sh.K, 2 * sh.h);
      DevBuf dY(sh.M * sh.h * 2 + 16);
      for (int splits : {0, 1, 5})
        for (int b_nk = 0; b_nk < 2; ++b_nk) {
          cuda_fused::set_splitk_gemm_splits(splits);
          const HopperGemmAct act = acts[turn % 4];
          const bool with_bias = turn % 3 != 1, b_const = turn % 2 == 0;
          ++turn;
          INFO(cuda_check::short_name(dt) << " M " << sh.M << " K " << sh.K << " h " << sh.h << " splits " << splits
                                          << (b_nk ? " W [2h,K]" : " W [K,2h]") << " bias " << with_bias << " act "
                                          << int(act));
          auto s = p.args(b_nk, with_bias, false, act, b_const);
          s.g.gated = true;
          s.g.N = sh.h;
          s.g.y = dY.p;
          ck(cudaMemsetAsync(dY.p, 0xFF, sh.M * sh.h * 2, st.s), "poison");
          const long long before = cuda_fused::splitk_gemm_launch_count();
          REQUIRE(cuda_fused::launch_gemm_splitk(s, st.s));
          REQUIRE(cuda_fused::splitk_gemm_launch_count() == before + 1);
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto got = download(dt, dY.p, sh.M * sh.h);
          std::vector<double> want(sh.M * sh.h);
          for (int64_t m = 0; m < sh.M; ++m)
            for (int64_t j = 0; j < sh.h; ++j) {
              const double g = p.pre[m * 2 * sh.h + j] + (with_bias ? p.bias[j] : 0.0);
              const double u = p.pre[m * 2 * sh.h + sh.h + j] + (with_bias ? p.bias[sh.h + j] : 0.0);
              double a = g;
              switch (act) {
                case HopperGemmAct::Silu: a = g / (1.0 + std::exp(-g)); break;
                case HopperGemmAct::GeluErfExact: a = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))); break;
                case HopperGemmAct::GeluTanh:
                  a = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
                  break;
                default: a = g > 0 ? g : 0; break;
              }
              want[m * sh.h + j] = a * u;
            }
          const double err = cuda_check::rel_err(got, want);
          INFO("relative error " << err);
          CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
        }
    }
  cuda_fused::set_splitk_gemm_splits(0);
}

TEST_CASE("cuda split-K Hopper GEMM refuses what it does not handle", "[cuda][gemm][gemm_splitk]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  Problem p(DType::Float16, 128, 72, 136);
  auto refused = [&](cuda_fused::SplitKGemm s, const char* why) {
    INFO(why);
    const long long before = cuda_fused::splitk_gemm_launch_count();
    CHECK_FALSE(cuda_fused::launch_gemm_splitk(s, st.s));
    CHECK(cuda_fused::splitk_gemm_launch_count() == before);
  };
  auto s = p.args(false, true, false, HopperGemmAct::None, true);
  s.g.M = 129;
  refused(s, "more than 128 rows");
  s = p.args(false, true, false, HopperGemmAct::None, true);
  s.g.N = 130;
  refused(s, "N not a multiple of 8");
  s = p.args(false, true, false, HopperGemmAct::None, true);
  s.g.K = 70;
  refused(s, "K not a multiple of 8");
  s = p.args(false, true, false, HopperGemmAct::Silu, true);
  refused(s, "an activation its epilogue lacks");
  s = p.args(false, true, true, HopperGemmAct::Silu, true);
  s.g.gated = true;
  s.g.N = 68;
  refused(s, "gated with a residual");
  s = p.args(false, true, false, HopperGemmAct::GeluErf, true);
  s.g.gated = true;
  s.g.N = 68;
  refused(s, "gated with an activation no gate has");
  s = p.args(false, true, false, HopperGemmAct::None, true);
  s.g.y = static_cast<char*>(p.dY.p) + 8;
  refused(s, "Y not 16-byte aligned");
  s = p.args(false, true, false, HopperGemmAct::None, true);
  s.g.dt = DType::Float;
  refused(s, "float");
}

TEST_CASE("cuda FusedMatMul / LayerNormLinear through the split-K Hopper GEMM", "[cuda][gemm][gemm_splitk]") {
  if (!hopper_ready()) return;
  cuda_fused::set_splitk_gemm(1);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    {
      // [1, 100, 776] x [776, 264] + bias, gelu, + residual: 100 rows through FusedMatMul's 4 inputs.
      OpCase c("fuseopt", "FusedMatMul", 4, 1);
      c.attr(Attribute::make_string("activation", "gelu"));
      Tensor a = cuda_check::random_tensor({1, 100, 776}, -2.f, 2.f), b = cuda_check::random_tensor({776, 264});
      Tensor bias = cuda_check::random_tensor({264}), res = cuda_check::random_tensor({1, 100, 264});
      c.inputs = {&a, &b, &bias, &res};
      const long long before = cuda_fused::splitk_gemm_launch_count();
      auto got = c.run_cuda(dt);
      CHECK(cuda_fused::splitk_gemm_launch_count() == before + 1);
      auto want = c.run_cpu(dt);
      INFO("FusedMatMul " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    {
      // transB: the weight stored [N, K]; no bias, no activation.
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_int("transB", 1));
      Tensor a = cuda_check::random_tensor({128, 200}, -2.f, 2.f), b = cuda_check::random_tensor({136, 200});
      c.inputs = {&a, &b, nullptr};
      const long long before = cuda_fused::splitk_gemm_launch_count();
      auto got = c.run_cuda(dt);
      CHECK(cuda_fused::splitk_gemm_launch_count() == before + 1);
      auto want = c.run_cpu(dt);
      INFO("FusedMatMul transB " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    {
      OpCase c("fuseopt", "LayerNormLinear", 6, 1);
      c.attr(Attribute::make_string("activation", "gelu_tanh"));
      c.attr(Attribute::make_float("epsilon", 1e-5f));
      Tensor x = cuda_check::random_tensor({1, 77, 96}, -2.f, 3.f);
      Tensor gamma = cuda_check::random_tensor({96}, 0.5f, 1.5f), beta = cuda_check::random_tensor({96});
      Tensor w = cuda_check::random_tensor({96, 264}), bias = cuda_check::random_tensor({264});
      c.inputs = {&x, &gamma, &beta, &w, &bias, nullptr};
      const long long before = cuda_fused::splitk_gemm_launch_count();
      auto got = c.run_cuda(dt);
      CHECK(cuda_fused::splitk_gemm_launch_count() == before + 1);
      auto want = c.run_cpu(dt);
      INFO("LayerNormLinear " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    {
      OpCase c("fuseopt", "GatedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "silu"));
      Tensor x = cuda_check::random_tensor({1, 100, 96}, -2.f, 2.f), w = cuda_check::random_tensor({96, 2 * 136});
      Tensor bias = cuda_check::random_tensor({2 * 136});
      c.inputs = {&x, &w, &bias};
      const long long before = cuda_fused::splitk_gemm_launch_count();
      auto got = c.run_cuda(dt);
      CHECK(cuda_fused::splitk_gemm_launch_count() == before + 1);
      auto want = c.run_cpu(dt);
      INFO("GatedMatMul " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
  }
  cuda_fused::set_splitk_gemm(-1);
}
