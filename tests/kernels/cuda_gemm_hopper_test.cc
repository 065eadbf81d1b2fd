// The Hopper GEMM with a fused epilogue (kernels/cuda/gemm_hopper.cu): against a host fp64
// reference on fresh random inputs with Y NaN-poisoned first, at sizes that divide none of its
// tiles (128 rows x 128/256 columns x 64 of K), with more tiles than SMs (the persistent walk)
// and more k-tiles than ring stages; fp16 and bf16, B stored [K, N] and [N, K], both tile
// widths, every activation, with and without bias; bit-identical reruns; the arguments it must
// refuse (Y untouched); the gated form (GatedMatMul's gate in the epilogue); and FusedMatMul /
// LayerNormLinear with erf-GELU and GatedMatMul through the kernel registry, where the routing
// of the GEMMs it is meant for must take it (launch count) and match the CPU kernels.
// On a GPU that is not compute capability 9.0 the cases report skipped, with the reason.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
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
using cuda_check::hopper_ready;
using cuda_check::DevBuf;
using cuda_check::download;
using cuda_check::upload;
using cuda_check::OpCase;
using cuda_fused::HopperGemmAct;

// A [M, K], B [K, N] on the host; on the device A, B as [K, N] and as [N, K], bias, Y.
struct Problem {
  DType dt;
  int64_t M, K, N;
  std::vector<float> A, B, bias;
  std::vector<double> pre;  // A · B in fp64, computed once
  DevBuf dA, dB, dBt, dbias, dY;
  Problem(DType d, int64_t m, int64_t k, int64_t n)
      : dt(d), M(m), K(k), N(n), A(cuda_check::random_values(d, m * k, -2.f, 2.f)),
        B(cuda_check::random_values(d, k * n, -0.3f, 0.3f)), bias(cuda_check::random_values(d, n, -1.f, 1.f)),
        dA(m * k * 2), dB(k * n * 2), dBt(k * n * 2), dbias(n * 2),
        dY(m * n * 2 + 16) {
    upload(dt, dA.p, A);
    upload(dt, dB.p, B);
    std::vector<float> bt(k * n);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t nn = 0; nn < n; ++nn) bt[nn * k + kk] = B[kk * n + nn];
    upload(dt, dBt.p, bt);
    upload(dt, dbias.p, bias);
    pre.assign(M * N, 0.0);
    for (int64_t mm = 0; mm < M; ++mm)
      for (int64_t kk = 0; kk < K; ++kk) {
        const double a = A[mm * K + kk];
        const float* brow = &B[kk * N];
        double* yrow = &pre[mm * N];
        for (int64_t nn = 0; nn < N; ++nn) yrow[nn] += a * brow[nn];
      }
  }
  void poison(cudaStream_t s) { ck(cudaMemsetAsync(dY.p, 0xFF, M * N * 2, s), "poison"); }
  std::vector<double> reference(bool with_bias, HopperGemmAct act) const {
    std::vector<double> y(M * N);
    for (int64_t i = 0; i < M * N; ++i) {
      const double v = pre[i] + (with_bias ? bias[i % N] : 0.0);
      switch (act) {
        case HopperGemmAct::None: y[i] = v; break;
        case HopperGemmAct::Relu: y[i] = v > 0 ? v : 0; break;
        case HopperGemmAct::GeluErf: y[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
        case HopperGemmAct::GeluTanh:
          y[i] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          break;
        case HopperGemmAct::Relu2: y[i] = v > 0 ? v * v : 0; break;
        default: break;
      }
    }
    return y;
  }
  // Gated: B [K, 2h] holds the gate's h columns, then the up's; Y [M, h].
  std::vector<double> reference_gated(bool with_bias, HopperGemmAct act) const {
    const int64_t h = N / 2;
    std::vector<double> y(M * h);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < h; ++j) {
        const double g = pre[m * N + j] + (with_bias ? bias[j] : 0.0);
        const double u = pre[m * N + h + j] + (with_bias ? bias[h + j] : 0.0);
        double a = g;
        switch (act) {
          case HopperGemmAct::Silu: a = g / (1.0 + std::exp(-g)); break;
          case HopperGemmAct::GeluErfExact: a = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))); break;
          case HopperGemmAct::GeluTanh:
            a = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
            break;
          case HopperGemmAct::Relu: a = g > 0 ? g : 0; break;
          default: break;
        }
        y[m * h + j] = a * u;
      }
    return y;
  }
  cuda_fused::HopperGemm args(bool b_nk, bool with_bias, HopperGemmAct act) {
    cuda_fused::HopperGemm g;
    g.dt = dt;
    g.a = dA.p;
    g.b = b_nk ? dBt.p : dB.p;
    g.b_nk = b_nk;
    g.bias = with_bias ? dbias.p : nullptr;
    g.y = dY.p;
    g.M = M;
    g.N = N;
    g.K = K;
    g.act = act;
    return g;
  }
};

