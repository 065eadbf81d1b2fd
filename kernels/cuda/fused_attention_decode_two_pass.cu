// The two-pass split-KV decode kernels of fuseopt.Attention (the algorithm: the top comment of
// fused_attention_decode.cu): decode_split writes each split's (acc, max, sum) to scratch and
// decode_merge combines them in a second launch; decode_split_scalar is the one-element-per-load
// fallback for head sizes the 16-byte path does not take. The host side (plans, the choice
// between these and the one-launch kernel) is fused_attention_decode.cu.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_decode_args.cuh"
#include "kernels/cuda/pdl.cuh"
#include "util/error.h"

namespace fuseopt::cuda_fused::decode {
namespace {

// Block's chunk [j0, j1) of kv head hk for query heads h0 .. h0 + GB - 1.
template <class T, int GB>
__global__ void __launch_bounds__(kThreads) decode_split(DecodeArgs a) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  constexpr int VEC = 16 / sizeof(T);
  __shared__ float q_s[GB][kMaxD];
  __shared__ float p_s[GB][kChunk];
  __shared__ float m_s[GB], l_s[GB];
  __shared__ float red[kWarps][kMaxGD];
  const int split = blockIdx.x, b = blockIdx.z;
  const int groups = (a.H / a.Hkv) / GB;
  const int hk = blockIdx.y / groups, h0 = hk * (a.H / a.Hkv) + (blockIdx.y % groups) * GB;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h0) * a.Dh;
  for (int i = tid; i < GB * a.Dh; i += kThreads) q_s[i / a.Dh][i % a.Dh] = to_f(q[i]) * a.scale;
  const T* kb = static_cast<const T*>(a.k) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * a.Dh;
  const T* vb = static_cast<const T*>(a.v) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * a.Dv;
  const int j0 = split * a.chunk, n = max(0, min(a.St, j0 + a.chunk) - j0);
  __syncthreads();

  // Scores: TPK threads per key (lanes sub < Dh/VEC hold one 16-byte piece each, and the
  // matching piece of every query head in registers). kU passes are loaded before any is
  // reduced, so each thread has kU 16-byte loads in flight instead of one.
  {
    constexpr int kU = 4;
    const int tpk = pow2_at_least(a.Dh / VEC), kpp = kThreads / tpk;
    const int sub = tid % tpk, grp = tid / tpk;
    const bool has = sub < a.Dh / VEC;
    float qr[GB][VEC];
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < VEC; ++e) qr[g][e] = has ? q_s[g][sub * VEC + e] : 0.f;
    for (int base = 0; base < n; base += kU * kpp) {
      float kv[kU][VEC];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int jj = base + u * kpp + grp;
        if (has && jj < n) load_vec<T, VEC>(kv[u], kb + int64_t(j0 + jj) * a.Dh + sub * VEC);
        else
#pragma unroll
          for (int e = 0; e < VEC; ++e) kv[u][e] = 0.f;
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int jj = base + u * kpp + grp;
        float dot[GB];
#pragma unroll
        for (int g = 0; g < GB; ++g) {
          dot[g] = 0.f;
#pragma unroll
          for (int e = 0; e < VEC; ++e) dot[g] = fmaf(qr[g][e], kv[u][e], dot[g]);
          for (int o = tpk / 2; o > 0; o >>= 1) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], o);
        }
        if (sub == 0 && jj < n) {
          const bool masked = a.mask && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j0 + jj);
