// Shared by the attention kernels (nvcc only): mask and bias element reads,
// and the tensor-core path's entry points.
#pragma once
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt::cuda_fused {

// Key-padding mask element: nonzero keeps the key. HF passes int64; bool,
// int32 and float masks are accepted too.
__device__ __forceinline__ bool mask_keep(const void* mask, DType dt, int64_t idx) {
  switch (dt) {
    case DType::Int64: return static_cast<const int64_t*>(mask)[idx] != 0;
    case DType::Int32: return static_cast<const int32_t*>(mask)[idx] != 0;
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return static_cast<const uint8_t*>(mask)[idx] != 0;
    case DType::Float: return static_cast<const float*>(mask)[idx] != 0.f;
    case DType::Double: return static_cast<const double*>(mask)[idx] != 0.0;
    case DType::Float16: return __half2float(static_cast<const __half*>(mask)[idx]) != 0.f;
    case DType::BFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(mask)[idx]) != 0.f;
    default: return true;
  }
}

// The same test split in two, for kernels that issue the mask read with their K/V loads and
// use it a pass later: mask_load_raw only loads (its bits, zero-extended; no comparison, so
// no wait on the load where it is issued), mask_raw_keep compares where the bit is used.
// mask_raw_keep(1, dt) is true for every dt (the value for "no mask").
__device__ __forceinline__ uint64_t mask_load_raw(const void* mask, DType dt, int64_t idx) {
  switch (dt) {
    case DType::Int64: return static_cast<uint64_t>(static_cast<const int64_t*>(mask)[idx]);
    case DType::Int32: return static_cast<uint32_t>(static_cast<const int32_t*>(mask)[idx]);
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return static_cast<const uint8_t*>(mask)[idx];
    case DType::Float: return static_cast<const uint32_t*>(mask)[idx];
    case DType::Double: return static_cast<const uint64_t*>(mask)[idx];
    case DType::Float16:
    case DType::BFloat16: return static_cast<const uint16_t*>(mask)[idx];
    default: return 1;
  }
}
// Non-zero as mask_keep reads it: a float is kept unless it is +0 or -0 (NaN is kept).
__device__ __forceinline__ bool mask_raw_keep(uint64_t raw, DType dt) {
  switch (dt) {
    case DType::Float: return (raw & 0x7fffffffu) != 0;
    case DType::Double: return (raw & 0x7fffffffffffffffull) != 0;
    case DType::Float16:
    case DType::BFloat16: return (raw & 0x7fffu) != 0;
    default: return raw != 0;
  }
}

// s + an fp16 bias element. fp16's lowest finite value (-65504) or -inf absorbs the score, as
// float32's lowest does in fp32 arithmetic: a model exported in fp32 adds finfo(float32).min to
// mask (Hugging Face), the conversion to fp16 clamps that constant to -65504, and in fp32 the
// kernel's s - 65504 would keep s. A fully masked row must be uniform, as in fp32 (where
// s + finfo.min == finfo.min), not softmax(s) (issue 13 item 4; docs/fused_ops.md, Attention).
__device__ __forceinline__ float add_half_bias(float s, float bias) { return bias <= -65504.f ? bias : s + bias; }

// Adds the attention bias to score s, or for a Bool bias replaces s by
// mask_filter_value where the bias is false.
__device__ __forceinline__ float apply_bias(const AttentionArgs& a, float s, int b, int h, int i, int j) {
  int64_t idx = b * a.bias_sb + h * a.bias_sh + i * a.bias_si + j * a.bias_sj;
  switch (a.bias_dtype) {
    case DType::Bool: return static_cast<const uint8_t*>(a.bias)[idx] ? s : a.mask_filter_value;
    case DType::Float16: return add_half_bias(s, __half2float(static_cast<const __half*>(a.bias)[idx]));
    case DType::BFloat16: return s + __bfloat162float(static_cast<const __nv_bfloat16*>(a.bias)[idx]);
    default: return s + static_cast<const float*>(a.bias)[idx];
  }
}

// Tensor-core kernel (fused_attention_mma.cu): fp16/bf16, head dim 64 or 128.
bool attention_mma_supported(const AttentionArgs& a);
void launch_attention_mma(const AttentionArgs& a, cudaStream_t stream);

// Attention sinks (AttentionArgs::sinks): the head's sink logit joins a row whose running max
// is m and sum l (both relative to m; m = -inf: nothing visible, l = 0) after the last key
// tile. Updates l to the sum relative to max(m, sink) and returns the factor the row's
// output accumulator (relative to m) takes: O / l then is the sink-normalised output.
__device__ __forceinline__ float join_sink(float m, float sink, float& l) {
  const float mf = fmaxf(m, sink);
  if (mf == -INFINITY) return 1.f;  // no sink (-inf) and no visible key: unchanged (NaN or 0 as before)
  const float c = __expf(m - mf);    // m = -inf: 0 (the row's mass is all the sink's)
  l = l * c + __expf(sink - mf);
  return c;
}

}  // namespace fuseopt::cuda_fused
