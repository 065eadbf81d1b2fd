// The small-M GEMM + bias + activation kernel (kernels/cuda/gemm_gelu.cu):
// against a host fp64 reference on fresh random inputs with Y NaN-poisoned
// first, at sizes that divide none of its tiles (64 x 64 x 64), fp16 and bf16,
// with and without bias, every activation; the cases it must refuse (leaving
// Y untouched); and MatMul / fuseopt.FusedMatMul / LayerNormLinear through the
// kernel registry against the CPU kernels with the kernel switched on.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_gelu.h"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_check::all_nan;
using cuda_check::ck;
using cuda_check::DevBuf;
using cuda_check::OpCase;

float round16(DType dt, float v) {
  return dt == DType::Float16 ? half_to_float(float_to_half(v)) : bf16_to_float(float_to_bf16(v));
}

std::vector<float> values(DType dt, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round16(dt, u(cuda_check::rng()));
  return v;
}

void upload16(DType dt, void* dst, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = dt == DType::Float16 ? float_to_half(v[i]) : float_to_bf16(v[i]);
  cuda_check::upload_bytes(dst, h.data(), h.size() * 2);
}

std::vector<float> download16(DType dt, const void* src, size_t n) {
  std::vector<uint16_t> h(n);
  ck(cudaMemcpy(h.data(), src, n * 2, cudaMemcpyDeviceToHost), "download");
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dt == DType::Float16 ? half_to_float(h[i]) : bf16_to_float(h[i]);
  return v;
}

// The kernels run on a non-blocking stream, as in the runtime (PDL is not used
// on the legacy default stream); uploads are finished before (device sync),
// poison fills go on the same stream.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream"); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Problem {
  DType dt;
  int64_t M, K, N;
  std::vector<float> A, B, bias;
  DevBuf dA, dB, dbias, dY;
  Problem(DType d, int64_t m, int64_t k, int64_t n)
      : dt(d), M(m), K(k), N(n), A(values(d, m * k, -2.f, 2.f)), B(values(d, k * n, -0.3f, 0.3f)),
        bias(values(d, n, -1.f, 1.f)), dA(m * k * 2), dB(k * n * 2), dbias(n * 2), dY(m * n * 2 + 16) {
    upload16(dt, dA.p, A);
    upload16(dt, dB.p, B);
    upload16(dt, dbias.p, bias);
    ck(cudaDeviceSynchronize(), "uploads");
  }
  void poison(cudaStream_t s) { ck(cudaMemsetAsync(dY.p, 0xFF, M * N * 2, s), "poison"); }
  std::vector<double> reference(bool with_bias,
                                cuda_fused::SmallGemmAct act = cuda_fused::SmallGemmAct::GeluErf) const {
    std::vector<double> y(M * N, 0.0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) {
        const double a = A[m * K + k];
        for (int64_t n = 0; n < N; ++n) y[m * N + n] += a * B[k * N + n];
      }
    for (int64_t i = 0; i < M * N; ++i) {
      const double v = y[i] + (with_bias ? bias[i % N] : 0.0);
      switch (act) {
        case cuda_fused::SmallGemmAct::None: y[i] = v; break;
        case cuda_fused::SmallGemmAct::Relu: y[i] = v > 0 ? v : 0; break;
        case cuda_fused::SmallGemmAct::GeluErf: y[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
        case cuda_fused::SmallGemmAct::GeluTanh:
          y[i] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          break;
      }
    }
    return y;
  }
};

}  // namespace

TEST_CASE("cuda GEMM + bias + erf-GELU kernel matches the reference", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  cuda_fused::set_gemm_gelu(1);
  struct Shape { int64_t M, K, N; };
  // BERT's FFN1 at 1x128; then sizes off every tile edge (M 1, 77, 130, the
  // cap 512; K 8, 40, 200; N 8, 136, 264).
  const Shape shapes[] = {{128, 768, 3072}, {1, 8, 8}, {77, 200, 136}, {130, 40, 264}, {512, 72, 72}, {33, 1000, 56}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes)
      for (int with_bias = 0; with_bias < 2; ++with_bias) {
        INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " N " << s.N << " bias " << with_bias);
        Problem p(dt, s.M, s.K, s.N);
        p.poison(st.s);
        REQUIRE(cuda_fused::launch_gemm_bias_gelu(dt, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr, p.dY.p, p.M,
                                                  p.N, p.K, st.s));
        ck(cudaStreamSynchronize(st.s), "kernel");
        const auto got = download16(dt, p.dY.p, p.M * p.N);
        const double err = cuda_check::rel_err(got, p.reference(with_bias));
        INFO("relative error " << err);
        CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
        // Deterministic: a second run gives the same bits.
        p.poison(st.s);
        REQUIRE(cuda_fused::launch_gemm_bias_gelu(dt, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr, p.dY.p, p.M,
                                                  p.N, p.K, st.s));
        ck(cudaStreamSynchronize(st.s), "kernel");
        const auto again = download16(dt, p.dY.p, p.M * p.N);
        CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0);
      }
  cuda_fused::set_gemm_gelu(-1);
}

