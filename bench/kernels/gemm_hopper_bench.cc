// Micro-benchmark (hidden: `bin/bench_kernels "[.bench][gemm_hopper]"`; never decides
// pass/fail): the Hopper GEMM of kernels/cuda/gemm_hopper.cu against cuBLASLt (+ the erf-GELU
// pass where the activation needs it) at the large-M transformer shapes: BERT-base at 32 x 128
// and 8 x 512 (4096 rows), ViT-base at batch 32 (6304 rows), and its plain GEMMs for
// reference. µs per call from one replay of a CUDA graph of 24 back-to-back calls (median of
// 15 replays), inputs rotated over 4 sets; both B layouts and both tile widths; every kernel of a
// shape timed in 3 interleaved rounds, the median reported (cuda_bench::interleaved). Figures go
// to NOTES-perf.md v19 on. FUSEOPT_BENCH_ONLY=<part of a shape's name> runs the matching shapes,
// FUSEOPT_BENCH_ROUNDS=1 one round (for ncu).
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "cuda_bench.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_hopper.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

TEST_CASE("cuda Hopper GEMM vs cuBLASLt benchmark", "[.bench][gemm_hopper]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  using A = cuda_fused::HopperGemmAct;
  struct Shape {
    const char* what;
    int64_t M, K, N;
    A act;
    bool bias = true;
  };
  const Shape shapes[] = {
      {"BERT FFN1+erf-GELU 32x128", 4096, 768, 3072, A::GeluErf},
      {"  the same without bias", 4096, 768, 3072, A::GeluErf, false},
      {"ViT FFN1+erf-GELU b32", 6304, 768, 3072, A::GeluErf},
      {"BERT FFN1+erf-GELU 8x128", 1024, 768, 3072, A::GeluErf},
      {"BERT QKV 32x128", 4096, 768, 2304, A::None},
      {"BERT FFN2 32x128", 4096, 3072, 768, A::None},
      {"BERT out-proj 32x128", 4096, 768, 768, A::None},
      {"Llama gate/up 1x2048", 2048, 2048, 16384, A::None},
      {"Llama down 1x2048", 2048, 8192, 2048, A::None},
  };
  // kn / nk: B stored [K, N] / [N, K]; 128 / 256: the cooperative schedule's tile width, c2 in
  // clusters of two (B multicast); pp: the ping-pong schedule.
  struct Config { const char* name; int tile_n, cluster, schedule; };
  const Config configs[] = {{"256", 256, 1, 1}, {"128c2", 128, 2, 1}, {"256c2", 256, 2, 1}, {"pp", 0, 1, 2}};
  constexpr int kConfigs = sizeof(configs) / sizeof(configs[0]);
  std::printf("\nBENCH %-28s %-16s %10s", "what", "MxKxN", "cuBLASLt");
  for (const char* lay : {"kn", "nk"})
    for (const Config& c : configs) std::printf(" %7s/%-5s", lay, c.name);
  std::printf(" %8s\n", "best x");
  for (const Shape& sh : shapes) {
    if (!cuda_bench::section_on(sh.what)) continue;
    cuda_bench::DeviceBuffers mem;
    std::vector<void*> a, y;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(sh.M * sh.K));
      y.push_back(mem.alloc(sh.M * sh.N * 2));
    }
    void* w = mem.random_half(sh.K * sh.N, -0.05f, 0.05f);
    void* bias = mem.random_half(sh.N);
    void* ws = mem.alloc(32 << 20);
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(sh.M, sh.K, sh.N);
    d.bias = sh.bias ? bias : nullptr;
    d.epilogue = sh.bias ? cuda_fused::GemmEpilogue::Bias : cuda_fused::GemmEpilogue::None;
    // cuBLASLt (+ the pass), then every configuration of ours, in interleaved rounds.
    std::vector<std::function<double()>> timers;
    timers.push_back([&] {
      return cuda_bench::graph_us(s, [&](int i) {
        const int k = i % cuda_bench::kSets;
        cuda_fused::gemm(d, a[k], w, y[k], s, scratch);
        if (sh.act == A::GeluErf) cuda_fused::launch_bias_gelu_erf(DType::Float16, y[k], nullptr, sh.M, sh.N, s);
      });
    });
    for (int b_nk = 0; b_nk < 2; ++b_nk)
      for (const Config& c : configs)
        timers.push_back([&, b_nk, c] {
          cuda_fused::set_hopper_gemm_tile_n(c.tile_n);
          cuda_fused::set_hopper_gemm_schedule(c.schedule);
          cuda_fused::set_hopper_gemm_cluster(c.cluster);
          const double us = cuda_bench::graph_us(s, [&](int i) {
            const int k = i % cuda_bench::kSets;
            cuda_fused::HopperGemm g;
            g.a = a[k];
            g.b = w;  // the same bytes read as [K, N] or [N, K]: the timing does not care
            g.b_nk = b_nk != 0;
            g.bias = sh.bias ? bias : nullptr;
            g.y = y[k];
            g.M = sh.M;
            g.N = sh.N;
            g.K = sh.K;
            g.act = sh.act;
            REQUIRE(cuda_fused::launch_gemm_hopper(g, s));
          });
          cuda_fused::set_hopper_gemm_tile_n(0);
          cuda_fused::set_hopper_gemm_schedule(0);
          cuda_fused::set_hopper_gemm_cluster(0);
          return us;
        });
    const std::vector<double> med = cuda_bench::interleaved(timers);
    const double lt = med[0];
    double ours[2 * kConfigs];
    for (int v = 0; v < 2 * kConfigs; ++v) ours[v] = med[1 + v];
    double best = ours[0];
    for (double o : ours) best = o < best ? o : best;
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)sh.M, (long long)sh.K, (long long)sh.N);
    std::printf("BENCH %-28s %-16s %10.2f", sh.what, dims, lt);
    for (double o : ours) std::printf(" %13.2f", o);
    std::printf(" %8.2f\n", lt / best);
    const double tflop = 2.0 * sh.M * sh.K * sh.N / 1e12;
    std::printf("BENCH %-28s TFLOP/s: cuBLASLt %.0f, best of ours %.0f\n", "", tflop / (lt * 1e-6),
                tflop / (best * 1e-6));
  }
  cudaStreamDestroy(s);
}

