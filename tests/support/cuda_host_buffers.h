// Raw device buffers, a non-blocking stream and host<->device copies of float
// values stored as fp32, fp16 or bf16, for the CUDA tests that call launch
// functions directly (not through a KernelContext): tests/kernels/cuda_gemm_tune_test.cc,
// cuda_norm_warp_test.cc, cuda_gemm_hopper_test.cc.
#pragma once
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ir/tensor.h"
#include "support/cuda_kernel_check.h"

namespace fuseopt::cuda_check {

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { ck(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// A non-blocking stream, as the runtime uses (PDL is not used on the legacy default stream).
struct TestStream {
  cudaStream_t s = nullptr;
  TestStream() { ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream"); }
  ~TestStream() { cudaStreamDestroy(s); }
  TestStream(const TestStream&) = delete;
  TestStream& operator=(const TestStream&) = delete;
};

// Uniform on [lo, hi), rounded to `dt` (Float, Float16 or BFloat16) so a host
// reference sees exactly what the GPU reads.
inline std::vector<float> random_values(DType dt, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_to(dt, u(rng()));
  return v;
}

inline void upload(DType dt, void* dst, const std::vector<float>& v) {
  if (dt == DType::Float) {
    upload_bytes(dst, v.data(), v.size() * 4);
    return;
  }
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = dt == DType::BFloat16 ? float_to_bf16(v[i]) : float_to_half(v[i]);
  upload_bytes(dst, h.data(), h.size() * 2);
}

inline std::vector<float> download(DType dt, const void* src, size_t n) {
  std::vector<float> v(n);
  if (dt == DType::Float) {
    ck(cudaMemcpy(v.data(), src, n * 4, cudaMemcpyDeviceToHost), "download");
    return v;
  }
  std::vector<uint16_t> h(n);
  ck(cudaMemcpy(h.data(), src, n * 2, cudaMemcpyDeviceToHost), "download");
  for (size_t i = 0; i < n; ++i) v[i] = dt == DType::BFloat16 ? bf16_to_float(h[i]) : half_to_float(h[i]);
  return v;
}

// Every value NaN: an output left as the poison (a refused launch wrote nothing).
inline bool all_nan(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isnan(x)) return false;
  return true;
}

// ‖got − want‖ / ‖want‖; NaN anywhere (an unwritten element) gives infinity.
inline double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

}  // namespace fuseopt::cuda_check
