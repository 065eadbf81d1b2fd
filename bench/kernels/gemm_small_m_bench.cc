// Micro-benchmark (hidden: `bin/bench_kernels "[.bench][gemm_small_m]"`;
// never decides pass/fail): the weight-streaming small-M GEMM of
// kernels/cuda/gemm_small_m.cu against cuBLASLt at a Llama-3.2-1B decode
// step's GEMMs (fp16, no bias, B [K, N]; ours also with B stored [N, K]), M 1
// and 8. Per-call µs from CUDA-graph replays (cuda_bench::graph_us), weights
// rotated over enough sets to leave L2 (as 16 layers' weights do), GB/s as
// (weights + A + Y) bytes per call; with B [N, K] at M >= 3 both the
// tensor-core GEMV (gemv_nk_mma.cu, the default) and the CUDA-core one; then
// GatedMatMul's gate+up, cuBLASLt + the gate pass against the gated kernels
// ([K, 2N], and [2N, K] as the runtime stores it). FUSEOPT_BENCH_ONLY=<GEMM name or
// "gated"> picks one section.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemv_nk_fused.h"
#include "kernels/cuda/gemv_nk_mma.h"
#include "cuda_bench.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

TEST_CASE("cuda small-M GEMV vs cuBLASLt benchmark (Llama-1B decode)", "[.bench][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cuda_fused::set_gemm_small_m(1);
  struct Shape {
    const char* what;
    int64_t K, N;
  };
  const Shape shapes[] = {{"QKV", 2048, 3072}, {"o-proj", 2048, 2048}, {"down-proj", 8192, 2048},
                          {"gate+up", 2048, 16384}};
  std::printf("\nBENCH %-10s %-18s %11s %9s %11s %9s %11s %9s %11s %9s\n", "GEMM", "MxKxN", "cuBLASLt us", "GB/s",
              "ours us", "GB/s", "ours NK us", "GB/s", "NK cores us", "GB/s");
  for (int64_t M : {1, 8})
    for (const Shape& sh : shapes) {
      if (!cuda_bench::section_on(sh.what)) continue;
      const int64_t wbytes = sh.K * sh.N * 2;
      // > 256 MB of weights in rotation (H200's L2 is 60 MB).
      const int sets = static_cast<int>(std::clamp<int64_t>((int64_t(256) << 20) / wbytes + 1, 4, 32));
      cuda_bench::DeviceBuffers mem;
      std::vector<void*> a, w, y;
      for (int k = 0; k < cuda_bench::kSets; ++k) {
        a.push_back(mem.random_half(M * sh.K));
        y.push_back(mem.alloc(M * sh.N * 2));
      }
      // The [K, N] and [N, K] timings read the same buffers (only the layout
      // differs; the values do not matter here).
      for (int k = 0; k < sets; ++k) w.push_back(mem.random_half(sh.K * sh.N, -0.05f, 0.05f));
      void* ws = mem.alloc(32 << 20);
      auto scratch = [ws](size_t) { return ws; };
      cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(M, sh.K, sh.N);
      const double lt = cuda_bench::graph_us(s, [&](int i) {
        cuda_fused::gemm(d, a[i % cuda_bench::kSets], w[i % sets], y[i % cuda_bench::kSets], s, scratch);
      });
      auto ours_us = [&](bool trans_b) {
        return cuda_bench::graph_us(s, [&](int i) {
          REQUIRE(cuda_fused::launch_gemm_small_m(DType::Float16, cuda_fused::GemvAct::None, a[i % cuda_bench::kSets],
                                                  w[i % sets], nullptr, y[i % cuda_bench::kSets], M, sh.N, sh.K,
                                                  trans_b, s));
        });
      };
      const double kn = ours_us(false), nk = ours_us(true);
      cuda_fused::set_gemv_mma(0);  // the CUDA-core [N, K] kernel at the same rows
      const double nk_cores = ours_us(true);
      cuda_fused::set_gemv_mma(-1);
      const double bytes = double(wbytes + M * sh.K * 2 + M * sh.N * 2);
      auto gbs = [&](double us) { return bytes / (us * 1e3); };
      char dims[32];
      std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)M, (long long)sh.K, (long long)sh.N);
      std::printf("BENCH %-10s %-18s %11.2f %9.0f %11.2f %9.0f %11.2f %9.0f %11.2f %9.0f\n", sh.what, dims, lt,
                  gbs(lt), kn, gbs(kn), nk, gbs(nk), nk_cores, gbs(nk_cores));
    }
  // GatedMatMul at Llama-1B's gate+up (W [2048, 2 x 8192], SiLU): cuBLASLt's
  // GEMM into P + the gate pass, against the one gated kernel.
  std::printf("BENCH %-10s %-18s %11s %9s %11s %9s %11s %9s\n", "gated", "MxKxN", "Lt+pass us", "GB/s", "ours us",
              "GB/s", "ours NK us", "GB/s");
  for (int64_t M : {1, 8}) {
    if (!cuda_bench::section_on("gated")) break;
    const int64_t K = 2048, N = 8192, wbytes = K * 2 * N * 2;
    const int sets = 4;
    cuda_bench::DeviceBuffers mem;
    std::vector<void*> a, w, y;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(M * K));
      y.push_back(mem.alloc(M * N * 2));
    }
    for (int k = 0; k < sets; ++k) w.push_back(mem.random_half(K * 2 * N, -0.05f, 0.05f));
    void* p = mem.alloc(M * 2 * N * 2);
    void* ws = mem.alloc(32 << 20);
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(M, K, 2 * N);
    const double lt = cuda_bench::graph_us(s, [&](int i) {
      cuda_fused::gemm(d, a[i % cuda_bench::kSets], w[i % sets], p, s, scratch);
      cuda_fused::launch_gated_activation(DType::Float16, cuda_fused::GateActivation::Silu, p,
                                          y[i % cuda_bench::kSets], M, N, s);
    });
    const double ours = cuda_bench::graph_us(s, [&](int i) {
      REQUIRE(cuda_fused::launch_gated_small_m(DType::Float16, cuda_fused::GateActivation::Silu,
                                               a[i % cuda_bench::kSets], w[i % sets], nullptr,
                                               y[i % cuda_bench::kSets], M, N, K, s));
    });
    // W read as [2N, K] (the runtime's layout for 16-bit sessions; the values do not matter here).
    const double ours_nk = cuda_bench::graph_us(s, [&](int i) {
      REQUIRE(cuda_fused::launch_gated_gemv_nk(DType::Float16, cuda_fused::GateActivation::Silu,
                                               a[i % cuda_bench::kSets], w[i % sets], nullptr,
                                               y[i % cuda_bench::kSets], M, N, K, s));
    });
    const double bytes = double(wbytes + M * K * 2 + M * N * 2);
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)M, (long long)K, (long long)(2 * N));
    std::printf("BENCH %-10s %-18s %11.2f %9.0f %11.2f %9.0f %11.2f %9.0f\n", "gate+up", dims, lt,
                bytes / (lt * 1e3), ours, bytes / (ours * 1e3), ours_nk, bytes / (ours_nk * 1e3));
  }
  cuda_fused::set_gemm_small_m(-1);
  cudaStreamDestroy(s);
}
