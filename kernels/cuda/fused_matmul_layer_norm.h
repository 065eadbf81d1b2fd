// The row half of fuseopt.FusedMatMulLayerNorm on CUDA (the GEMM half is
// cuda_fused::gemm with its bias epilogue): one kernel reads each row of the
// GEMM output h once and writes Y = LayerNorm(gelu(h)) · gamma (+ beta).
// Includable from .cc files (no nvcc needed); tests call it directly.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

enum class LnGelu { Erf = 0, Tanh = 1 };

// h, gamma, beta (optional), y: [rows, D] / [D] in `dtype` (float / float16 /
// bfloat16). GELU and the statistics in fp32 (two-pass: the mean, then the
// centred variance, from the row held on chip), one rounding to `dtype` at the
// end. When D is a multiple of 16 / sizeof(T) and every pointer is 16-byte
// aligned, rows are read as 16-byte vectors: one warp per row, the row in
// registers, up to D = 1024; one block per row, the row in shared memory,
// beyond. Other D take the scalar block kernel. D at most 51200.
struct GeluLayerNormArgs {
  DType dtype = DType::Float;
  int64_t rows = 0, D = 0;
  const void* h = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;
  void* y = nullptr;
  float eps = 1e-5f;
  LnGelu gelu = LnGelu::Erf;
};
void launch_gelu_layer_norm(const GeluLayerNormArgs& a, cudaStream_t stream);

// Which kernel launch_gelu_layer_norm takes for these arguments ("warp",
// "block_vec", "block_scalar"): for tests that must cover each path.
const char* gelu_layer_norm_kernel_name(const GeluLayerNormArgs& a);

// The residual form on Hopper (sm_90a; fused_matmul_layer_norm_hopper.cu): Y = LayerNorm(alpha ·
// A·B + bias + skip) · gamma (+ beta) in one kernel, the GEMM's row of tiles split over a
// thread-block cluster that exchanges row statistics through distributed shared memory.
// A [M, K], B [K, N] or [N, K] (b_nk), skip and Y [M, N], bias/gamma/beta [N]; fp16/bf16.
struct HopperGemmLayerNorm {
  DType dt = DType::Float16;
  const void* a = nullptr;
  const void* b = nullptr;
  bool b_nk = false;
  const void* bias = nullptr;  // optional
  const void* skip = nullptr;
  const void* gamma = nullptr;
  const void* beta = nullptr;  // optional
  void* y = nullptr;
  int64_t M = 0, N = 0, K = 0;
  float alpha = 1.f, eps = 1e-5f;
};
// Whether the kernel runs these arguments on this device: fp16/bf16; K > 0 and a multiple of 8;
// N = CLN · BN for a tile width BN of 128, 192 or 256 and CLN of 2, 3, 4, 6 or 8 (768, 1024,
// 512, 2048, ...); A, B, skip, Y 16-byte aligned, bias/gamma/beta 4-byte; the sm_90a image loaded.
bool gemm_layer_norm_hopper_fits(const HopperGemmLayerNorm& g, cudaStream_t stream);
// Whether the runtime should take it: only with FUSEOPT_GEMM_LN_HOPPER=1 (then whenever it fits);
// unset or 0 never, since it measured slower than cuBLASLt's GEMM + the SkipLayerNorm kernel
// (NOTES-perf.md v39). set_gemm_layer_norm_hopper(0 | 1) sets the same for tests, -1 back to the
// environment.
bool gemm_layer_norm_hopper_wanted(const HopperGemmLayerNorm& g);
// Launches and returns true, or returns false having launched nothing.
bool launch_gemm_layer_norm_hopper(const HopperGemmLayerNorm& g, cudaStream_t stream);
void set_gemm_layer_norm_hopper(int mode);
// A/B runs and tests: the tile width (128, 192 or 256 where it divides N into 2-8 slices; 0 = by
// shape and the clusters the device holds).
void set_gemm_layer_norm_hopper_tile_n(int n);
long long gemm_layer_norm_hopper_launch_count();
// The last launch's configuration (benchmarks print it): tile width, blocks a cluster, clusters
// the device holds at once for that kernel, blocks launched.
struct GemmLayerNormLaunch {
  int bn = 0, cln = 0, resident_clusters = 0, grid = 0;
};
GemmLayerNormLaunch gemm_layer_norm_hopper_last_launch();

}  // namespace fuseopt::cuda_fused