TEST_CASE("cuda Hopper gated GEMM vs cuBLASLt + gate pass benchmark", "[.bench][gemm_hopper]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  struct Shape {
    const char* what;
    int64_t M, K, h;
  };
  const Shape shapes[] = {
      {"Llama gate/up+SiLU 1x2048", 2048, 2048, 8192},
      {"Llama gate/up+SiLU 1x1024", 1024, 2048, 8192},
      {"Llama gate/up+SiLU 4x2048", 8192, 2048, 8192},
      // A 128-row prefill: 128 tiles of 64 + 64 columns; clusters of two need two row tiles, so
      // its c2 columns run one block a tile again.
      {"Llama gate/up+SiLU 1x128", 128, 2048, 8192},
  };
  std::printf("\nBENCH %-28s %-16s %10s %10s %10s %10s %10s %8s\n", "what", "MxKx2h", "cuBLASLt+gate", "kn",
              "nk", "kn/c2", "nk/c2", "best x");
  for (const Shape& sh : shapes) {
    if (!cuda_bench::section_on(sh.what)) continue;
    cuda_bench::DeviceBuffers mem;
    std::vector<void*> a, y;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(sh.M * sh.K));
      y.push_back(mem.alloc(sh.M * sh.h * 2));
    }
    void* w = mem.random_half(sh.K * 2 * sh.h, -0.05f, 0.05f);
    void* p = mem.alloc(sh.M * 2 * sh.h * 2);
    void* ws = mem.alloc(32 << 20);
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(sh.M, sh.K, 2 * sh.h);
    d.trans_b = true;  // the runtime's weight layout for GatedMatMul ([2h, K])
    std::vector<std::function<double()>> timers;  // interleaved rounds: the long GEMMs drift
    timers.push_back([&] {
      return cuda_bench::graph_us(s, [&](int i) {
        const int k = i % cuda_bench::kSets;
        cuda_fused::gemm(d, a[k], w, p, s, scratch);
        cuda_fused::launch_gated_activation(DType::Float16, cuda_fused::GateActivation::Silu, p, y[k], sh.M, sh.h, s);
      });
    });
    for (int cluster = 1; cluster <= 2; ++cluster)  // kn, nk; one block a tile, then clusters of two
      for (int b_nk = 0; b_nk < 2; ++b_nk)
        timers.push_back([&, cluster, b_nk] {
          cuda_fused::set_hopper_gemm_cluster(cluster);
          const double us = cuda_bench::graph_us(s, [&](int i) {
            const int k = i % cuda_bench::kSets;
            cuda_fused::HopperGemm g;
            g.a = a[k];
            g.b = w;
            g.b_nk = b_nk != 0;
            g.gated = true;
            g.y = y[k];
            g.M = sh.M;
            g.N = sh.h;
            g.K = sh.K;
            g.act = cuda_fused::HopperGemmAct::Silu;
            REQUIRE(cuda_fused::launch_gemm_hopper(g, s));
          });
          cuda_fused::set_hopper_gemm_cluster(0);
          return us;
        });
    const std::vector<double> med = cuda_bench::interleaved(timers);
    const double lt = med[0];
    double ours[4];
    for (int v = 0; v < 4; ++v) ours[v] = med[1 + v];
    double best = ours[0];
    for (double o : ours) best = o < best ? o : best;
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)sh.M, (long long)sh.K, (long long)(2 * sh.h));
    std::printf("BENCH %-28s %-16s %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f\n", sh.what, dims, lt, ours[0], ours[1],
                ours[2], ours[3], lt / best);
  }
  cudaStreamDestroy(s);
}