TEST_CASE("cuda small-M GEMM kernel: every activation matches the reference", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  using cuda_fused::SmallGemmAct;
  cuda_fused::set_small_gemm(1);
  struct Shape { int64_t M, K, N; };
  // BERT's QKV at 1x128, the K cap, and sizes off every tile edge.
  const Shape shapes[] = {{128, 768, 2304}, {1, 8, 8}, {77, 200, 136}, {130, 1024, 72}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (SmallGemmAct act : {SmallGemmAct::None, SmallGemmAct::Relu, SmallGemmAct::GeluErf, SmallGemmAct::GeluTanh})
      for (const Shape& s : shapes)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          INFO(cuda_check::short_name(dt) << " act " << int(act) << " M " << s.M << " K " << s.K << " N " << s.N
                                          << " bias " << with_bias);
          Problem p(dt, s.M, s.K, s.N);
          p.poison(st.s);
          REQUIRE(cuda_fused::launch_small_gemm(dt, act, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr, p.dY.p,
                                                p.M, p.N, p.K, st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          const double err = cuda_check::rel_err(download16(dt, p.dY.p, p.M * p.N), p.reference(with_bias, act));
          INFO("relative error " << err);
          CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
        }
  cuda_fused::set_small_gemm(-1);
}

TEST_CASE("cuda small-M GEMM kernel: split-K for large K", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  using cuda_fused::SmallGemmAct;
  cuda_fused::set_small_gemm(1);
  CHECK(cuda_fused::small_gemm_workspace(DType::Float16, 128, 768, 1024) == 0);  // direct kernel
  struct Shape { int64_t M, K, N; };
  // BERT's FFN2 at 1x128; a K just over the direct cap (uneven splits); odd M and N.
  const Shape shapes[] = {{128, 3072, 768}, {77, 1032, 136}, {5, 2056, 8}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (SmallGemmAct act : {SmallGemmAct::None, SmallGemmAct::GeluErf})
      for (const Shape& s : shapes)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          INFO(cuda_check::short_name(dt) << " act " << int(act) << " M " << s.M << " K " << s.K << " N " << s.N
                                          << " bias " << with_bias);
          Problem p(dt, s.M, s.K, s.N);
          const size_t ws = cuda_fused::small_gemm_workspace(dt, p.M, p.N, p.K);
          REQUIRE(ws >= size_t(2 * p.M * p.N * 4));  // at least two splits of fp32 partials
          DevBuf w(ws);
          ck(cudaMemsetAsync(w.p, 0xFF, ws, st.s), "poison workspace");  // every partial must be written
          std::vector<float> first;
          for (int run = 0; run < 2; ++run) {
            p.poison(st.s);
            REQUIRE(cuda_fused::launch_small_gemm(dt, act, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr,
                                                  p.dY.p, p.M, p.N, p.K, st.s, w.p));
            ck(cudaStreamSynchronize(st.s), "kernel");
            const auto got = download16(dt, p.dY.p, p.M * p.N);
            if (run == 0) {
              const double err = cuda_check::rel_err(got, p.reference(with_bias, act));
              INFO("relative error " << err);
              CHECK(err < (dt == DType::Float16 ? 2e-3 : 1e-2));
              first = got;
            } else {
              CHECK(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0);  // deterministic
            }
          }
        }
  cuda_fused::set_small_gemm(-1);
}

TEST_CASE("cuda GEMM + erf-GELU kernel refuses what it does not handle", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  const DType dt = DType::Float16;
  Problem p(dt, 64, 64, 64);
  auto refused = [&](const void* a, const void* b, void* y, int64_t M, int64_t N, int64_t K, DType t) {
    p.poison(st.s);
    const bool launched = cuda_fused::launch_gemm_bias_gelu(t, a, b, p.dbias.p, y, M, N, K, st.s);
    ck(cudaStreamSynchronize(st.s), "kernel");
    return !launched && all_nan(download16(dt, p.dY.p, 64 * 64));
  };
  cuda_fused::set_gemm_gelu(0);
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 64, 64, 64, dt));  // switched off
  cuda_fused::set_gemm_gelu(1);
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, cuda_fused::kGemmGeluMaxM + 1, 64, 64, dt));  // M over the cap
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 64, 60, 64, dt));                              // N % 8 != 0
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 64, 64, 60, dt));                              // K % 8 != 0
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 64, 64, 64, DType::Float));                    // fp32
  CHECK(refused(static_cast<char*>(p.dA.p) + 2, p.dB.p, p.dY.p, 8, 64, 64, dt));       // misaligned A
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 0, 64, 64, dt));                               // empty
  cuda_fused::set_gemm_gelu(-1);
  // The general entry point: its own switch, and K capped.
  auto small_refused = [&](int64_t K) {
    p.poison(st.s);
    const bool launched = cuda_fused::launch_small_gemm(dt, cuda_fused::SmallGemmAct::None, p.dA.p, p.dB.p,
                                                        nullptr, p.dY.p, 8, 64, K, st.s);
    ck(cudaStreamSynchronize(st.s), "kernel");
    return !launched && all_nan(download16(dt, p.dY.p, 64 * 64));
  };
  cuda_fused::set_small_gemm(0);
  CHECK(small_refused(64));
  cuda_fused::set_small_gemm(1);
  CHECK(small_refused(cuda_fused::kSmallGemmMaxK + 8));  // split-K needs a workspace: none given
  cuda_fused::set_small_gemm(-1);
}

