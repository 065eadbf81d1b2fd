// Micro-benchmark (hidden: `bin/bench_kernels "[.bench][gemm_splitk]"`; never decides pass/fail):
// the split-K Hopper GEMM of kernels/cuda/gemm_splitk_hopper.cu against cuBLASLt (+ the erf-GELU
// or gate pass where the activation needs it) at the 128-row shapes of batch-1 prefill: BERT-base /
// GPT-2 at 1 x 128 and Llama-3.2-1B-shaped at 1 x 128. The weights are rotated over enough copies
// (>= 160 MB) that they come from HBM, as in a model whose weights do not fit L2. µs per call from
// a CUDA graph of 24 back-to-back calls (PDL edges where the launches ask for them: the split-K
// kernel's weight requests then overlap the previous call), every kernel timed in 3 interleaved
// rounds (cuda_bench::interleaved). "pre" requests B before the launch wait (a constant weight,
// as the runtime passes it), "post" after. FUSEOPT_BENCH_ONLY=<part of a shape's name> filters.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "cuda_bench.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_splitk_hopper.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

TEST_CASE("cuda split-K Hopper GEMM vs cuBLASLt benchmark", "[.bench][gemm_splitk]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  using A = cuda_fused::HopperGemmAct;
  struct Shape {
    const char* what;
    int64_t M, K, N;
    A act;
    bool gated = false;  // N is Y's width; B has 2N columns (gate, then up)
  };
  const Shape shapes[] = {
      {"BERT QKV 1x128", 128, 768, 2304, A::None},
      {"BERT out-proj 1x128", 128, 768, 768, A::None},
      {"BERT FFN1+erf-GELU 1x128", 128, 768, 3072, A::GeluErf},
      {"BERT FFN2 1x128", 128, 3072, 768, A::None},
      {"Llama QKV 1x128", 128, 2048, 3072, A::None},
      {"Llama o-proj 1x128", 128, 2048, 2048, A::None},
      {"Llama down 1x128", 128, 8192, 2048, A::None},
      {"Llama gate/up 1x128", 128, 2048, 8192, A::Silu, true},
      {"BERT QKV 1x64", 64, 768, 2304, A::None},
  };
  std::printf("\nBENCH %-26s %-16s %10s %10s %10s %8s %6s\n", "what", "MxKxN", "cuBLASLt", "splitk pre", "splitk post",
              "best x", "splits");
  for (const Shape& sh : shapes) {
    if (!cuda_bench::section_on(sh.what)) continue;
    cuda_bench::DeviceBuffers mem;
    const int64_t nb = sh.gated ? 2 * sh.N : sh.N;  // B's columns
    const int64_t wbytes = sh.K * nb * 2;
    const int wsets = int(std::max<int64_t>(cuda_bench::kSets, (160ll << 20) / wbytes + 1));
    std::vector<void*> a, y, w;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(sh.M * sh.K));
      y.push_back(mem.alloc(sh.M * nb * 2));
    }
    for (int k = 0; k < wsets; ++k) w.push_back(mem.random_half(sh.K * nb, -0.05f, 0.05f));
    void* bias = mem.random_half(nb);
    void* gated_y = mem.alloc(sh.M * sh.N * 2);
    void* ws = mem.alloc(32 << 20);
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(sh.M, sh.K, nb);
    d.bias = bias;
    d.epilogue = cuda_fused::GemmEpilogue::Bias;
    std::vector<std::function<double()>> timers;
    timers.push_back([&] {
      return cuda_bench::graph_us(s, [&](int i) {
        cuda_fused::gemm(d, a[i % cuda_bench::kSets], w[i % wsets], y[i % cuda_bench::kSets], s, scratch);
        if (sh.act == A::GeluErf)
          cuda_fused::launch_bias_gelu_erf(DType::Float16, y[i % cuda_bench::kSets], nullptr, sh.M, sh.N, s);
        if (sh.gated)
          cuda_fused::launch_gated_activation(DType::Float16, cuda_fused::GateActivation::Silu, y[i % cuda_bench::kSets],
                                              gated_y, sh.M, sh.N, s);
      });
    });
    for (int pre = 1; pre >= 0; --pre)
      timers.push_back([&, pre] {
        return cuda_bench::graph_us(s, [&](int i) {
          cuda_fused::SplitKGemm g;
          g.g.a = a[i % cuda_bench::kSets];
          g.g.b = w[i % wsets];
          g.g.bias = bias;
          g.g.y = y[i % cuda_bench::kSets];
          g.g.M = sh.M;
          g.g.N = sh.N;
          g.g.K = sh.K;
          g.g.act = sh.act;
          g.g.gated = sh.gated;
          g.b_const = pre != 0;
          REQUIRE(cuda_fused::launch_gemm_splitk(g, s));
        });
      });
    const std::vector<double> med = cuda_bench::interleaved(timers);
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)sh.M, (long long)sh.K, (long long)sh.N);
    const double best = std::min(med[1], med[2]);
    std::printf("BENCH %-26s %-16s %10.2f %10.2f %10.2f %8.2f %6d\n", sh.what, dims, med[0], med[1], med[2],
                med[0] / best, cuda_fused::splitk_gemm_last_splits());
    std::printf("BENCH %-26s weights %.1f MB: cuBLASLt %.2f TB/s, split-K %.2f TB/s\n", "", wbytes / 1e6,
                wbytes / (med[0] * 1e-6) / 1e12, wbytes / (best * 1e-6) / 1e12);
  }
  cudaStreamDestroy(s);
}