// The tied masked-LM decoder (4096 x 768 x 30522, bias, B [N, K]): our kernel writing Y's own
// rows of 30522 (ROWS: fp16 and float logits, FUSEOPT_HOPPER_ODD_N's path) against cuBLASLt into
// rows padded to 30528 (the default path's GEMM, before its pack into Y; NOTES-perf.md v33).
TEST_CASE("cuda Hopper GEMM odd vocabulary vs cuBLASLt benchmark", "[.bench][gemm_hopper]") {
  if (!cuda_check::gpu_ready() || !cuda_bench::section_on("vocabulary")) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  const int64_t M = 4096, K = 768, N = 30522, Np = 30528;
  cuda_bench::DeviceBuffers mem;
  std::vector<void*> a, y;
  for (int k = 0; k < cuda_bench::kSets; ++k) {
    a.push_back(mem.random_half(M * K));
    y.push_back(mem.alloc(M * Np * 4));
  }
  void* w = mem.random_half(Np * K, -0.05f, 0.05f);
  void* bias = mem.random_half(Np);
  void* ws = mem.alloc(32 << 20);
  auto scratch = [ws](size_t) { return ws; };
  cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(M, K, Np);
  d.trans_b = true;
  d.bias = bias;
  d.epilogue = cuda_fused::GemmEpilogue::Bias;
  std::vector<std::function<double()>> timers;
  timers.push_back([&] {
    return cuda_bench::graph_us(
        s, [&](int i) { cuda_fused::gemm(d, a[i % cuda_bench::kSets], w, y[i % cuda_bench::kSets], s, scratch); });
  });
  for (int f = 0; f < 2; ++f)
    timers.push_back([&, f] {
      return cuda_bench::graph_us(s, [&](int i) {
        cuda_fused::HopperGemm g;
        g.a = a[i % cuda_bench::kSets];
        g.b = w;
        g.b_nk = true;
        g.bias = bias;
        g.y = y[i % cuda_bench::kSets];
        g.y_fp32 = f == 1;
        g.M = M;
        g.N = N;
        g.K = K;
        REQUIRE(cuda_fused::launch_gemm_hopper(g, s));
      });
    });
  const std::vector<double> med = cuda_bench::interleaved(timers);
  const double lt = med[0], ours[2] = {med[1], med[2]};
  std::printf("\nBENCH %-28s %-16s %14s %12s %12s\n", "what", "MxKxN", "cuBLASLt pad", "ours fp16", "ours fp32");
  std::printf("BENCH %-28s %-16s %14.2f %12.2f %12.2f\n", "MLM decoder 32x128 (vocabulary)", "4096x768x30522", lt,
              ours[0], ours[1]);
  cudaStreamDestroy(s);
}
