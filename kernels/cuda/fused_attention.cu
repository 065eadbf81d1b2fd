// fuseopt.Attention on the GPU: flash-style, one block per (batch, head,
// query tile); key tiles stream through shared memory and the softmax is
// computed online (running max and sum per query row), so the S×S score
// matrix never exists in device memory.
//
// This file holds the generic kernel (any dtype, head dim up to 256, fp32
// SIMT arithmetic) and the dispatcher; fused_attention_mma.cu holds the
// tensor-core kernel for fp16/bf16.
#include <cmath>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt::cuda_fused {

namespace {

constexpr int kRows = 32;        // query rows per block
constexpr int kCols = 32;        // keys per tile (one per lane)
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = kRows / kWarps;

// DC = value-dim chunks of 32 (Dv <= 32*DC); each lane owns dims lane + 32c.
template <class T, int DC>
__global__ void __launch_bounds__(kWarps * 32) attention_generic_kernel(AttentionArgs a) {
  extern __shared__ float smem[];
  const int Dh = a.Dh, Dv = a.Dv;
  const int ks = Dh + 1;  // padded K row: lane j reads row j without bank conflicts
  float* q_s = smem;                      // [kRows][Dh]
  float* k_s = q_s + kRows * Dh;          // [kCols][Dh+1]
  float* v_s = k_s + kCols * ks;          // [kCols][Dv]

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int q0 = blockIdx.x * kRows;
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.Hkv);
  const T* qb = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h) * Dh;
  const T* kb = static_cast<const T*>(a.k) + b * a.k_batch_stride + hk * a.k_head_stride;
  const T* vb = static_cast<const T*>(a.v) + b * a.v_batch_stride + hk * a.v_head_stride;
  const int causal_off = a.Skv - a.Sq;

  for (int idx = threadIdx.x; idx < kRows * Dh; idx += blockDim.x) {
    int r = idx / Dh, d = idx % Dh;
    q_s[idx] = (q0 + r < a.Sq) ? to_f(qb[int64_t(q0 + r) * a.q_seq_stride + d]) : 0.f;
  }

  float o[kRowsPerWarp][DC];
  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < DC; ++c) o[r][c] = 0.f;
  }

  // Causal: keys past the block's last row are -inf for every row: skip them.
  int kv_end = a.Skv;
  if (a.causal) {
    int last_row = min(q0 + kRows, a.Sq) - 1;
    kv_end = max(0, min(a.Skv, last_row + causal_off + 1));
  }

  for (int k0 = 0; k0 < kv_end; k0 += kCols) {
    __syncthreads();  // previous tile fully consumed (and q_s written, first time)
    for (int idx = threadIdx.x; idx < kCols * Dh; idx += blockDim.x) {
      int j = idx / Dh, d = idx % Dh;
      k_s[j * ks + d] = (k0 + j < a.Skv) ? to_f(kb[int64_t(k0 + j) * a.k_seq_stride + d]) : 0.f;
    }
    for (int idx = threadIdx.x; idx < kCols * Dv; idx += blockDim.x) {
      int j = idx / Dv, d = idx % Dv;
      v_s[idx] = (k0 + j < a.Skv) ? to_f(vb[int64_t(k0 + j) * a.v_seq_stride + d]) : 0.f;
    }
    __syncthreads();

    const int j = k0 + lane;
    const bool key_valid = j < a.Skv;
    const bool key_masked = key_valid && a.mask && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.Skv + j);
    const int tile_n = min(kCols, a.Skv - k0);

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int i = q0 + warp * kRowsPerWarp + r;
      if (i >= a.Sq) continue;  // warp-uniform
      const float* qr = q_s + (warp * kRowsPerWarp + r) * Dh;
      float s = -INFINITY;
      if (key_valid && !(a.causal && j > i + causal_off) && !(a.window > 0 && i + causal_off - j >= a.window)) {
        float acc = 0.f;
        const float* kr = k_s + lane * ks;
        for (int d = 0; d < Dh; ++d) acc += qr[d] * kr[d];
        s = acc * a.scale;
        if (a.softcap > 0.f) s = a.softcap * tanhf(s / a.softcap);
        if (a.bias) s = apply_bias(a, s, b, h, i, j);
        if (key_masked) s = a.mask_filter_value;
      }
      float tile_max = s;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
      const float m_new = fmaxf(m[r], tile_max);
      // A row with nothing allowed so far keeps m = -inf: take no mass, avoid inf - inf.
      const float base = (m_new == -INFINITY) ? 0.f : m_new;
      const float p = __expf(s - base);
      const float corr = __expf(m[r] - base);
      float psum = p;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, off);
      l[r] = l[r] * corr + psum;
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < DC; ++c) o[r][c] *= corr;
      for (int jj = 0; jj < tile_n; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
        const float* vr = v_s + jj * Dv;
#pragma unroll
        for (int c = 0; c < DC; ++c) {
          const int d = lane + 32 * c;
          if (d < Dv) o[r][c] += pj * vr[d];
        }
      }
    }
  }

  T* yb = static_cast<T*>(a.y) + int64_t(b) * a.Sq * a.H * Dv + int64_t(h) * Dv;
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int i = q0 + warp * kRowsPerWarp + r;
    if (i >= a.Sq) continue;
    // l = 0 only when every score is -inf: NaN (0·inf), as Softmax gives, or 0 when asked;
    // a sink joins the row here (join_sink), so such a row is then 0.
    float lr = l[r], keep = 1.f;
    if (a.sinks) keep = join_sink(m[r], a.sinks[h], lr);
    const float inv = a.masked_rows_zero && m[r] == -INFINITY ? 0.f : keep / lr;
