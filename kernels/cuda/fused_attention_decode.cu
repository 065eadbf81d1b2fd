// Split-KV ("flash-decoding") attention for one query token over a KV cache, the decode step of
// fuseopt.Attention with past/present (host side: fused_attention_kernel.cc, opt-in through
// FUSEOPT_FLASH_DECODE=1 until it has run on a GPU). Reads the present keys/values in their
// [B, Hkv, S_kv, D] layout directly, so no re-layout copy is needed.
//   pass 1: grid (splits, H, B); each block takes one query head and a chunk of keys, each warp
//           one key at a time (lanes over D), an online softmax per warp, then the block's
//           (max, sum, acc[Dv]) partial to scratch;
//   pass 2: grid (H, B); the partials are merged and Y[b, 0, h·Dv + d] written.
// Semantics as kernels/cpu/fused_attention.cc for S_q = 1 (causal keeps every key): a masked key
// scores mask_filter_value; a row whose every score is -inf gives NaN (0/0), as Softmax does.
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_common.cuh"
#include "util/error.h"

namespace fuseopt::cuda_fused {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxD = 256;
constexpr int kPer = kMaxD / 32;  // accumulators per lane

struct DecodeArgs {
  const void* q;
  int64_t q_batch_stride;
  const void* k;  // [B, Hkv, St, Dh]
  const void* v;  // [B, Hkv, St, Dv]
  const void* mask;
  DType mask_dtype;
  float* partial;  // [B, H, splits, Dv + 2]: acc[Dv], max, sum
  void* y;         // [B, 1, H·Dv]
  int H, Hkv, St, Dh, Dv, splits, chunk;
  float scale, fill;
};

template <class T> __device__ __forceinline__ float ld(const T* p, int64_t i) { return cuda::load_c<T>(p[i]); }

template <class T>
__global__ void __launch_bounds__(kWarps * 32) decode_partial(DecodeArgs a) {
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hk = h / (a.H / a.Hkv);
  __shared__ float qs[kMaxD];
  __shared__ float wm[kWarps], wl[kWarps];
  __shared__ float wacc[kWarps][kMaxD];
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h) * a.Dh;
  for (int d = threadIdx.x; d < a.Dh; d += blockDim.x) qs[d] = ld(q, d) * a.scale;
  __syncthreads();
  const T* kb = static_cast<const T*>(a.k) + (int64_t(b) * a.Hkv + hk) * a.St * a.Dh;
  const T* vb = static_cast<const T*>(a.v) + (int64_t(b) * a.Hkv + hk) * a.St * a.Dv;
  const int j0 = split * a.chunk, j1 = min(a.St, j0 + a.chunk);
  float m = -INFINITY, l = 0.f, acc[kPer];
#pragma unroll
  for (int t = 0; t < kPer; ++t) acc[t] = 0.f;
  for (int j = j0 + warp; j < j1; j += kWarps) {
    float dot = 0.f;
    for (int d = lane; d < a.Dh; d += 32) dot += qs[d] * ld(kb, int64_t(j) * a.Dh + d);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    float s = dot;
    if (a.mask && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j)) s = a.fill;
    const float mn = isnan(s) ? s : fmaxf(m, s);  // a NaN score makes the row NaN, as Softmax does
    if (mn == -INFINITY) continue;  // nothing but -inf so far: the row stays empty (0/0 later)
    const float corr = __expf(m - mn), p = __expf(s - mn);
    l = l * corr + p;
#pragma unroll
    for (int t = 0; t < kPer; ++t) {
      const int d = lane + 32 * t;
      if (d < a.Dv) acc[t] = acc[t] * corr + p * ld(vb, int64_t(j) * a.Dv + d);
    }
    m = mn;
  }
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
  }
