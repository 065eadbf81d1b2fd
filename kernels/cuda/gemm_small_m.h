// Y [M, N] = act(alpha · A [M, K] · B + bias) for M <= 8 (a decode step's
// rows) in one weight-streaming launch (issue 11). cuBLASLt runs these GEMMs
// at 2-3x the time their weights take to read (Llama-1B's QKV, o-proj and
// down-proj at batch 1: split-K + a reduce launch); this kernel reads every
// weight byte once with 16-byte loads and reduces K inside the launch.
// Includable from .cc files (no nvcc needed).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ir/tensor.h"
#include "kernels/cuda/gated_matmul.h"

namespace fuseopt::cuda_fused {

enum class GemvAct { None, Relu, GeluErf, GeluTanh, Tanh, Relu2 };

constexpr int64_t kGemvMaxM = 8;

// A row-major [M, K]; B row-major [K, N] (ONNX MatMul weights) or, with
// trans_b, [N, K]; bias [N] or null; Y [M, N]; all of dtype dt. Launches and
// returns true when the kernel applies: the switch takes the shape (FUSEOPT_GEMV below),
// dt is Float16 or BFloat16, 1 <= M <= kGemvMaxM, K >= 1, N a multiple of 8
// (K too with trans_b), B, Y (and bias) 16-byte aligned, and the device has
// thread-block clusters (sm_90). Otherwise launches nothing and returns false
// (the caller runs cuBLASLt). fp32 accumulation, alpha, bias and the
// activation in fp32, one rounding; bit-identical from run to run.
// b_const: B is a constant no kernel of the run writes (KernelContext::input_is_constant), so
// the kernel may request it before its programmatic-launch wait (FUSEOPT_GEMV_PREFETCH).
// residual: FusedMatMul's input 3, a tensor of Y's layout added after the activation (fp32,
// before the one rounding), or null; 16-byte aligned like Y.
bool launch_gemm_small_m(DType dt, GemvAct act, const void* A, const void* B, const void* bias, void* Y, int64_t M,
                         int64_t N, int64_t K, bool trans_b, cudaStream_t stream, float alpha = 1.f,
                         bool b_const = false, const void* residual = nullptr);

// fuseopt.GatedMatMul's whole op for M <= 8: Y [M, N] = act(P[:, :N]) ·
// P[:, N:] with P = A [M, K] · W [K, 2N] + bias [2N] (or none), never stored:
// a block reads 32 gate columns and the 32 up columns they multiply. The same
// conditions as above (N a multiple of 8, W [K, 2N] row-major); act's math as
// gated_matmul.cu's pass.
bool launch_gated_small_m(DType dt, GateActivation act, const void* A, const void* W, const void* bias, void* Y,
                          int64_t M, int64_t N, int64_t K, cudaStream_t stream, bool b_const = false);

// FUSEOPT_GEMV: "0" off, "1" every shape the kernels handle, unset: where they
// measured faster than cuBLASLt (B [N, K] at M <= 2, and at M 3-8 on the tensor-core GEMV for
// weights up to 8 Mi elements, not the gated form; gemm_small_m.cu says why).
// set_gemm_small_m(1) / (0) force every shape / none, (-1) goes back to the
// environment's choice (tests, benchmarks).
bool gemm_small_m_enabled();
// Whether the switch (and, unset, the default's shapes) lets the kernels take M rows with B
// stored [N, K] (trans_b) or [K, N]; the fused [N, K] variants (gemv_nk_fused.h) ask it too.
// weight_elems: B's N · K, or -1 for a form the default never takes at rows 3-8 (the gated one).
bool gemm_small_m_applies(int64_t M, bool trans_b, int64_t weight_elems);
// Whether rows that the tensor-core GEMV declined may still run on the CUDA-core kernels: at
// 3-8 rows only when asked for (FUSEOPT_GEMV=1); by default they go to cuBLASLt, which is faster.
bool gemm_small_m_cuda_core_ok(int64_t M);
void set_gemm_small_m(int mode);

// Launches of either entry point so far in this process (tests: which path ran).
long long gemm_small_m_launch_count();

}  // namespace fuseopt::cuda_fused
