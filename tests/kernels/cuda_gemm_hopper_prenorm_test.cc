// The gated Hopper GEMM with the RMSNorm of A inside (kernels/cuda/gemm_hopper_prenorm.cuh):
// Y = act(Z · B_gate + b) * (Z · B_up + b'), Z = A / sqrt(mean(A²) + eps) (the norm's gamma is in
// B, folded by the session: tests/kernels/cuda_session_norm_fold_test.cc), against a host
// fp64 reference on fresh random inputs with Y NaN-poisoned first, at sizes that divide none of
// its tiles (rows off 128, K off the 64-wide k-tile, N off both tile widths), with more tiles than
// SMs and more k-tiles than ring stages; fp16 and bf16, both tile widths, SiLU and tanh-GELU,
// with and without bias, rows of very different scales (the per-row statistic must be each
// row's own); bit-identical reruns; and the arguments it must refuse (Y untouched).
// On a GPU that is not compute capability 9.0 the cases report skipped, with the reason.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_hopper.h"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"
#include "support/hopper_check.h"

using namespace fuseopt;

namespace {

using cuda_check::all_nan;
using cuda_check::ck;
using cuda_check::DevBuf;
using cuda_check::download;
using cuda_check::upload;
using cuda_fused::HopperGemmAct;

constexpr float kEps = 1e-5f;

// A [M, K] (row m scaled by 2^(m % 7 - 3): the statistic differs row by row),
// B [2h, K] (the runtime's layout: the gate's h rows, then the up's), bias [2h].
struct NormProblem {
  DType dt;
  int64_t M, K, h;
  std::vector<float> A, B, bias;
  DevBuf dA, dB, dbias, dY;
  NormProblem(DType d, int64_t m, int64_t k, int64_t hh)
      : dt(d), M(m), K(k), h(hh), A(cuda_check::random_values(d, m * k, -2.f, 2.f)),
        B(cuda_check::random_values(d, 2 * hh * k, -0.1f, 0.1f)), bias(cuda_check::random_values(d, 2 * hh, -0.5f, 0.5f)),
        dA(m * k * 2), dB(2 * hh * k * 2),
        dbias(2 * hh * 2), dY(m * hh * 2) {
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) A[r * K + c] *= std::ldexp(1.f, int(r % 7) - 3);  // exact: a power of two
    upload(dt, dA.p, A);
    upload(dt, dB.p, B);
    upload(dt, dbias.p, bias);
  }
  void poison(cudaStream_t s) { ck(cudaMemsetAsync(dY.p, 0xFF, M * h * 2, s), "poison"); }
  cuda_fused::HopperGemm args(bool with_bias, HopperGemmAct act) {
    cuda_fused::HopperGemm g;
    g.dt = dt;
    g.a = dA.p;
    g.b = dB.p;
    g.b_nk = true;
    g.gated = true;
    g.bias = with_bias ? dbias.p : nullptr;
    g.y = dY.p;
    g.M = M;
    g.N = h;
    g.K = K;
    g.act = act;
    g.rms_norm = true;
    g.norm_eps = kEps;
    return g;
  }
  // The norm in fp64 on the stored values, then the gated product.
  std::vector<double> reference(bool with_bias, HopperGemmAct act) const {
    std::vector<double> y(M * h), z(K);
    for (int64_t m = 0; m < M; ++m) {
      double ss = 0;
      for (int64_t k = 0; k < K; ++k) ss += double(A[m * K + k]) * A[m * K + k];
      const double r = 1.0 / std::sqrt(ss / double(K) + kEps);
      for (int64_t k = 0; k < K; ++k) z[k] = A[m * K + k] * r;
      for (int64_t j = 0; j < h; ++j) {
        double gs = with_bias ? bias[j] : 0.0, us = with_bias ? bias[h + j] : 0.0;
        const float* bg = &B[j * K];
        const float* bu = &B[(h + j) * K];
        for (int64_t k = 0; k < K; ++k) gs += z[k] * bg[k], us += z[k] * bu[k];
        const double a = act == HopperGemmAct::Silu
                             ? gs / (1.0 + std::exp(-gs))
                             : 0.5 * gs * (1.0 + std::tanh(0.7978845608028654 * (gs + 0.044715 * gs * gs * gs)));
        y[m * h + j] = a * us;
      }
    }
    return y;
  }
};

}  // namespace