const char* act_name(HopperGemmAct a) {
  switch (a) {
    case HopperGemmAct::Silu: return "silu";
    case HopperGemmAct::GeluErfExact: return "gelu (erff)";
    case HopperGemmAct::Relu: return "relu";
    case HopperGemmAct::GeluErf: return "gelu";
    case HopperGemmAct::GeluTanh: return "gelu_tanh";
    case HopperGemmAct::Relu2: return "relu2";
    default: return "none";
  }
}

}  // namespace

TEST_CASE("cuda Hopper GEMM matches the reference", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  struct Shape { int64_t M, K, N; };
  // Off every tile edge (M 1000 / 130 / 257 / 1100, N 136 / 264 / 520 / 1032, K 200 / 72 / 1000);
  // 2048 x 2048 output: 256 tiles of 128 x 128 (the persistent walk, two tiles a block); K 1000:
  // 16 k-tiles through a ring of 4 or 6 stages; the smallest problem; 4100 x 2056: 561 tiles of
  // 128 x 128, 4 or 5 a block (each ping-pong warpgroup takes turns over several tiles, one more
  // tiles for warpgroup 0 where the count is odd), K 136 a partial third k-tile.
  const Shape shapes[] = {{1000, 200, 136}, {130, 72, 264}, {257, 1000, 520}, {1100, 768, 1032},
                          {2048, 64, 2048}, {8, 8, 8}, {4100, 136, 2056}};
  const HopperGemmAct acts[] = {HopperGemmAct::GeluErf, HopperGemmAct::None, HopperGemmAct::Relu,
                                HopperGemmAct::GeluTanh, HopperGemmAct::Relu2};
  constexpr int kActs = sizeof(acts) / sizeof(acts[0]);
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); ++si) {
      const Shape& s = shapes[si];
      Problem p(dt, s.M, s.K, s.N);
      int turn = int(si);  // shifted per shape: each activation meets every layout and width somewhere
      // {tile_n, cluster}: the cooperative schedule at that tile width, one block a tile or
      // clusters of two sharing B's tile by multicast; tile_n 0: ping-pong (128 x 128 tiles a
      // warpgroup, the block's tiles alternating between its two consumer warpgroups).
      const int configs[][2] = {{128, 1}, {128, 2}, {256, 1}, {256, 2}, {0, 1}};
      for (const auto& cfg : configs)
        for (int b_nk = 0; b_nk < 2; ++b_nk) {
          const int tile_n = cfg[0];
          cuda_fused::set_hopper_gemm_tile_n(tile_n);
          cuda_fused::set_hopper_gemm_schedule(tile_n == 0 ? 2 : 1);
          cuda_fused::set_hopper_gemm_cluster(cfg[1]);
          // The activations in turn over the layouts and widths, erf-GELU with bias in each.
          const HopperGemmAct act = acts[turn++ % kActs];
          for (int with_bias = 0; with_bias < 2; ++with_bias) {
            const HopperGemmAct a = with_bias ? HopperGemmAct::GeluErf : act;
            INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " N " << s.N
                                            << (tile_n ? " cooperative, tile_n " : " ping-pong") << tile_n
                                            << " cluster " << cfg[1]
                                            << (b_nk ? " B [N,K]" : " B [K,N]") << " bias " << with_bias << " act "
                                            << act_name(a));
            p.poison(st.s);
            const long long before = cuda_fused::hopper_gemm_launch_count();
            REQUIRE(cuda_fused::launch_gemm_hopper(p.args(b_nk, with_bias, a), st.s));
            REQUIRE(cuda_fused::hopper_gemm_launch_count() == before + 1);
            ck(cudaStreamSynchronize(st.s), "kernel");
            const auto got = download(dt, p.dY.p, p.M * p.N);
            const double err = cuda_check::rel_err(got, p.reference(with_bias, a));
            INFO("relative error " << err);
            CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
            // Deterministic: a second run gives the same bits.
            p.poison(st.s);
            REQUIRE(cuda_fused::launch_gemm_hopper(p.args(b_nk, with_bias, a), st.s));
            ck(cudaStreamSynchronize(st.s), "kernel");
            const auto again = download(dt, p.dY.p, p.M * p.N);
            CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0);
          }
        }
    }
  cuda_fused::set_hopper_gemm_tile_n(0);
  cuda_fused::set_hopper_gemm_schedule(0);
  cuda_fused::set_hopper_gemm_cluster(0);
}

