// cuBLASLt GEMM algorithm autotuning (kernels/cuda/gemm_cublaslt.cc): the
// tuned algorithm must compute the same product as a host fp64 reference on
// fresh random inputs with a NaN-poisoned output; a first call under CUDA-graph
// capture must not time anything and must still give the right result in the
// graph; beta != 0 (the residual as C, or D's own contents) is tuned too, and
// the product is still accumulated exactly once with C left as it was.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_cublaslt.h"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_check::DevBuf;
using cuda_check::rel_err;

std::vector<float> random_values(size_t n) { return cuda_check::random_values(DType::Float16, n, -1.f, 1.f); }
void upload_half(void* dst, const std::vector<float>& v) { cuda_check::upload(DType::Float16, dst, v); }
std::vector<float> download_half(const void* src, size_t n) { return cuda_check::download(DType::Float16, src, n); }

// Row-major Y[M,N] = A[M,K]·W[K,N] (+ bias[N]) (+ D0), in fp64.
std::vector<double> reference(const std::vector<float>& A, const std::vector<float>& W, const std::vector<float>* bias,
                              const std::vector<float>* d0, int64_t M, int64_t K, int64_t N) {
  std::vector<double> y(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[m * K + k];
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += a * W[k * N + n];
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      if (bias) y[m * N + n] += (*bias)[n];
      if (d0) y[m * N + n] += (*d0)[m * N + n];
    }
  return y;
}

struct Problem {
  int64_t M, K, N;
  std::vector<float> A, W, bias;
  DevBuf dA, dW, dBias, dY, ws;
  Problem(int64_t m, int64_t k, int64_t n)
      : M(m), K(k), N(n), A(random_values(m * k)), W(random_values(k * n)), bias(random_values(n)),
        dA(m * k * 2), dW(k * n * 2), dBias(n * 2), dY(m * n * 2), ws(64u << 20) {
    upload_half(dA.p, A);
    upload_half(dW.p, W);
    upload_half(dBias.p, bias);
  }
  // cudaMemset runs on the legacy stream, which does not order with the non-blocking
  // stream the GEMM runs on: wait for the poison before launching.
  void poison() {
    cuda_check::ck(cudaMemset(dY.p, 0xff, M * N * 2), "poison");
    cuda_check::ck(cudaDeviceSynchronize(), "poison");
  }
  cuda_fused::GemmDesc desc(bool with_bias) const {
    cuda_fused::GemmDesc d;
    d.dtype = DType::Float16;
    d.M = M;
    d.N = N;
    d.K = K;
    d.epilogue = with_bias ? cuda_fused::GemmEpilogue::Bias : cuda_fused::GemmEpilogue::None;
    d.bias = with_bias ? dBias.p : nullptr;
    return d;
  }
  cuda_fused::ScratchFn scratch() const {
    void* p = ws.p;
    return [p](size_t bytes) {
      REQUIRE(bytes <= (64u << 20));
      return p;
    };
  }
};

}  // namespace

TEST_CASE("cuda GEMM autotuning picks an algorithm that computes the product", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  const bool was = cuda_fused::gemm_autotune();
  cuda_fused::set_gemm_autotune(true);
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  // Odd sizes (not tile multiples), a latency-bound M, a BERT-like shape.
  struct Shape {
    int64_t M, K, N;
  };
  // K = 3000 with few output tiles: split-K variants are among the candidates
  // (and usually win), with K not a multiple of any split.
  for (Shape sh : {Shape{131, 96, 264}, Shape{128, 768, 768}, Shape{517, 200, 72}, Shape{128, 3000, 200},
                   Shape{64, 4099, 136}}) {
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      Problem p(sh.M, sh.K, sh.N);
      const auto want = reference(p.A, p.W, with_bias ? &p.bias : nullptr, nullptr, p.M, p.K, p.N);
      INFO("M " << p.M << " K " << p.K << " N " << p.N << " bias " << with_bias);
      // First call tunes; second uses the cache. Both must be right.
      for (int call = 0; call < 2; ++call) {
        p.poison();
        cuda_fused::gemm(p.desc(with_bias), p.dA.p, p.dW.p, p.dY.p, s, p.scratch());
        cuda_check::ck(cudaStreamSynchronize(s), "gemm");
        const auto info = cuda_fused::gemm_last_tune_info();
        // Winner index: the heuristic's 8, then at most 21 split-K variants.
        CHECK(info.winner_index >= 0);
        CHECK(info.winner_index < 8 + 21);
        if (info.candidates_timed == 0) CHECK(info.winner_index == 0);
        CHECK(rel_err(download_half(p.dY.p, p.M * p.N), want) < 2e-3);
      }
    }
  }
  cuda_fused::set_gemm_autotune(was);
  cudaStreamDestroy(s);
}

