// A/B micro-benchmark, same process, same buffers (hidden: `bin/bench_kernels
// "[.bench]"`, FUSEOPT_BENCH_ONLY=tune for this file alone; never decides
// pass/fail): cuBLASLt heuristic-first vs autotuned algorithms at BERT-base's
// GEMM shapes, and the block-per-row vs warp-per-row norm at 4096×768.
// Each variant is timed twice, interleaved (A B A B), so the spread is visible.
// CUDA events, 20 warm-ups, median of 100, inputs rotated over 4 sets.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gemm_cublaslt.h"
#include "cuda_bench.h"
#include "support/cuda_kernel_check.h"

namespace fuseopt::cuda_fused {
void set_norm_warp_rows(bool on);  // kernels/cuda/fused_norm.cu
}  // namespace fuseopt::cuda_fused

using namespace fuseopt;

namespace {

using cuda_bench::DeviceBuffers;
using cuda_bench::kSets;
using cuda_bench::section_on;
using cuda_bench::time_us;

}  // namespace

TEST_CASE("cuda GEMM autotune and norm path A/B benchmark", "[.bench]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  DeviceBuffers mem;
  void* ws = mem.alloc(32 << 20);
  auto scratch = [ws](size_t) { return ws; };
  std::vector<std::string> summary;
  char line[256];

  if (section_on("tune gemm")) {
    struct Shape {
      const char* what;
      int64_t M, K, N;
      bool erf;  // BIAS epilogue + erf-GELU pass (BERT's FFN1)
      int per_layer;
    };
    const std::vector<Shape> shapes = {
        {"QKV 32x128", 4096, 768, 2304, false, 1},   {"attn-out 32x128", 4096, 768, 768, false, 1},
        {"FFN1+erf 32x128", 4096, 768, 3072, true, 1}, {"FFN2 32x128", 4096, 3072, 768, false, 1},
        {"QKV 1x128", 128, 768, 2304, false, 1},     {"attn-out 1x128", 128, 768, 768, false, 1},
        {"FFN1+erf 1x128", 128, 768, 3072, true, 1},   {"FFN2 1x128", 128, 3072, 768, false, 1},
        {"FFN1 16384", 16384, 768, 3072, false, 0},
    };
    double layer_heur[2] = {0, 0}, layer_tuned[2] = {0, 0};
    for (const Shape& g : shapes) {
      std::vector<void*> A, Y;
      for (int k = 0; k < kSets; ++k) {
        A.push_back(mem.random_half(g.M * g.K));
        Y.push_back(mem.alloc(g.M * g.N * 2));
      }
      void* W = mem.random_half(g.K * g.N);
      void* bias = mem.random_half(g.N);
      cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(g.M, g.K, g.N);
      d.epilogue = cuda_fused::GemmEpilogue::Bias;
      d.bias = bias;
      double t[4];
      int winner = 0, timed = 0;
      for (int rep = 0; rep < 4; ++rep) {
        const bool tune = rep % 2 == 1;
        cuda_fused::set_gemm_autotune(tune);
        t[rep] = time_us(s, [&](int i) {
          cuda_fused::gemm(d, A[i % kSets], W, Y[i % kSets], s, scratch);
          if (g.erf) cuda_fused::launch_bias_gelu_erf(DType::Float16, Y[i % kSets], nullptr, g.M, g.N, s);
        });
        if (tune) {
          winner = cuda_fused::gemm_last_tune_info().winner_index;
          timed = cuda_fused::gemm_last_tune_info().candidates_timed;
        }
      }
      cuda_fused::set_gemm_autotune(true);
      const double heur = std::min(t[0], t[2]), tuned = std::min(t[1], t[3]);
      const double tflops = 2.0 * g.M * g.N * g.K / tuned * 1e-6;
      std::snprintf(line, sizeof line, "%-17s %5ldx%4ldx%4ld heur %7.1f %7.1f  tuned %7.1f %7.1f us  x%.2f  (%.0f TFLOP/s, winner #%d of %d)",
                    g.what, long(g.M), long(g.K), long(g.N), t[0], t[2], t[1], t[3], heur / tuned, tflops, winner,
                    timed);
      std::printf("BENCH %s\n", line);
      summary.push_back(line);
      const int idx = g.M == 4096 ? 0 : 1;
      if (g.per_layer) {
        layer_heur[idx] += heur;
        layer_tuned[idx] += tuned;
      }
    }
    for (int idx = 0; idx < 2; ++idx) {
      std::snprintf(line, sizeof line, "GEMMs per BERT layer %s: heur %.1f us, tuned %.1f us -> x12 layers %.2f -> %.2f ms",
                    idx == 0 ? "32x128" : "1x128", layer_heur[idx], layer_tuned[idx], 12 * layer_heur[idx] * 1e-3,
                    12 * layer_tuned[idx] * 1e-3);
      std::printf("BENCH %s\n", line);
      summary.push_back(line);
    }
    // The erf-GELU pass alone (DRAM-bound here: 4 rotated sets of 25 MB).
    {
      std::vector<void*> Y;
      for (int k = 0; k < kSets; ++k) Y.push_back(mem.random_half(4096 * 3072));
      const double us = time_us(s, [&](int i) {
        cuda_fused::launch_bias_gelu_erf(DType::Float16, Y[i % kSets], nullptr, 4096, 3072, s);
      });
      std::snprintf(line, sizeof line, "erf-GELU pass alone 4096x3072 fp16: %.1f us (%.2f TB/s)", us,
                    2.0 * 4096 * 3072 * 2 / us * 1e-6);
      std::printf("BENCH %s\n", line);
      summary.push_back(line);
    }
  }

  if (section_on("tune norm")) {
    struct NormShape {
      const char* what;
      int64_t rows, D;
      bool skip, sum;
    };
    for (NormShape ns : {NormShape{"SkipLN", 4096, 768, true, false}, NormShape{"SkipLN+Sum", 4096, 768, true, true},
                         NormShape{"LayerNorm", 4096, 768, false, false},
                         NormShape{"SkipLN", 16384, 768, true, false}, NormShape{"SkipLN", 128, 768, true, false},
                         NormShape{"SkipLN", 4096, 1024, true, false}}) {
      std::vector<void*> X, Sk, Y, Sum;
      for (int k = 0; k < kSets; ++k) {
        X.push_back(mem.random_half(ns.rows * ns.D));
        Sk.push_back(mem.random_half(ns.rows * ns.D));
        Y.push_back(mem.alloc(ns.rows * ns.D * 2));
        Sum.push_back(mem.alloc(ns.rows * ns.D * 2));
      }
      void* gamma = mem.random_half(ns.D, 0.5f, 1.5f);
      void* beta = mem.random_half(ns.D);
      cuda_fused::NormArgs a;
      a.dtype = DType::Float16;
      a.rows = ns.rows;
      a.D = ns.D;
      a.gamma = gamma;
      a.beta = beta;
      a.eps = 1e-12f;
      double t[4];
      for (int rep = 0; rep < 4; ++rep) {
        cuda_fused::set_norm_warp_rows(rep % 2 == 1);
        t[rep] = time_us(s, [&](int i) {
          a.x = X[i % kSets];
          a.skip = ns.skip ? Sk[i % kSets] : nullptr;
          a.skip_rows = ns.skip ? ns.rows : 0;
          a.y = Y[i % kSets];
          a.sum = ns.sum ? Sum[i % kSets] : nullptr;
          cuda_fused::launch_norm(a, s);
        });
      }
      cuda_fused::set_norm_warp_rows(true);
      const double bytes = double(ns.rows) * ns.D * 2 * (2 + (ns.skip ? 1 : 0) + (ns.sum ? 1 : 0));
      const double block = std::min(t[0], t[2]), warp = std::min(t[1], t[3]);
      std::snprintf(line, sizeof line, "%-10s %5ldx%4ld block %6.1f %6.1f  warp %6.1f %6.1f us  x%.2f  (%.2f TB/s)",
                    ns.what, long(ns.rows), long(ns.D), t[0], t[2], t[1], t[3], block / warp, bytes / warp * 1e-6);
      std::printf("BENCH %s\n", line);
      summary.push_back(line);
    }
  }

  std::printf("\n== A/B summary (heuristic-first vs autotuned GEMM; block vs warp norm)\n");
  for (const auto& l : summary) std::printf("%s\n", l.c_str());
  cudaStreamDestroy(s);
}
