// Shared by the split-KV decode kernels (fused_attention_decode.cu: the one-launch kernel and the
// host side; fused_attention_decode_two_pass.cu: the split / merge pair and the scalar fallback).
// nvcc only.
#pragma once
#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_common.h"

namespace fuseopt::cuda_fused::decode {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kChunk = 256;     // keys per block at most (scores live in shared memory)
constexpr int kMinChunk = 32;   // fewer keys per block only cost merge work
constexpr int kMaxGD = 1024;    // GB · max(Dh, Dv): bounds shared memory and accumulators
constexpr int kMaxD = 256;

struct DecodeArgs {
  const void* q;
  int64_t q_batch_stride;
  const void* k;  // [B, Hkv, St, Dh]
  const void* v;  // [B, Hkv, St, Dv]
  const void* mask;
  DType mask_dtype;
  float* partial;  // [B, H, splits, Dv + 2]: acc[Dv], max, sum
  unsigned* arrived;  // decode_fused: [B, H / gb] blocks done per (batch, head group), zero at launch
  void* y;         // [B, 1, H·Dv]
  int H, Hkv, St, Dh, Dv, splits, chunk, gb;  // gb: query heads per block
  int64_t kv_rows;                             // rows per (b, h) in K/V memory (St, or a held cache's capacity)
  int tpk;                                     // decode_fused: threads per key row
  float scale, fill;
  bool rows_zero;
};

__device__ __forceinline__ int pow2_at_least(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

template <class T, int VEC>
__device__ __forceinline__ void load_vec(float (&out)[VEC], const T* p) {
  const Vec<T, VEC> w = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
  for (int e = 0; e < VEC; ++e) out[e] = to_f(w.v[e]);
}

// The two-pass kernels (fused_attention_decode_two_pass.cu): decode_split (16-byte loads, a.gb query
// heads per block) or decode_split_scalar (vec false, a.gb 1), then decode_merge; a.splits, a.chunk
// and a.gb come from the caller's plan.
void launch_two_pass(DType dt, const DecodeArgs& a, bool vec, int B, cudaStream_t stream);

}  // namespace fuseopt::cuda_fused::decode