#pragma unroll
    for (int c = 0; c < DC; ++c) {
      const int d = lane + 32 * c;
      if (d < Dv) yb[int64_t(i) * a.H * Dv + d] = from_f<T>(o[r][c] * inv);
    }
  }
}

template <class T, int DC>
void launch_generic_t(const AttentionArgs& a, cudaStream_t stream) {
  size_t smem = sizeof(float) * (size_t(kRows) * a.Dh + size_t(kCols) * (a.Dh + 1) + size_t(kCols) * a.Dv);
  if (smem > 48 * 1024)
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(attention_generic_kernel<T, DC>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                     "Attention");
  dim3 grid((a.Sq + kRows - 1) / kRows, a.H, a.B);
  attention_generic_kernel<T, DC><<<grid, kWarps * 32, smem, stream>>>(a);
}

template <class T>
void launch_generic(const AttentionArgs& a, cudaStream_t stream) {
  if (a.Dv <= 32)
    launch_generic_t<T, 1>(a, stream);
  else if (a.Dv <= 64)
    launch_generic_t<T, 2>(a, stream);
  else if (a.Dv <= 128)
    launch_generic_t<T, 4>(a, stream);
  else
    launch_generic_t<T, 8>(a, stream);
}

}  // namespace

namespace {
// The window dropped where it hides nothing: the largest query-key distance, i + Skv - Sq - j
// at i = Sq - 1, j = 0, is Skv - 1, so a window of at least Skv keys keeps every key and the
// fast kernels (which have no window) give the same result.
AttentionArgs without_idle_window(AttentionArgs a) {
  if (a.window > 0 && a.Skv <= a.window) a.window = 0;
  return a;
}
}  // namespace

const char* attention_kernel_name(const AttentionArgs& args) {
  const AttentionArgs a = without_idle_window(args);
  if (a.softcap > 0.f) return "generic";  // only the generic kernel soft-caps
  if (a.window > 0) return attention_mma_supported(a) ? "mma" : "generic";  // the Hopper kernel has no window
  if (hopper_attention_applies(a)) return "hopper";
  return attention_mma_supported(a) ? "mma" : "generic";
}

void launch_attention(const AttentionArgs& args, cudaStream_t stream) {
  const AttentionArgs a = without_idle_window(with_head_strides(args));
  FUSE_CHECK(a.window >= 0, "Attention CUDA kernel: window " << a.window << " must be >= 0");
  FUSE_CHECK(a.B >= 0 && a.H > 0 && a.Hkv > 0 && a.H % a.Hkv == 0,
             "Attention CUDA kernel: num_heads " << a.H << " is not a multiple of kv_num_heads " << a.Hkv);
  FUSE_CHECK(a.Dh > 0 && a.Dh <= 256 && a.Dv > 0 && a.Dv <= 256,
             "Attention CUDA kernel: head sizes " << a.Dh << "/" << a.Dv << " not supported (1..256)");
  if (a.B == 0 || a.Sq == 0) return;
  if (a.Skv == 0) FUSE_CHECK(false, "Attention CUDA kernel: empty key sequence");
  if (a.softcap > 0.f) {
    // Soft-capping (Gemma-2) is implemented in the generic kernel only: correctness first.
    FUSED_DISPATCH_FLOAT(a.dtype, T, launch_generic<T>(a, stream));
  } else if (a.window > 0 && attention_mma_supported(a)) {
    launch_attention_mma(a, stream);  // a window that hides keys: the mma.sync kernel skips and masks them
  } else if (a.window == 0 && launch_hopper_attention(a, stream)) {
    // sm_90a kernel (fused_attention_hopper.cu): launched where it applies (no window)
  } else if (attention_mma_supported(a)) {
    launch_attention_mma(a, stream);
  } else {
    FUSED_DISPATCH_FLOAT(a.dtype, T, launch_generic<T>(a, stream));
  }
  FUSED_LAUNCH_CHECK("Attention");
}

}  // namespace fuseopt::cuda_fused