#pragma unroll
          for (int g = 0; g < GB; ++g) p_s[g][jj] = masked ? a.fill : dot[g];
        }
      }
    }
  }
  __syncthreads();
  // Softmax of the chunk, one warp per query head: p = exp(s - m), l = sum p.
  for (int g = warp; g < GB; g += kWarps) {
    float m = -INFINITY;
    // NaN handling as the prefill kernels and the CPU kernel: the max skips NaN (fmaxf); a NaN
    // score's exp is NaN and poisons l (and, through the merge, the row); a chunk with no score
    // above -inf keeps m = -inf and takes no mass (base 0 avoids -inf - -inf).
    for (int j = lane; j < n; j += 32) m = fmaxf(m, p_s[g][j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float base = m == -INFINITY ? 0.f : m;
    float l = 0.f;
    for (int j = lane; j < n; j += 32) {
      const float e = __expf(p_s[g][j] - base);
      p_s[g][j] = e;
      l += e;
    }
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) {
      m_s[g] = m;
      l_s[g] = l;
    }
  }
  __syncthreads();
  // P·V: TPV threads per value row, GB x VEC accumulators each.
  const int tpv = pow2_at_least(a.Dv / VEC), kpv = kThreads / tpv;
  const int sub = tid % tpv, grp = tid / tpv;
  const bool has = sub < a.Dv / VEC;
  float acc[GB][VEC];
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
  if (has)
#pragma unroll 4
    for (int jj = grp; jj < n; jj += kpv) {
      float vv[VEC];
      load_vec<T, VEC>(vv, vb + int64_t(j0 + jj) * a.Dv + sub * VEC);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        const float pj = p_s[g][jj];
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[g][e] = fmaf(pj, vv[e], acc[g][e]);
      }
    }
  // Key groups of one warp hold the same dims at lanes sub, sub + tpv, ...: shuffle-sum them.
#pragma unroll
  for (int g = 0; g < GB; ++g)
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      for (int o = tpv; o < 32; o <<= 1) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
  if (lane < tpv && has)
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < VEC; ++e) red[warp][g * a.Dv + sub * VEC + e] = acc[g][e];
  __syncthreads();
  // With tpv = 32 every warp covers other keys; with tpv < 32 too (kpv > 1 groups per warp
  // were summed above): the warps always hold disjoint keys, so sum the kWarps copies.
  for (int i = tid; i < GB * a.Dv; i += kThreads) {
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += red[w][i];
    const int g = i / a.Dv, d = i % a.Dv;
    a.partial[((int64_t(b) * a.H + h0 + g) * a.splits + split) * (a.Dv + 2) + d] = o;
  }
  if (tid < GB) {
    float* out = a.partial + ((int64_t(b) * a.H + h0 + tid) * a.splits + split) * (a.Dv + 2);
    out[a.Dv] = m_s[tid];
    out[a.Dv + 1] = l_s[tid];
  }
}

// Fallback for any head size (one element per load), one query head per block (gb = 1).
template <class T>
__global__ void __launch_bounds__(kThreads) decode_split_scalar(DecodeArgs a) {
  cuda_pdl::pdl_begin();
  __shared__ float q_s[kMaxD];
  __shared__ float p_s[kChunk];
  __shared__ float ml[2];
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.Hkv), tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h) * a.Dh;
  for (int d = tid; d < a.Dh; d += kThreads) q_s[d] = to_f(q[d]) * a.scale;
  const T* kb = static_cast<const T*>(a.k) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * a.Dh;
  const T* vb = static_cast<const T*>(a.v) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * a.Dv;
  const int j0 = split * a.chunk, n = max(0, min(a.St, j0 + a.chunk) - j0);
  __syncthreads();
  for (int jj = warp; jj < n; jj += kWarps) {  // a warp per key, lanes over Dh
    float dot = 0.f;
    for (int d = lane; d < a.Dh; d += 32) dot = fmaf(q_s[d], to_f(kb[int64_t(j0 + jj) * a.Dh + d]), dot);
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    if (lane == 0)
      p_s[jj] = a.mask && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j0 + jj) ? a.fill : dot;
  }
  __syncthreads();
  if (warp == 0) {
    float m = -INFINITY;
    for (int j = lane; j < n; j += 32) m = fmaxf(m, p_s[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    const float base = m == -INFINITY ? 0.f : m;  // as in decode_split
    float l = 0.f;
    for (int j = lane; j < n; j += 32) {
      const float e = __expf(p_s[j] - base);
      p_s[j] = e;
      l += e;
    }
    for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) {
      ml[0] = m;
      ml[1] = l;
    }
  }
  __syncthreads();
  float* out = a.partial + ((int64_t(b) * a.H + h) * a.splits + split) * (a.Dv + 2);
  for (int d = tid; d < a.Dv; d += kThreads) {
    float o = 0.f;
    for (int jj = 0; jj < n; ++jj) o = fmaf(p_s[jj], to_f(vb[int64_t(j0 + jj) * a.Dv + d]), o);
    out[d] = o;
  }
  if (tid == 0) {
    out[a.Dv] = ml[0];
    out[a.Dv + 1] = ml[1];
  }
}