TEST_CASE("cuda FusedMatMul / LayerNormLinear gelu through the fused GEMM kernel", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_gemm_gelu(1);
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      {
        OpCase c("fuseopt", "FusedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", "gelu"));
        Tensor a = cuda_check::random_tensor({1, 77, 96}, -2.f, 2.f), b = cuda_check::random_tensor({96, 136});
        Tensor bias = cuda_check::random_tensor({136});
        c.inputs = {&a, &b, with_bias ? &bias : nullptr};
        auto got = c.run_cuda(dt);
        auto want = c.run_cpu(dt);
        INFO("FusedMatMul " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      {
        OpCase c("fuseopt", "LayerNormLinear", 6, 1);
        c.attr(Attribute::make_string("activation", "gelu"));
        c.attr(Attribute::make_float("epsilon", 1e-5f));
        Tensor x = cuda_check::random_tensor({2, 17, 96}, -2.f, 3.f);
        Tensor gamma = cuda_check::random_tensor({96}, 0.5f, 1.5f), beta = cuda_check::random_tensor({96});
        Tensor w = cuda_check::random_tensor({96, 264}), bias = cuda_check::random_tensor({264});
        c.inputs = {&x, &gamma, &beta, &w, with_bias ? &bias : nullptr, nullptr};
        auto got = c.run_cuda(dt);
        auto want = c.run_cpu(dt);
        INFO("LayerNormLinear " << cuda_check::short_name(dt) << " bias " << with_bias);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
    }
  cuda_fused::set_gemm_gelu(-1);
}

TEST_CASE("cuda MatMul / FusedMatMul / LayerNormLinear through the small-M GEMM kernel", "[cuda][gemm][gemm_gelu]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::set_small_gemm(1);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    {
      OpCase c("", "MatMul", 2, 1);
      Tensor a = cuda_check::random_tensor({3, 41, 96}), b = cuda_check::random_tensor({96, 72});
      c.inputs = {&a, &b};
      auto got = c.run_cuda(dt);
      auto want = c.run_cpu(dt);
      INFO("MatMul " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    {
      // K over the direct cap: split-K with the partials in the context's (poisoned) scratch.
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", "none"));
      Tensor a = cuda_check::random_tensor({1, 33, 1536}), b = cuda_check::random_tensor({1536, 72}, -0.2f, 0.2f);
      Tensor bias = cuda_check::random_tensor({72});
      c.inputs = {&a, &b, &bias};
      auto got = c.run_cuda(dt);
      auto want = c.run_cpu(dt);
      INFO("FusedMatMul split-K " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    // tanh: the small-M kernel has no tanh epilogue, so cuBLASLt + the tanh pass run (same numbers).
    for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "tanh"}) {
      OpCase c("fuseopt", "FusedMatMul", 3, 1);
      c.attr(Attribute::make_string("activation", act));
      Tensor a = cuda_check::random_tensor({1, 77, 96}, -2.f, 2.f), b = cuda_check::random_tensor({96, 136});
      Tensor bias = cuda_check::random_tensor({136});
      c.inputs = {&a, &b, &bias};
      auto got = c.run_cuda(dt);
      auto want = c.run_cpu(dt);
      INFO("FusedMatMul " << act << " " << cuda_check::short_name(dt));
      CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
    }
    {
      OpCase c("fuseopt", "LayerNormLinear", 6, 2);
      c.attr(Attribute::make_string("activation", "gelu_tanh"));
      c.attr(Attribute::make_float("epsilon", 1e-5f));
      Tensor x = cuda_check::random_tensor({2, 17, 96}, -2.f, 3.f), sk = cuda_check::random_tensor({2, 17, 96});
      Tensor gamma = cuda_check::random_tensor({96}, 0.5f, 1.5f), beta = cuda_check::random_tensor({96});
      Tensor w = cuda_check::random_tensor({96, 264}), bias = cuda_check::random_tensor({264});
      c.inputs = {&x, &gamma, &beta, &w, &bias, &sk};
      auto got = c.run_cuda(dt);
      auto want = c.run_cpu(dt);
      INFO("LayerNormLinear gelu_tanh " << cuda_check::short_name(dt));
      for (int o = 0; o < 2; ++o) CHECK(cuda_check::rel_error(got[o], want[o]) < cuda_check::tolerance(dt));
    }
  }
  cuda_fused::set_small_gemm(-1);
}
