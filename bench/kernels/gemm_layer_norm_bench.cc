// Micro-benchmark (hidden: `bin/bench_kernels "[.bench][gemm_layer_norm]"`; never decides
// pass/fail): FusedMatMulLayerNorm with a residual — the Hopper cluster kernel of
// kernels/cuda/fused_matmul_layer_norm_hopper.cu against the path it replaces, cuBLASLt's GEMM
// with its bias epilogue into scratch and the SkipLayerNorm kernel (launch_norm) — at a
// post-norm encoder's out-projection and FFN2: BERT-base at 32 x 128 / 8 x 512 (4096 rows),
// 8192 rows, BERT-large; the tile widths forced in turn. µs per call from one
// replay of a CUDA graph of 24 back-to-back calls (median of 15 replays), inputs rotated over 4 sets.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include "cuda_bench.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/fused_matmul_layer_norm.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

TEST_CASE("cuda GEMM + residual LayerNorm vs cuBLASLt + SkipLayerNorm benchmark", "[.bench][gemm_layer_norm]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  struct Shape {
    const char* what;
    int64_t M, K, N;
  };
  const Shape shapes[] = {
      {"BERT out-proj + LN 32x128", 4096, 768, 768},   {"BERT FFN2 + LN 32x128", 4096, 3072, 768},
      {"BERT out-proj + LN 16x512", 8192, 768, 768},   {"BERT FFN2 + LN 16x512", 8192, 3072, 768},
      {"BERT-large out-proj + LN", 4096, 1024, 1024}, {"BERT-large FFN2 + LN", 4096, 4096, 1024},
      {"BERT out-proj + LN 8x128", 1024, 768, 768},
  };
  // Ours, B [K, N] (the runtime's layout for this op's weight): the tile width by shape (auto)
  // and forced (-1: does not divide N into 2-8 slices).
  struct Config { const char* name; int tile_n; };
  const Config configs[] = {{"auto", 0}, {"256", 256}, {"192", 192}, {"128", 128}};
  constexpr int kConfigs = sizeof(configs) / sizeof(configs[0]);
  std::printf("\nBENCH %-26s %-15s %9s", "what", "MxKxN", "Lt+norm");
  for (const Config& c : configs) std::printf(" %8s", c.name);
  std::printf(" %7s  auto's config\n", "best x");
  for (const Shape& sh : shapes) {
    cuda_bench::DeviceBuffers mem;
    std::vector<void*> a, skip, y;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(sh.M * sh.K));
      skip.push_back(mem.random_half(sh.M * sh.N));
      y.push_back(mem.alloc(sh.M * sh.N * 2));
    }
    void* w = mem.random_half(sh.K * sh.N, -0.05f, 0.05f);
    void* bias = mem.random_half(sh.N);
    void* gamma = mem.random_half(sh.N, 0.5f, 1.5f);
    void* beta = mem.random_half(sh.N);
    void* h = mem.alloc(sh.M * sh.N * 2);
    void* ws = mem.alloc(32 << 20);
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(sh.M, sh.K, sh.N);
    d.bias = bias;
    d.epilogue = cuda_fused::GemmEpilogue::Bias;
    const double lt = cuda_bench::graph_us(s, [&](int i) {
      const int k = i % cuda_bench::kSets;
      cuda_fused::gemm(d, a[k], w, h, s, scratch);
      cuda_fused::NormArgs na;
      na.dtype = DType::Float16;
      na.rows = sh.M;
      na.D = sh.N;
      na.x = h;
      na.skip = skip[k];
      na.skip_rows = sh.M;
      na.gamma = gamma;
      na.beta = beta;
      na.y = y[k];
      na.eps = 1e-12f;
      cuda_fused::launch_norm(na, s);
    });
    double ours[kConfigs];
    cuda_fused::GemmLayerNormLaunch auto_cfg;
    for (int v = 0; v < kConfigs; ++v) {
      cuda_fused::set_gemm_layer_norm_hopper_tile_n(configs[v].tile_n);
      cuda_fused::HopperGemmLayerNorm g;
      g.b = w;
      g.bias = bias;
      g.gamma = gamma;
      g.beta = beta;
      g.M = sh.M;
      g.N = sh.N;
      g.K = sh.K;
      g.eps = 1e-12f;
      g.a = a[0];
      g.skip = skip[0];
      g.y = y[0];
      if (!cuda_fused::gemm_layer_norm_hopper_fits(g, s)) {
        ours[v] = -1;
        continue;
      }
      ours[v] = cuda_bench::graph_us(s, [&](int i) {
        const int k = i % cuda_bench::kSets;
        g.a = a[k];
        g.skip = skip[k];
        g.y = y[k];
        REQUIRE(cuda_fused::launch_gemm_layer_norm_hopper(g, s));
      });
      if (v == 0) auto_cfg = cuda_fused::gemm_layer_norm_hopper_last_launch();
    }
    cuda_fused::set_gemm_layer_norm_hopper_tile_n(0);
    double best = 1e30;
    for (double o : ours)
      if (o > 0 && o < best) best = o;
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)sh.M, (long long)sh.K, (long long)sh.N);
    std::printf("BENCH %-26s %-15s %9.2f", sh.what, dims, lt);
    for (double o : ours) std::printf(" %8.2f", o);
    std::printf(" %7.2f  BN %d x %d, %d clusters held, grid %d\n", lt / best, auto_cfg.bn, auto_cfg.cln,
                auto_cfg.resident_clusters, auto_cfg.grid);
  }
  cudaStreamDestroy(s);
}
