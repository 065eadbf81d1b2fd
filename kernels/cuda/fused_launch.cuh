// Launchers of the fused-op CUDA kernels (H6b). Plain host functions with
// device pointers, so the registered kernels, other CUDA kernels (ONNX
// LayerNormalization may reuse launch_norm) and tests all call the same code.
// Nothing here needs nvcc: the header is includable from .cc files.
#pragma once
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

constexpr int kMaxBroadcastRank = 8;

// Y = max(A + B, 0). Same-shape operands take a vectorised path; otherwise
// out_dims/a_strides/b_strides (elements, 0 on broadcast axes) describe it.
struct BroadcastShape {
  int rank = 0;
  int64_t out_dims[kMaxBroadcastRank] = {};
  int64_t a_strides[kMaxBroadcastRank] = {};
  int64_t b_strides[kMaxBroadcastRank] = {};
};
void launch_add_relu(DType dt, const void* a, const void* b, void* y, int64_t n, const BroadcastShape* bcast,
                     cudaStream_t stream);

// In place y[i] += r[i] over n elements, fp32 add and one rounding: FusedMatMul's residual where
// the GEMM that ran has no epilogue for it (kernels/cuda/gemm_kernels.cc).
void launch_add_in_place(DType dt, void* y, const void* r, int64_t n, cudaStream_t stream);

// In place: y[r, j] = gelu_erf(y[r, j] + bias[j]) for a [rows, n] matrix
// (bias may be null). Used after a GEMM whose epilogue cannot do erf-GELU.
void launch_bias_gelu_erf(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream);
// The same with tanh (cuBLASLt has no tanh epilogue): y[r, j] = tanh(y[r, j] + bias[j]).
void launch_bias_tanh(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream);
// The same with squared ReLU (Nemotron, Persimmon; no cuBLASLt epilogue squares):
// y[r, j] = r * r with r = max(y[r, j] + bias[j], 0).
void launch_bias_relu2(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream);
// CLIP's QuickGELU y * sigmoid(1.702 y) and SiLU y * sigmoid(y), in place (after a GEMM's bias epilogue).
void launch_bias_quick_gelu(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream);
void launch_bias_silu(DType dt, void* y, const void* bias, int64_t rows, int64_t n, cudaStream_t stream);

// y[M, N] = c broadcast from [cm, cn] (cm in {1, M}, cn in {1, N}): Gemm's C.
void launch_broadcast_2d(DType dt, const void* c, int64_t cm, int64_t cn, void* y, int64_t M, int64_t N,
                         cudaStream_t stream);

// LayerNorm / RMSNorm / SkipLayerNorm over the last axis of x [rows, D]:
//   z = (x + bias) + skip[row % skip_rows] (bias, skip optional); sum = z (optional);
//   y = (z - mean) * rsqrt(var + eps) * gamma (+ beta)   or, rms:
//   y = z * rsqrt(mean(z²) + eps) * gamma.
// Statistics in fp32. mean/inv_std (fp32, [rows], optional) are ONNX
// LayerNormalization's extra outputs (for rms, mean is 0).
struct NormArgs {
  DType dtype = DType::Float;
  int64_t rows = 0, D = 0;
  const void* x = nullptr;
  const void* skip = nullptr;
  int64_t skip_rows = 0;  // rows of skip; x row r reads skip row r % skip_rows
  const void* bias = nullptr;
  const void* gamma = nullptr;  // none: 1
  const void* beta = nullptr;
  void* y = nullptr;
  void* sum = nullptr;
  float* mean = nullptr;
  float* inv_std = nullptr;
  float eps = 1e-5f;
  bool rms = false;
  // y is fp32 while dtype is float16/bfloat16: a graph output the caller takes as float, written
  // once in its delivered dtype instead of in dtype and converted after the run.
  bool y_fp32 = false;
};
void launch_norm(const NormArgs& a, cudaStream_t stream);

