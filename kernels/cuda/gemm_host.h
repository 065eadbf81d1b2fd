// The host layer of the GEMM-based CUDA kernels (gemm_kernels.cc: MatMul,
// Gemm; fused_matmul.cc: fuseopt.FusedMatMul; fused_layer_norm_linear.cc:
// fuseopt.LayerNormLinear), all through one cuBLASLt GEMM (bias and ReLU /
// tanh-GELU in its epilogue), except M <= 8 rows (decode), which go to the
// weight-streaming kernel of gemm_small_m.cu first (try_gemv).
//
// tanh (activation = "tanh", BERT's pooler) and squared ReLU ("relu2",
// Nemotron's and Persimmon's MLP): cuBLASLt has no such epilogue, so the GEMM
// runs with the BIAS epilogue and one elementwise pass applies the activation
// in place (gemm_gelu.cu's small-M kernel is not used for them; the M <= 8 one
// of gemm_small_m.cu has both in its epilogue, and the opt-in Hopper GEMM
// squares in its epilogue).
// erf-GELU (activation = "gelu"): cuBLASLt only has the tanh form, and the
// runtime has no "approximate GELU" switch yet, so the GEMM runs with the BIAS
// epilogue and one fused elementwise kernel applies erf-GELU in place; or,
// for small M with FUSEOPT_GEMM_GELU=1, one kernel does GEMM + bias + erf-GELU
// (gemm_gelu.cu: one launch fewer per FFN, NOTES-perf.md v8). With
// FUSEOPT_SMALL_GEMM=1 that kernel takes every small-M GEMM it handles.
// With FUSEOPT_HOPPER_GEMM=1 (opt-in), erf-GELU GEMMs of 1024 rows or more on Hopper run
// our own wgmma GEMM with the GELU in its epilogue (gemm_hopper.cu, try_hopper_gemm).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_small_m.h"
#include "runtime/kernel.h"

namespace fuseopt::cuda_gemm {

// The fused ops' `activation` attribute.
enum class Act { None, Relu, Gelu, GeluTanh, Tanh, Relu2, QuickGelu, Silu };
// Activations only the pass after the GEMM applies (no epilogue of any GEMM kernel here has them):
// the weight-streaming, small-M and Hopper kernels decline them, cuBLASLt runs with its bias epilogue.
inline bool pass_only(Act a) { return a == Act::QuickGelu || a == Act::Silu; }
Act parse_act(const Node& n);

// The activation as the weight-streaming kernels name it.
cuda_fused::GemvAct gemv_act(Act a);

// The weight-streaming kernel of gemm_small_m.cu for M <= 8 rows (a decode
// step), any B layout, any activation, alpha; FUSEOPT_GEMV=0 switches it off.
// Tried before everything else; false: nothing launched.
// b_const: B is a constant of the session (KernelContext::input_is_constant).
// residual: added after the activation (FusedMatMul's input 3, Y's layout), or null.
bool try_gemv(DType dt, Act act, const void* a, const void* b, const void* bias, void* y, int64_t M, int64_t N,
              int64_t K, bool trans_b, float alpha, cudaStream_t stream, bool b_const = false,
              const void* residual = nullptr);

// The small-M kernel of gemm_gelu.cu where it is switched on and applies
// (row-major B [K, N], alpha 1); false: nothing launched, use cuBLASLt.
// Split-K partials (large K) go to scratch, asked for only when needed.
bool try_small_gemm(KernelContext& ctx, DType dt, Act act, const void* a, const void* b, const void* bias, void* y,
                    int64_t M, int64_t N, int64_t K, cudaStream_t stream);

// The Hopper GEMM of gemm_hopper.cu where it is wanted (hopper_gemm_wanted: opt-in, for
// erf-GELU or squared ReLU with M >= 1024, whose cuBLASLt path needs a pass over Y
// afterwards) and fits (sm_90a, fp16/bf16, K and N multiples of 8); B [K, N] or, with
// trans_b, [N, K]; alpha 1. False: nothing launched.
bool try_hopper_gemm(DType dt, Act act, const void* a, const void* b, bool trans_b, const void* bias, void* y,
                     int64_t M, int64_t N, int64_t K, cudaStream_t stream);

// The epilogue doing bias + activation; erf-GELU, tanh and relu2 need a pass afterwards.
cuda_fused::GemmEpilogue epilogue_for(Act act, bool bias);

// The activations no cuBLASLt epilogue has, as one in-place pass over Y [rows, N]
// (the bias is already in, from the BIAS epilogue).
void apply_pass_activation(Act act, DType dt, void* y, int64_t rows, int64_t N, cudaStream_t stream);

// How many leading columns of Y [M, N] = A · B^T (B stored [N, K]) one GEMM
// computes into 16-byte aligned rows: N (no split), or N rounded down to 8
// where a 16-bit row of N elements is not a multiple of 16 bytes (BERT's
// vocabulary 30522, GPT-2's 50257). cuBLASLt has only 2-byte aligned sm80
// kernels for such rows: BERT-base MLM's tied decoder at 4096 x 30522 took
// 0.80 ms (240 TFLOP/s), GPT-2's LM head at 4096 x 50257 about 2.9 ms. The
// caller then writes Y by row phases (gemm_row_phases.h) where each phase has
// enough rows, else runs that GEMM and one for the < 8 columns left into padded
// scratch rows, and launch_pack_rows (gemm_pack.h) packs them into Y.
// FUSEOPT_GEMM_PAD_N=0 turns it off, =1 applies it at any size (tests); the
// default (=2) applies it where M x N >= 2^22.
int64_t aligned_columns(DType dt, int64_t M, int64_t N, int64_t K, bool trans_b);

cuda_fused::ScratchFn scratch_of(KernelContext& ctx);
bool use_tf32(const KernelContext& ctx);

// Y [M, N] = op(A) [M, K] · op(B) [K, N] with the activation's epilogue and the
// bias (or none), tf32 as the session's precision asks; alpha 1, one batch item.
cuda_fused::GemmDesc gemm_desc(const KernelContext& ctx, DType dt, int64_t M, int64_t N, int64_t K, bool trans_b,
                               Act act, const void* bias);

// MatMul semantics (numpy): A [..., M, K] or [K]; B [..., K, N] (or [..., N, K]
// with trans_b) or [K]; batch dims broadcast. Writes output 0.
// residual (FusedMatMul's input 3, or null): Y's element count and dtype, read in Y's row-major
// order and added after the activation. With activation none, cuBLASLt reads it as its C
// matrix (beta 1) and the decode GEMVs in their epilogue, so Y is written once; any other path
// adds it in place after the GEMM (one more pass over Y).
void run_matmul(KernelContext& ctx, const RtTensor* a, const RtTensor* b, bool trans_b, float alpha, Act act,
                const RtTensor* bias, const RtTensor* residual = nullptr);

// Optional input i: nullptr when omitted or past the node's inputs.
inline const RtTensor* opt_input(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

}  // namespace fuseopt::cuda_gemm