TEST_CASE("cuda Hopper gated GEMM with the RMSNorm inside matches the reference", "[cuda][gemm][gemm_hopper]") {
  if (!cuda_check::hopper_ready()) return;
  cuda_check::TestStream st;
  struct Shape { int64_t M, K, h; };
  // 200 x 264 x 2 * 520: rows off 128, K four k-tiles and 8 columns, h off 64 and 128;
  // 130 x 2048 x 2 * 136: 32 k-tiles through the ring, a second row tile of 2 rows;
  // 1100 x 1000 x 2 * 1032: 9 x 9 (or 17) tiles, more than the SMs (the persistent walk).
  const Shape shapes[] = {{200, 264, 520}, {130, 2048, 136}, {1100, 1000, 1032}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      NormProblem p(dt, s.M, s.K, s.h);
      int turn = 0;
      for (int tile_n : {128, 256}) {
        cuda_fused::set_hopper_gemm_tile_n(tile_n);
        for (HopperGemmAct act : {HopperGemmAct::Silu, HopperGemmAct::GeluTanh}) {
          const bool with_bias = turn++ % 2 == 0;
          INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " h " << s.h << " tile_n " << tile_n
                                          << (act == HopperGemmAct::Silu ? " silu" : " gelu_tanh") << " bias "
                                          << with_bias);
          p.poison(st.s);
          const long long before = cuda_fused::hopper_gemm_launch_count();
          REQUIRE(cuda_fused::launch_gemm_hopper(p.args(with_bias, act), st.s));
          REQUIRE(cuda_fused::hopper_gemm_launch_count() == before + 1);
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto got = download(dt, p.dY.p, p.M * p.h);
          const double err = cuda_check::rel_err(got, p.reference(with_bias, act));
          INFO("relative error " << err);
          CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
          // Deterministic: a second run gives the same bits.
          p.poison(st.s);
          REQUIRE(cuda_fused::launch_gemm_hopper(p.args(with_bias, act), st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto again = download(dt, p.dY.p, p.M * p.h);
          CHECK(std::memcmp(again.data(), got.data(), got.size() * sizeof(float)) == 0);
        }
      }
      cuda_fused::set_hopper_gemm_tile_n(0);
    }
}

TEST_CASE("cuda Hopper GEMM refuses an RMSNorm it does not handle", "[cuda][gemm][gemm_hopper]") {
  if (!cuda_check::hopper_ready()) return;
  cuda_check::TestStream st;
  NormProblem p(DType::Float16, 64, 64, 64);
  auto refused = [&](cuda_fused::HopperGemm g) {
    p.poison(st.s);
    const bool launched = cuda_fused::launch_gemm_hopper(g, st.s);
    ck(cudaStreamSynchronize(st.s), "kernel");
    return !launched && all_nan(download(DType::Float16, p.dY.p, 64 * 64));
  };
  const cuda_fused::HopperGemm ok = p.args(true, HopperGemmAct::Silu);
  auto g = ok;
  g.b_nk = false;  // B [K, 2N]: not the runtime's layout
  CHECK(refused(g));
  g = ok;
  g.act = HopperGemmAct::Relu;  // a gate without the instantiation
  CHECK(refused(g));
  g = ok;
  g.gated = false;  // a plain GEMM
  g.act = HopperGemmAct::None;
  CHECK(refused(g));
  g = ok;
  g.norm_eps = NAN;
  CHECK(refused(g));
}
