// Tensor-core flash attention for fp16/bf16 with head dim 64 or 128
// (FlashAttention-2 scheme on mma.sync.m16n8k16, fp32 accumulation):
//   block = 4 warps = 64 query rows (16 per warp), key tiles of 64;
//   Q fragments stay in registers; K/V tiles double-buffered in shared
//   memory through cp.async; S = Q·Kᵀ and O += P·V on tensor cores; the
//   softmax runs online in registers (running max / sum per row), so no
//   score ever reaches device memory. Semantics identical to the generic
//   kernel (see fused_launch.cuh).
#include <cstdint>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_common.h"

namespace fuseopt::cuda_fused {

namespace {

constexpr int kBr = 64, kBc = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <class T> struct MmaType;
template <> struct MmaType<__half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <> struct MmaType<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

template <class T>
__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, const uint32_t* b);
template <>
__device__ __forceinline__ void mma16816<__half>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem_ptr) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* smem_ptr) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16-byte global->shared copy; zero-fills when !valid (rows past the end).
__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gptr, bool valid) {
  uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(gptr), "r"(src_size));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies rows [row0, row0+64) of a [rows, D] slice (row stride `stride`
// elements) into shared memory with padded row stride D+8.
template <class T, int D>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t stride, int row0, int rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kStride = D + 8;
  for (int idx = threadIdx.x; idx < kBr * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = row0 + r < rows;
    const T* src = g + (valid ? int64_t(row0 + r) * stride : 0) + c * 8;
    cp_async16(s + r * kStride + c * 8, src, valid);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(AttentionArgs a) {
  constexpr int kStride = D + 8;  // padded: ldmatrix rows fall in distinct banks
  constexpr int kKSteps = D / 16;  // k-steps of Q·Kᵀ
  constexpr int kONb = D / 8;      // n-blocks of O
  constexpr int kSNb = kBc / 8;    // n-blocks of S
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kBr * kStride;       // 2 stages
  T* v_s = k_s + 2 * kBc * kStride;   // 2 stages

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int q0 = blockIdx.x * kBr;
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.Hkv);
  const T* qb = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h) * D;
  const T* kb = static_cast<const T*>(a.k) + b * a.k_batch_stride + int64_t(hk) * D;
  const T* vb = static_cast<const T*>(a.v) + b * a.v_batch_stride + int64_t(hk) * D;
  const int causal_off = a.Skv - a.Sq;

  int kv_end = a.Skv;
  if (a.causal) {
    const int last_row = min(q0 + kBr, a.Sq) - 1;
    kv_end = max(0, min(a.Skv, last_row + causal_off + 1));
  }
  const int n_tiles = (kv_end + kBc - 1) / kBc;

  load_tile<T, D>(q_s, qb, a.q_seq_stride, q0, a.Sq);
  if (n_tiles > 0) {
    load_tile<T, D>(k_s, kb, a.k_seq_stride, 0, a.Skv);
    load_tile<T, D>(v_s, vb, a.v_seq_stride, 0, a.Skv);
  }
  cp_async_commit();

  float o[kONb][4];
#pragma unroll
  for (int nb = 0; nb < kONb; ++nb)
#pragma unroll
    for (int c = 0; c < 4; ++c) o[nb][c] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // rows g and g+8 of this warp
  float l[2] = {0.f, 0.f};              // this thread's partial row sums
  uint32_t qf[kKSteps][4];

  const int row_a = q0 + warp * 16 + g;  // absolute query rows of c0/c1 and c2/c3
  const int row_b = row_a + 8;
  const bool need_elem_checks = a.bias || a.mask || a.causal;

  for (int tile = 0; tile < n_tiles; ++tile) {
    const int stage = tile & 1;
    if (tile + 1 < n_tiles) {
      load_tile<T, D>(k_s + (stage ^ 1) * kBc * kStride, kb, a.k_seq_stride, (tile + 1) * kBc, a.Skv);
      load_tile<T, D>(v_s + (stage ^ 1) * kBc * kStride, vb, a.v_seq_stride, (tile + 1) * kBc, a.Skv);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk)
        ldmatrix_x4(qf[kk], q_s + (warp * 16 + (lane & 15)) * kStride + kk * 16 + (lane >> 4) * 8);
    }
    const T* ks = k_s + stage * kBc * kStride;
    const T* vs = v_s + stage * kBc * kStride;
    const int k0 = tile * kBc;

    // S = Q·Kᵀ for this warp's 16 rows × 64 keys.
    float s[kSNb][4];
#pragma unroll
    for (int nb = 0; nb < kSNb; ++nb) {
#pragma unroll
      for (int c = 0; c < 4; ++c) s[nb][c] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kKSteps; kk += 2) {
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + (nb * 8 + (lane & 7)) * kStride + kk * 16 + (lane >> 3) * 8);
        mma16816<T>(s[nb], qf[kk], bf);
        mma16816<T>(s[nb], qf[kk + 1], bf + 2);
      }
    }

    // Scale, bias, masks; then the online softmax update.
    const bool tile_partial = k0 + kBc > a.Skv;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < kSNb; ++nb) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        float v = s[nb][c] * a.scale;
        if (need_elem_checks || tile_partial) {
          const int i = c < 2 ? row_a : row_b;
          const int j = k0 + nb * 8 + 2 * t + (c & 1);
          if (j >= a.Skv || (a.causal && j > i + causal_off)) {
            v = -INFINITY;
          } else {
            if (a.bias && i < a.Sq) v = apply_bias(a, v, b, h, i, j);
            if (a.mask && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.Skv + j)) v = a.mask_filter_value;
          }
        }
        s[nb][c] = v;
        tile_max[c >> 1] = fmaxf(tile_max[c >> 1], v);
      }
    }
    float corr[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float m_new = fmaxf(m[r], tile_max[r]);
      // Nothing allowed yet: keep m = -inf, take no mass (avoids inf - inf).
      base[r] = m_new == -INFINITY ? 0.f : m_new;
      corr[r] = exp2f((m[r] - base[r]) * kLog2e);
      m[r] = m_new;
      l[r] *= corr[r];
    }