#pragma unroll
  for (int t = 0; t < kPer; ++t) {
    const int d = lane + 32 * t;
    if (d < a.Dv) wacc[warp][d] = acc[t];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w]);
  float* out = a.partial + ((int64_t(b) * a.H + h) * a.splits + split) * (a.Dv + 2);
  for (int d = threadIdx.x; d < a.Dv; d += blockDim.x) {
    float o = 0.f;
    for (int w = 0; w < kWarps; ++w)
      if (wm[w] != -INFINITY) o += wacc[w][d] * __expf(wm[w] - M);
    out[d] = o;
  }
  if (threadIdx.x == 0) {
    float L = 0.f;
    for (int w = 0; w < kWarps; ++w)
      if (wm[w] != -INFINITY) L += wl[w] * __expf(wm[w] - M);
    out[a.Dv] = M;
    out[a.Dv + 1] = L;
  }
}

template <class T>
__global__ void decode_combine(DecodeArgs a) {
  const int h = blockIdx.x, b = blockIdx.y;
  const float* base = a.partial + (int64_t(b) * a.H + h) * a.splits * (a.Dv + 2);
  float M = -INFINITY;
  for (int s = 0; s < a.splits; ++s) M = fmaxf(M, base[s * (a.Dv + 2) + a.Dv]);
  float L = 0.f;
  for (int s = 0; s < a.splits; ++s) {
    const float ms = base[s * (a.Dv + 2) + a.Dv];
    if (ms != -INFINITY) L += base[s * (a.Dv + 2) + a.Dv + 1] * __expf(ms - M);
  }
  T* y = static_cast<T*>(a.y) + (int64_t(b) * a.H + h) * a.Dv;
  for (int d = threadIdx.x; d < a.Dv; d += blockDim.x) {
    float o = 0.f;
    for (int s = 0; s < a.splits; ++s) {
      const float ms = base[s * (a.Dv + 2) + a.Dv];
      if (ms != -INFINITY) o += base[s * (a.Dv + 2) + d] * __expf(ms - M);
    }
    y[d] = cuda::store_c<T, float>(o / L);  // L == 0 (every score -inf): NaN, as Softmax gives
  }
}

template <class T>
void launch_t(const DecodeArgs& a, int B, cudaStream_t stream) {
  decode_partial<T><<<dim3(a.splits, a.H, B), kWarps * 32, 0, stream>>>(a);
  decode_combine<T><<<dim3(a.H, B), 128, 0, stream>>>(a);
}

}  // namespace

bool flash_decode_supported(int Dh, int Dv, int H, int Hkv) {
  return Dh >= 1 && Dh <= kMaxD && Dv >= 1 && Dv <= kMaxD && H > 0 && Hkv > 0 && H % Hkv == 0;
}

size_t flash_decode_scratch_bytes(int B, int H, int St, int Dv) {
  (void)St;
  return size_t(B) * H * 64 * (Dv + 2) * sizeof(float);
}

// q: [B, 1, H·Dh] rows at q_batch_stride; k/v: the present [B, Hkv, St, D]; y: [B, 1, H·Dv].
void launch_flash_decode(DType dt, const void* q, int64_t q_batch_stride, const void* k, const void* v,
                         const void* mask, DType mask_dtype, void* y, float* scratch, int B, int H, int Hkv, int St,
                         int Dh, int Dv, float scale, float fill, cudaStream_t stream) {
  DecodeArgs a{};
  a.q = q;
  a.q_batch_stride = q_batch_stride;
  a.k = k;
  a.v = v;
  a.mask = mask;
  a.mask_dtype = mask_dtype;
  a.partial = scratch;
  a.y = y;
  a.H = H;
  a.Hkv = Hkv;
  a.St = St;
  a.Dh = Dh;
  a.Dv = Dv;
  a.scale = scale;
  a.fill = fill;
  // Enough blocks to fill the chip at batch 1 (about 2 per SM), chunks of at least 64 keys.
  const int want = std::max(1, (2 * 132 + B * H - 1) / (B * H));
  a.splits = std::max(1, std::min({64, want, (St + 63) / 64}));
  a.chunk = (St + a.splits - 1) / a.splits;
  switch (dt) {
    case DType::Float16: launch_t<__half>(a, B, stream); break;
    case DType::BFloat16: launch_t<__nv_bfloat16>(a, B, stream); break;
    case DType::Float: launch_t<float>(a, B, stream); break;
    default: FUSE_CHECK(false, "flash decode: unsupported dtype " << dtype_name(dt));
  }
}

}  // namespace fuseopt::cuda_fused