// Merge of the splits of one (b, h): the weights once per split into shared memory.
template <class T>
__global__ void __launch_bounds__(kThreads) decode_merge(DecodeArgs a) {
  cuda_pdl::pdl_begin();  // the partials of decode_split: its completion, not only its trigger
  extern __shared__ float w_s[];  // [splits]
  __shared__ float stat[2];       // M, L
  const int h = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
  const int64_t row = a.Dv + 2;
  const float* base = a.partial + (int64_t(b) * a.H + h) * a.splits * row;
  if (tid < 32) {
    float M = -INFINITY;
    for (int s = tid; s < a.splits; s += 32) M = fmaxf(M, base[s * row + a.Dv]);
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float L = 0.f;
    for (int s = tid; s < a.splits; s += 32) {
      const float ms = base[s * row + a.Dv];
      // A split with no score above -inf adds nothing (w = 0), except a NaN in its l / acc
      // (0 · NaN), which must poison the row as it does on the CPU.
      const float w = ms == -INFINITY ? 0.f : __expf(ms - M);
      w_s[s] = w;
      L += w * base[s * row + a.Dv + 1];
    }
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    if (tid == 0) {
      stat[0] = M;
      stat[1] = L;
    }
  }
  __syncthreads();
  // L == 0 (every score -inf): 0/0 = NaN, as Softmax gives, or 0 with masked_rows_zero.
  const bool zero = a.rows_zero && stat[0] == -INFINITY;
  const float inv = 1.f / stat[1];
  T* y = static_cast<T*>(a.y) + (int64_t(b) * a.H + h) * a.Dv;
  for (int d = tid; d < a.Dv; d += kThreads) {
    // Four independent sums: four L2 loads in flight instead of one per split.
    float o4[4] = {0.f, 0.f, 0.f, 0.f};
    int s = 0;
    for (; s + 4 <= a.splits; s += 4)
#pragma unroll
      for (int t = 0; t < 4; ++t) o4[t] = fmaf(w_s[s + t], base[(s + t) * row + d], o4[t]);
    for (; s < a.splits; ++s) o4[0] = fmaf(w_s[s], base[s * row + d], o4[0]);
    const float o = (o4[0] + o4[1]) + (o4[2] + o4[3]);
    y[d] = from_f<T>(zero ? 0.f : o * inv);
  }
}

template <class T>
void launch_t(const DecodeArgs& a, bool vec, int B, cudaStream_t stream) {
  // Both launches with PDL: at batch 1 a decode step is launch-bound (the K/V of one layer
  // take ~1 µs to read), so each kernel's launch overlaps its predecessor's tail.
  const dim3 grid(a.splits, a.H / a.gb, B), block(kThreads);
  if (!vec) {
    cuda_pdl::pdl_launch(decode_split_scalar<T>, grid, block, 0, stream, a);
  } else {
    switch (a.gb) {
      case 8: cuda_pdl::pdl_launch(decode_split<T, 8>, grid, block, 0, stream, a); break;
      case 4: cuda_pdl::pdl_launch(decode_split<T, 4>, grid, block, 0, stream, a); break;
      case 2: cuda_pdl::pdl_launch(decode_split<T, 2>, grid, block, 0, stream, a); break;
      default: cuda_pdl::pdl_launch(decode_split<T, 1>, grid, block, 0, stream, a); break;
    }
  }
  cuda_pdl::pdl_launch(decode_merge<T>, dim3(a.H, B), block, size_t(a.splits) * sizeof(float), stream, a);
}

}  // namespace

void launch_two_pass(DType dt, const DecodeArgs& a, bool vec, int B, cudaStream_t stream) {
  switch (dt) {
    case DType::Float16: launch_t<__half>(a, vec, B, stream); break;
    case DType::BFloat16: launch_t<__nv_bfloat16>(a, vec, B, stream); break;
    case DType::Float: launch_t<float>(a, vec, B, stream); break;
    default: FUSE_CHECK(false, "flash decode: unsupported dtype " << dtype_name(dt));
  }
}

}  // namespace fuseopt::cuda_fused::decode