TEST_CASE("cuda Hopper GEMM with the gate in its epilogue matches the reference", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  struct Shape { int64_t M, K, h; };
  // h (Y's columns) off the 128-column output tile: the gate's last tile reads into the up's
  // columns and must not use them; K over the 4-stage ring; more tiles than SMs (1100 x 2056).
  const Shape shapes[] = {{1000, 200, 136}, {130, 520, 264}, {1100, 96, 2056}, {8, 8, 8}, {128, 264, 1000}};
  const HopperGemmAct acts[] = {HopperGemmAct::Silu, HopperGemmAct::GeluErfExact, HopperGemmAct::GeluTanh,
                                HopperGemmAct::Relu};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      Problem p(dt, s.M, s.K, 2 * s.h);
      int turn = 0;
      // Tiles of 256 columns of B (128 of Y) and of 128 (64 of Y: what a 128-row prefill takes).
      for (int tile_n : {256, 128})
      for (int cluster = 1; cluster <= 2; ++cluster)
        for (int b_nk = 0; b_nk < 2; ++b_nk)
          for (int with_bias = 0; with_bias < 2; ++with_bias) {
            cuda_fused::set_hopper_gemm_cluster(cluster);
            cuda_fused::set_hopper_gemm_tile_n(tile_n);
            const HopperGemmAct act = acts[turn++ % 4];
            INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " h " << s.h
                                            << (b_nk ? " B [2h,K]" : " B [K,2h]") << " bias " << with_bias << " act "
                                            << act_name(act) << " cluster " << cluster << " tile " << tile_n);
            cuda_fused::HopperGemm g = p.args(b_nk, with_bias, act);
            g.gated = true;
            g.N = s.h;
            p.poison(st.s);
            REQUIRE(cuda_fused::launch_gemm_hopper(g, st.s));
            ck(cudaStreamSynchronize(st.s), "kernel");
            const auto got = download(dt, p.dY.p, s.M * s.h);
            const double err = cuda_check::rel_err(got, p.reference_gated(with_bias, act));
            INFO("relative error " << err);
            CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
          }
    }
  cuda_fused::set_hopper_gemm_cluster(0);
  cuda_fused::set_hopper_gemm_tile_n(0);
}