TEST_CASE("cuda GEMM first call under graph capture takes the heuristic choice", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  const bool was = cuda_fused::gemm_autotune();
  cuda_fused::set_gemm_autotune(true);
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  // A shape no other test uses, so the configuration is not cached yet.
  Problem p(77, 136, 104);
  const auto want = reference(p.A, p.W, &p.bias, nullptr, p.M, p.K, p.N);
  const size_t before = cuda_fused::gemm_algo_cache_size();
  cudaGraph_t graph = nullptr;
  cuda_check::ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  cuda_fused::gemm(p.desc(true), p.dA.p, p.dW.p, p.dY.p, s, p.scratch());
  cuda_check::ck(cudaStreamEndCapture(s, &graph), "end capture");
  CHECK(cuda_fused::gemm_last_tune_info().candidates_timed == 0);
  CHECK(cuda_fused::gemm_algo_cache_size() == before + 1);
  cudaGraphExec_t exec = nullptr;
  cuda_check::ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  p.poison();
  cuda_check::ck(cudaGraphLaunch(exec, s), "graph launch");
  cuda_check::ck(cudaStreamSynchronize(s), "graph run");
  const auto graph_out = download_half(p.dY.p, p.M * p.N);
  CHECK(rel_err(graph_out, want) < 2e-3);
  // An eager call afterwards uses the cached choice: bit-identical to the graph.
  p.poison();
  cuda_fused::gemm(p.desc(true), p.dA.p, p.dW.p, p.dY.p, s, p.scratch());
  cuda_check::ck(cudaStreamSynchronize(s), "eager");
  const auto eager_out = download_half(p.dY.p, p.M * p.N);
  CHECK(std::memcmp(graph_out.data(), eager_out.data(), graph_out.size() * sizeof(float)) == 0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cuda_fused::set_gemm_autotune(was);
  cudaStreamDestroy(s);
}

TEST_CASE("cuda GEMM with beta is tuned and accumulates exactly once", "[cuda][gemm]") {
  if (!cuda_check::gpu_ready()) return;
  const bool was = cuda_fused::gemm_autotune();
  cuda_fused::set_gemm_autotune(true);
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  struct Shape {
    int64_t M, K, N;
  };
  // Few output tiles (so tuned by default too); K = 3000 brings split-K candidates, whose
  // reduction must apply beta once; M 96 and N 120 do not divide any tile.
  for (Shape sh : {Shape{96, 64, 120}, Shape{128, 3000, 200}, Shape{131, 1000, 264}}) {
    for (int separate_c = 0; separate_c < 2; ++separate_c) {
      for (int with_bias = 0; with_bias < 2; ++with_bias) {
        Problem p(sh.M, sh.K, sh.N);
        INFO("M " << p.M << " K " << p.K << " N " << p.N << " separate C " << separate_c << " bias " << with_bias);
        const std::vector<float> d0 = random_values(p.M * p.N);
        DevBuf dC(p.M * p.N * 2);
        const auto want = reference(p.A, p.W, with_bias ? &p.bias : nullptr, &d0, p.M, p.K, p.N);
        cuda_fused::GemmDesc d = p.desc(with_bias);
        d.beta = 1.f;
        // First call tunes, second uses the cache: each accumulates once.
        for (int call = 0; call < 2; ++call) {
          if (separate_c) {
            upload_half(dC.p, d0);
            p.poison();
            d.c = dC.p;
          } else {
            upload_half(p.dY.p, d0);
          }
          cuda_fused::gemm(d, p.dA.p, p.dW.p, p.dY.p, s, p.scratch());
          cuda_check::ck(cudaStreamSynchronize(s), "gemm");
          const auto info = cuda_fused::gemm_last_tune_info();
          if (call == 0) CHECK(info.candidates_timed > 0);
          CHECK(info.winner_index >= 0);
          CHECK(rel_err(download_half(p.dY.p, p.M * p.N), want) < 2e-3);
          if (separate_c) {
            const auto c_after = download_half(dC.p, p.M * p.N);
            CHECK(std::memcmp(c_after.data(), d0.data(), d0.size() * sizeof(float)) == 0);
          }
        }
      }
    }
  }
  cuda_fused::set_gemm_autotune(was);
  cudaStreamDestroy(s);
}