// Attention, flash style: per (batch, head, query tile) the key axis is swept
// in tiles with an online softmax; scores never reach device memory.
// Q/K/V are addressed as base + b*batch_stride + s*seq_stride + head*head_stride
// (head_stride 0 = D: heads side by side in a row), which covers packed QKV
// [B,S,(H+2Hkv)·Dh] (three offsets into one buffer), separate [B,S,H·Dh] tensors and,
// for K/V, a KV cache's present [B,Hkv,S,D] read in place (seq_stride D, head_stride S·D).
// Y is [B, Sq, H·Dv] (Dv = Dh when packed).
// Semantics follow kernels/cpu/fused_attention.cc exactly:
//   s = scale·q·k (+ float bias); bool bias false or mask 0 -> s = mask_filter_value;
//   causal: key j visible to query i iff j <= i + Skv - Sq, else s = -inf.
// A row whose every score is -inf gives NaN (as Softmax does), or 0 with masked_rows_zero.
struct AttentionArgs {
  DType dtype = DType::Float;
  int B = 0, H = 0, Hkv = 0, Sq = 0, Skv = 0, Dh = 0, Dv = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t q_batch_stride = 0, q_seq_stride = 0;
  int64_t k_batch_stride = 0, k_seq_stride = 0;
  int64_t v_batch_stride = 0, v_seq_stride = 0;
  int64_t k_head_stride = 0, v_head_stride = 0;  // 0 = Dh / Dv (see with_head_strides)
  void* y = nullptr;
  // Key-padding mask [B, Skv] (nonzero = keep) of mask_dtype, or null.
  const void* mask = nullptr;
  DType mask_dtype = DType::Int64;
  float mask_filter_value = -INFINITY;
  // [B] on the device, from launch_mask_prefix: n when the mask's row b keeps keys [0, n) and
  // masks the rest (n >= 1), else -1; null = not computed. The Hopper kernel runs such a batch
  // as the unmasked attention over its first n keys where that is exact (mask_prefix_exact);
  // the other kernels read the mask itself.
  const int* mask_prefix = nullptr;
  // Bias element (b,h,i,j) at b*sb + h*sh + i*si + j*sj (0 strides broadcast);
  // float types are added, Bool keeps where true.
  const void* bias = nullptr;
  DType bias_dtype = DType::Float;
  int64_t bias_sb = 0, bias_sh = 0, bias_si = 0, bias_sj = 0;
  float scale = 1.f;
  bool causal = false;
  // A row with no score above -inf (no visible key) writes 0 instead of NaN: torch SDPA's
  // Where(IsNaN(P), 0, P) folded into the op; the kernels test m == -inf at the 1/l step.
  bool masked_rows_zero = false;
  // Logit soft-capping (Gemma-2): s = softcap·tanh(scale·q·k / softcap) before bias and
  // masks; 0 = none. Only the generic kernel implements it (launch_attention routes there).
  float softcap = 0.f;
  // Sliding window (Mistral, Gemma-2, StarCoder2): key j is hidden (-inf, as causal) from
  // query i when i + Skv - Sq - j >= window; 0 = none. launch_attention drops a window that
  // hides nothing at these lengths (Skv <= window) and sends the others to the mma.sync
  // kernel (or the generic one where that does not apply); the Hopper kernel has none.
  int window = 0;
  // Attention sinks (GPT-OSS): one fp32 logit per query head ([H], device memory) that joins
  // each row's softmax and takes no value: at the end of the sweep m' = max(m, sink),
  // l' = l·e^(m - m') + e^(sink - m'), O rescaled by e^(m - m') (a row with no visible key
  // gives 0). The generic and mma.sync kernels take it; launch_attention keeps such calls off
  // the Hopper kernel, and the runtime off the decode kernels. Null = none.
  const float* sinks = nullptr;
};
void launch_attention(const AttentionArgs& a, cudaStream_t stream);

// AttentionArgs::mask_prefix from a [B, Skv] key-padding mask (fused_attention_mask_prefix.cu).
void launch_mask_prefix(const void* mask, DType mask_dtype, int B, int Skv, int* out, cudaStream_t stream);

// Whether a batch whose mask is a prefix of n kept keys may run as the unmasked attention over
// those n keys: the contract gives its masked keys the score mask_filter_value, and they may be
// left out when their weight exp(fill - max) is 0 — for -inf, and for a fill of -1e4 or below
// (finfo.min, -10000) whenever a row's largest visible score exceeds fill + 88 (ex2 of a
// smaller argument flushes to 0 in fp32: every real model's scores).
inline bool mask_prefix_exact(float mask_filter_value) { return mask_filter_value <= -1e4f; }

// The arguments with the K/V head strides made explicit (0 -> Dh / Dv), so that every
// kernel reads one stride whatever the caller (runtime, tests, benchmarks) filled in.
inline AttentionArgs with_head_strides(AttentionArgs a) {
  if (a.k_head_stride == 0) a.k_head_stride = a.Dh;
  if (a.v_head_stride == 0) a.v_head_stride = a.Dv;
  return a;
}

// Which attention kernel launch_attention picks for these arguments
// ("mma" = tensor cores, "generic" = fp32 SIMT); for tests and the profile.
const char* attention_kernel_name(const AttentionArgs& a);

// Tuning knob of the tensor-core kernel: 16-row m-tiles per warp (1 or 2)
// for head dim 64 and 128 (defaults 1 and 2). Not thread-safe; for
// benchmarks and tests.
void attention_set_m_tiles(int mt_d64, int mt_d128);

}  // namespace fuseopt::cuda_fused