// Y's rows of any pitch (gemm_hopper.cu, ROWS): an odd vocabulary's logits, 16-bit or float, each
// row staged rotated by its misalignment and copied out by the warpgroups in aligned 16-byte
// pieces (the partial first and last an element at a time). Y is placed 0-7 elements past a
// 16-byte boundary in a poisoned buffer: every element of Y lands, nothing before or after it is
// touched. N odd, N = 6 mod 8, N below a tile, M below 8, more tiles than SMs, K off the 64-wide
// k-tile; the bias read an element at a time (no read past it at an odd N).
TEST_CASE("cuda Hopper GEMM writes rows of any pitch, 16-bit or float", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{300, 136, 523}, {130, 72, 1030}, {5, 8, 9}, {2100, 64, 4099}, {257, 200, 71}};
  const HopperGemmAct acts[] = {HopperGemmAct::None, HopperGemmAct::Relu, HopperGemmAct::GeluTanh};
  int turn = 0;
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      Problem p(dt, s.M, s.K, s.N);
      for (int y_fp32 = 0; y_fp32 < 2; ++y_fp32) {
        const DType ydt = y_fp32 ? DType::Float : dt;
        const int64_t esz = y_fp32 ? 4 : 2, shifts = 16 / esz, guard = 64;
        const size_t bytes = size_t((s.M * s.N + 2 * guard) * esz);
        DevBuf buf(bytes);
        for (int64_t shift : {int64_t{0}, int64_t{1}, shifts - 1, shifts / 2 + 1}) {
          const HopperGemmAct act = acts[turn++ % 3];
          const bool with_bias = turn % 2 == 0;
          INFO(cuda_check::short_name(dt) << " -> " << cuda_check::short_name(ydt) << " M " << s.M << " K " << s.K
                                          << " N " << s.N << " Y shifted " << shift << " act " << act_name(act)
                                          << " bias " << with_bias);
          ck(cudaMemsetAsync(buf.p, 0xFF, bytes, st.s), "poison");
          cuda_fused::HopperGemm g = p.args(true, with_bias, act);
          g.y = static_cast<char*>(buf.p) + (guard + shift) * esz;
          g.y_fp32 = y_fp32 != 0;
          REQUIRE(cuda_fused::launch_gemm_hopper(g, st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          std::vector<unsigned char> raw(bytes);
          ck(cudaMemcpy(raw.data(), buf.p, bytes, cudaMemcpyDeviceToHost), "download");
          size_t touched = 0;  // bytes outside Y that are no longer the poison
          const size_t y0 = size_t((guard + shift) * esz), y1 = y0 + size_t(s.M * s.N * esz);
          for (size_t i = 0; i < bytes; ++i)
            if ((i < y0 || i >= y1) && raw[i] != 0xFF) ++touched;
          CHECK(touched == 0);
          const auto got = download(ydt, g.y, s.M * s.N);
          size_t nan = 0;
          for (float v : got) nan += std::isnan(v) ? 1 : 0;
          CHECK(nan == 0);
          const double err = cuda_check::rel_err(got, p.reference(with_bias, act));
          INFO("relative error " << err);
          CHECK(err < (y_fp32 ? 1e-4 : dt == DType::Float16 ? 2e-3 : 1e-2));
        }
      }
    }
}

