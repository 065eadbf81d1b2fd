// Shared harness of the hidden CUDA micro-benchmarks (`bin/bench_kernels
// "[.bench]"`): device buffers with random fp16 data, a median-of-100
// CUDA-event timer with 20 warm-ups and an index for input rotation, and a
// per-call time from CUDA-graph replays.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "ir/tensor.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "support/cuda_kernel_check.h"

namespace fuseopt::cuda_bench {

// The cuBLASLt baselines' descriptor: an fp16 M x K x N GEMM (B [K, N], no batch, no epilogue).
inline cuda_fused::GemmDesc fp16_gemm(int64_t M, int64_t K, int64_t N) {
  cuda_fused::GemmDesc d;
  d.dtype = DType::Float16;
  d.M = M;
  d.K = K;
  d.N = N;
  return d;
}

// Input sets rotated through so L2 (60 MB) does not hold them between repetitions.
constexpr int kSets = 4;

// FUSEOPT_BENCH_ONLY=<substring> limits a run to the matching sections (for ncu).
inline bool section_on(const char* name) {
  const char* only = std::getenv("FUSEOPT_BENCH_ONLY");
  return !only || !*only || std::strstr(name, only) != nullptr;
}

struct DeviceBuffers {
  std::vector<void*> ptrs;
  DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  void* alloc(int64_t bytes) {
    void* p = nullptr;
    cuda_check::ck(cudaMalloc(&p, static_cast<size_t>(bytes)), "cudaMalloc");
    ptrs.push_back(p);
    return p;
  }
  // Random fp16 data in [lo, hi).
  void* random_half(int64_t n, float lo = -1.f, float hi = 1.f) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& x : h) x = float_to_half(u(cuda_check::rng()));
    void* p = alloc(n * 2);
    cuda_check::upload_bytes(p, h.data(), h.size() * 2);
    return p;
  }
};

// Median time in µs of fn(i) (i = repetition index, for input rotation).
inline double time_us(cudaStream_t s, const std::function<void(int)>& fn) {
  for (int i = 0; i < 20; ++i) fn(i);
  cuda_check::ck(cudaStreamSynchronize(s), "warm-up");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int i = 0; i < 100; ++i) {
    cudaEventRecord(e0, s);
    fn(i);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cuda_check::ck(cudaGetLastError(), "benchmark");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0;
}

// µs per call of fn(i) the way a captured model sees it (the gaps between
// kernels included, PDL edges where the launches ask for them): a CUDA graph
// of `calls` back-to-back calls, replayed `replays` times after two warm-up
// replays, median replay divided by `calls`. One eager pass first (algorithm
// choice, function attributes).
inline double graph_us(cudaStream_t s, const std::function<void(int)>& fn, int calls = 24, int replays = 15) {
  for (int i = 0; i < calls; ++i) fn(i);
  cuda_check::ck(cudaStreamSynchronize(s), "warm-up");
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  cuda_check::ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < calls; ++i) fn(i);
  cuda_check::ck(cudaStreamEndCapture(s, &g), "end capture");
  cuda_check::ck(cudaGraphInstantiate(&e, g, 0), "instantiate");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ms;
  for (int r = 0; r < replays + 2; ++r) {
    cudaEventRecord(e0, s);
    cudaGraphLaunch(e, s);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (r >= 2) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cuda_check::ck(cudaGetLastError(), "benchmark");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1000.0 / calls;
}

// Several measurements (each a whole one: its settings, then graph_us) in interleaved rounds,
// 0, 1, ..., 0, 1, ...: each one's median over the rounds. On the H100s a long GEMM's time drifts
// by up to ±10 % between back-to-back measurements (clock and power; NOTES-perf.md v44), so an
// A/B that times one side after the other can come out inverted. FUSEOPT_BENCH_ROUNDS overrides
// the rounds.
inline std::vector<double> interleaved(const std::vector<std::function<double()>>& timers, int rounds = 3) {
  if (const char* e = std::getenv("FUSEOPT_BENCH_ROUNDS"); e && std::atoi(e) > 0) rounds = std::atoi(e);
  std::vector<std::vector<double>> t(timers.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < timers.size(); ++i) t[i].push_back(timers[i]());
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

}  // namespace fuseopt::cuda_bench