#pragma unroll
    for (int nb = 0; nb < kONb; ++nb) {
      o[nb][0] *= corr[0];
      o[nb][1] *= corr[0];
      o[nb][2] *= corr[1];
      o[nb][3] *= corr[1];
    }
    // P (fp16/bf16 A fragments) and O += P·V.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pf[4];
      float p[2][4];
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float e = exp2f((s[2 * kk + half][c] - base[c >> 1]) * kLog2e);
          p[half][c] = e;
          l[c >> 1] += e;
        }
      pf[0] = MmaType<T>::pack(p[0][0], p[0][1]);
      pf[1] = MmaType<T>::pack(p[0][2], p[0][3]);
      pf[2] = MmaType<T>::pack(p[1][0], p[1][1]);
      pf[3] = MmaType<T>::pack(p[1][2], p[1][3]);
#pragma unroll
      for (int nb = 0; nb < kONb; nb += 2) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + nb * 8 + (lane >> 4) * 8);
        mma16816<T>(o[nb], pf, bf);
        mma16816<T>(o[nb + 1], pf, bf + 2);
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  // Row sums across the quad, then O / l.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv[2] = {1.f / l[0], 1.f / l[1]};  // l = 0: all -inf, NaN like Softmax
  T* yb = static_cast<T*>(a.y) + int64_t(b) * a.Sq * a.H * D + int64_t(h) * D;
  const int64_t y_stride = int64_t(a.H) * D;
#pragma unroll
  for (int nb = 0; nb < kONb; ++nb) {
    const int col = nb * 8 + 2 * t;
    if (row_a < a.Sq)
      *reinterpret_cast<uint32_t*>(yb + row_a * y_stride + col) =
          MmaType<T>::pack(o[nb][0] * inv[0], o[nb][1] * inv[0]);
    if (row_b < a.Sq)
      *reinterpret_cast<uint32_t*>(yb + row_b * y_stride + col) =
          MmaType<T>::pack(o[nb][2] * inv[1], o[nb][3] * inv[1]);
  }
}

template <class T, int D>
void launch_t(const AttentionArgs& a, cudaStream_t stream) {
  constexpr size_t smem = sizeof(T) * size_t(kBr + 4 * kBc) * (D + 8);
  static bool configured = false;  // the attribute is per function; setting it twice is harmless
  if (!configured) {
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(attention_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)),
                     "Attention");
    configured = true;
  }
  dim3 grid((a.Sq + kBr - 1) / kBr, a.H, a.B);
  attention_mma_kernel<T, D><<<grid, kThreads, smem, stream>>>(a);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool attention_mma_supported(const AttentionArgs& a) {
  if (a.dtype != DType::Float16 && a.dtype != DType::BFloat16) return false;
  if (a.Dh != a.Dv || (a.Dh != 64 && a.Dh != 128)) return false;
  // cp.async moves 16 bytes: every row start must be 16-byte aligned.
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.y)) return false;
  for (int64_t s : {a.q_batch_stride, a.q_seq_stride, a.k_batch_stride, a.k_seq_stride, a.v_batch_stride,
                    a.v_seq_stride})
    if (s % 8 != 0) return false;
  return true;
}

void launch_attention_mma(const AttentionArgs& a, cudaStream_t stream) {
  if (a.dtype == DType::Float16) {
    if (a.Dh == 64) launch_t<__half, 64>(a, stream);
    else launch_t<__half, 128>(a, stream);
  } else {
    if (a.Dh == 64) launch_t<__nv_bfloat16, 64>(a, stream);
    else launch_t<__nv_bfloat16, 128>(a, stream);
  }
}

}  // namespace fuseopt::cuda_fused