TEST_CASE("cuda Hopper GEMM refuses what it does not handle", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  cuda_check::TestStream st;
  const DType dt = DType::Float16;
  Problem p(dt, 64, 64, 64);
  auto refused = [&](cuda_fused::HopperGemm g) {
    p.poison(st.s);
    const bool launched = cuda_fused::launch_gemm_hopper(g, st.s);
    ck(cudaStreamSynchronize(st.s), "kernel");
    return !launched && all_nan(download(dt, p.dY.p, 64 * 64));
  };
  const cuda_fused::HopperGemm ok = p.args(false, true, HopperGemmAct::GeluErf);
  auto g = ok;
  g.N = 60;  // N % 8 != 0
  CHECK(refused(g));
  g = ok;
  g.K = 60;  // K % 8 != 0
  CHECK(refused(g));
  g = ok;
  g.dt = DType::Float;
  CHECK(refused(g));
  g = ok;
  g.a = static_cast<const char*>(ok.a) + 2;  // A rows not 16-byte aligned
  CHECK(refused(g));
  g = ok;
  g.bias = static_cast<const char*>(ok.bias) + 2;  // bias pairs not 4-byte aligned
  CHECK(refused(g));
  g = ok;
  g.y = static_cast<char*>(ok.y) + 4;  // Y not 16-byte aligned: row phases need B [N, K] and no erf-GELU
  CHECK(refused(g));
  g.b_nk = true;
  g.act = HopperGemmAct::None;
  g.y = static_cast<char*>(ok.y) + 1;  // not even element-aligned
  CHECK(refused(g));
  g = ok;
  g.y_fp32 = true;  // a float Y: B [N, K] only
  CHECK(refused(g));
  g.b_nk = true;  // ... and the epilogues cuBLASLt has (erf-GELU is a pass after)
  CHECK(refused(g));
  g = ok;
  g.M = 0;
  CHECK(refused(g));
  // The switch: off means never wanted; 1 the erf-GELU and squared-ReLU GEMMs of 1024 rows or more
  // and the gated ones of 9 rows or more; 2 every GEMM it fits.
  cuda_fused::set_hopper_gemm(0);
  g = ok;
  g.M = 4096;
  CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
  g.gated = true;
  CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
  g.gated = false;
  cuda_fused::set_hopper_gemm(1);
  CHECK(cuda_fused::hopper_gemm_wanted(g));
  g.act = HopperGemmAct::Relu2;  // squared ReLU: cuBLASLt needs a pass for it too
  CHECK(cuda_fused::hopper_gemm_wanted(g));
  g.act = HopperGemmAct::None;
  CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
  g.gated = true;
  CHECK(cuda_fused::hopper_gemm_wanted(g));
  g = ok;
  CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));  // 64 rows: cuBLASLt / the small-M kernels
  g.gated = true;
  CHECK(cuda_fused::hopper_gemm_wanted(g));  // ... but a gate from 9 rows
  g.M = 8;
  CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));  // 8 rows: the decode kernels
  cuda_fused::set_hopper_gemm(2);
  CHECK(cuda_fused::hopper_gemm_wanted(g));
  cuda_fused::set_hopper_gemm(-1);
  // Unset (the default): the gated GEMMs of 128 rows or more, the non-gated erf-GELU / squared-ReLU
  // ones of 2048 rows or more.
  if (!std::getenv("FUSEOPT_HOPPER_GEMM")) {
    g = ok;
    g.M = 4096;
    CHECK(cuda_fused::hopper_gemm_wanted(g));
    g.act = HopperGemmAct::Relu2;
    CHECK(cuda_fused::hopper_gemm_wanted(g));
    g.M = 1024;
    CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
    g.M = 4096;
    g.act = HopperGemmAct::None;
    CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
    g.act = HopperGemmAct::Silu;
    g.gated = true;
    CHECK(cuda_fused::hopper_gemm_wanted(g));
    g.M = 128;
    CHECK(cuda_fused::hopper_gemm_wanted(g));
    g.M = 127;
    CHECK_FALSE(cuda_fused::hopper_gemm_wanted(g));
  }
}

