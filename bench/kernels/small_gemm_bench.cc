// Micro-benchmark (hidden: `bin/bench_kernels "[.bench][small_gemm]"`; never
// decides pass/fail): the small-M GEMM of kernels/cuda/gemm_gelu.cu against
// cuBLASLt (+ the erf-GELU pass where the activation needs it) at the batch-1
// BERT/GPT-2 layer shapes. Each figure is one replay of a CUDA graph of 24
// back-to-back calls divided by 24 (median of 15 replays), so it includes the
// gaps between kernels the way a captured model sees them, with PDL on for
// our kernels when the device has it; weights rotate over 16 sets (> L2),
// as 12 layers' weights do in the model. Figures go to NOTES-perf.md v8.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_gelu.h"
#include "cuda_bench.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

constexpr int kWeightSets = 16;

using cuda_bench::graph_us;

}  // namespace

TEST_CASE("cuda small-M GEMM vs cuBLASLt benchmark", "[.bench][small_gemm]") {
  if (!cuda_check::gpu_ready()) return;
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cuda_fused::set_small_gemm(1);
  struct Shape {
    const char* what;
    int64_t M, K, N;
    cuda_fused::SmallGemmAct act;
  };
  using A = cuda_fused::SmallGemmAct;
  const Shape shapes[] = {
      {"BERT QKV 1x128", 128, 768, 2304, A::None},
      {"BERT out-proj 1x128", 128, 768, 768, A::None},
      {"BERT FFN1+erf-GELU 1x128", 128, 768, 3072, A::GeluErf},
      {"BERT FFN2 1x128 (split-K)", 128, 3072, 768, A::None},
      {"GPT-2 FFN1+tanh-GELU 1x128", 128, 768, 3072, A::GeluTanh},
      {"ViT FFN1+erf-GELU 1x197", 197, 768, 3072, A::GeluErf},
      {"BERT QKV 4x128", 512, 768, 2304, A::None},
  };
  std::printf("\nBENCH %-30s %-16s %12s %12s %8s\n", "what", "MxKxN", "cuBLASLt us", "ours us", "ratio");
  for (const Shape& sh : shapes) {
    cuda_bench::DeviceBuffers mem;
    std::vector<void*> a, w, y;
    for (int k = 0; k < cuda_bench::kSets; ++k) {
      a.push_back(mem.random_half(sh.M * sh.K));
      y.push_back(mem.alloc(sh.M * sh.N * 2));
    }
    for (int k = 0; k < kWeightSets; ++k) w.push_back(mem.random_half(sh.K * sh.N, -0.05f, 0.05f));
    void* bias = mem.random_half(sh.N);
    void* ws = mem.alloc(32 << 20);
    const size_t pws = cuda_fused::small_gemm_workspace(DType::Float16, sh.M, sh.N, sh.K);
    void* partial = pws ? mem.alloc(int64_t(pws)) : nullptr;
    auto scratch = [ws](size_t) { return ws; };
    cuda_fused::GemmDesc d = cuda_bench::fp16_gemm(sh.M, sh.K, sh.N);
    d.bias = bias;
    d.epilogue = sh.act == A::GeluTanh ? cuda_fused::GemmEpilogue::GeluTanhBias : cuda_fused::GemmEpilogue::Bias;
    const double lt = graph_us(s, [&](int i) {
      const int k = i % cuda_bench::kSets;
      cuda_fused::gemm(d, a[k], w[i % kWeightSets], y[k], s, scratch);
      if (sh.act == A::GeluErf) cuda_fused::launch_bias_gelu_erf(DType::Float16, y[k], nullptr, sh.M, sh.N, s);
    });
    const double ours = graph_us(s, [&](int i) {
      const int k = i % cuda_bench::kSets;
      REQUIRE(cuda_fused::launch_small_gemm(DType::Float16, sh.act, a[k], w[i % kWeightSets], bias, y[k], sh.M,
                                            sh.N, sh.K, s, partial));
    });
    char dims[32];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", (long long)sh.M, (long long)sh.K, (long long)sh.N);
    std::printf("BENCH %-30s %-16s %12.2f %12.2f %8.2f\n", sh.what, dims, lt, ours, lt / ours);
  }
  cuda_fused::set_small_gemm(-1);
  cudaStreamDestroy(s);
}