TEST_CASE("cuda FusedMatMul / GatedMatMul / LayerNormLinear through the Hopper GEMM", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  cuda_fused::set_hopper_gemm(1);  // every GEMM it is meant for (the default takes 2048 rows or more)
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      for (const char* act : {"gelu", "relu2"}) {
        // 1030 rows (switch 1 takes M >= 1024), N off the tile, B [K, N].
        OpCase c("fuseopt", "FusedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", act));
        Tensor a = cuda_check::random_tensor({2, 515, 96}, -2.f, 2.f), b = cuda_check::random_tensor({96, 136});
        Tensor bias = cuda_check::random_tensor({136});
        c.inputs = {&a, &b, with_bias ? &bias : nullptr};
        const long long before = cuda_fused::hopper_gemm_launch_count();
        auto got = c.run_cuda(dt);
        CHECK(cuda_fused::hopper_gemm_launch_count() > before);
        auto want = c.run_cpu(dt);
        INFO("FusedMatMul " << act << " " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      {
        // transB: the weight stored [N, K].
        OpCase c("fuseopt", "FusedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", "gelu"));
        c.attr(Attribute::make_int("transB", 1));
        Tensor a = cuda_check::random_tensor({1100, 200}, -2.f, 2.f), b = cuda_check::random_tensor({264, 200});
        Tensor bias = cuda_check::random_tensor({264});
        c.inputs = {&a, &b, with_bias ? &bias : nullptr};
        const long long before = cuda_fused::hopper_gemm_launch_count();
        auto got = c.run_cuda(dt);
        CHECK(cuda_fused::hopper_gemm_launch_count() > before);
        auto want = c.run_cpu(dt);
        INFO("FusedMatMul transB " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      for (const char* act : {"silu", "gelu"}) {
        OpCase c("fuseopt", "GatedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", act));
        Tensor a = cuda_check::random_tensor({1030, 96}, -2.f, 2.f), w = cuda_check::random_tensor({96, 2 * 136});
        Tensor bias = cuda_check::random_tensor({2 * 136});
        c.inputs = {&a, &w, with_bias ? &bias : nullptr};
        const long long before = cuda_fused::hopper_gemm_launch_count();
        auto got = c.run_cuda(dt);
        CHECK(cuda_fused::hopper_gemm_launch_count() > before);
        auto want = c.run_cpu(dt);
        INFO("GatedMatMul " << act << " " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      {
        OpCase c("fuseopt", "LayerNormLinear", 6, 1);
        c.attr(Attribute::make_string("activation", "gelu"));
        c.attr(Attribute::make_float("epsilon", 1e-5f));
        Tensor x = cuda_check::random_tensor({2, 530, 96}, -2.f, 3.f);
        Tensor gamma = cuda_check::random_tensor({96}, 0.5f, 1.5f), beta = cuda_check::random_tensor({96});
        Tensor w = cuda_check::random_tensor({96, 264}), bias = cuda_check::random_tensor({264});
        c.inputs = {&x, &gamma, &beta, &w, with_bias ? &bias : nullptr, nullptr};
        const long long before = cuda_fused::hopper_gemm_launch_count();
        auto got = c.run_cuda(dt);
        CHECK(cuda_fused::hopper_gemm_launch_count() > before);
        auto want = c.run_cpu(dt);
        INFO("LayerNormLinear " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
    }
  cuda_fused::set_hopper_gemm(-1);
}

// The default route (no switch set): GatedMatMul from 128 rows through our gated GEMM (128 rows:
// 64 + 64-column tiles, h off the tile), below that cuBLASLt + the gate pass; both match the CPU.
TEST_CASE("cuda GatedMatMul takes the Hopper GEMM by default from 128 rows", "[cuda][gemm][gemm_hopper]") {
  if (!hopper_ready()) return;
  if (std::getenv("FUSEOPT_HOPPER_GEMM")) {
    WARN("default-route test skipped: FUSEOPT_HOPPER_GEMM is set, so the switch decides the route");
    return;
  }
  cuda_fused::set_hopper_gemm(-1);
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int rows : {128, 100}) {
      OpCase c("fuseopt", "GatedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "silu"));
      Tensor a = cuda_check::random_tensor({1, rows, 264}, -2.f, 2.f), w = cuda_check::random_tensor({264, 2 * 1000});
      Tensor bias = cuda_check::random_tensor({2 * 1000});
      c.inputs = {&a, &w, &bias};
      const long long before = cuda_fused::hopper_gemm_launch_count();
      auto got = c.run_cuda(dt);
      INFO("GatedMatMul " << cuda_check::short_name(dt) << " rows " << rows);
      CHECK((cuda_fused::hopper_gemm_launch_count() > before) == (rows >= 128));
      auto want = c.run_cpu(dt);
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
}
