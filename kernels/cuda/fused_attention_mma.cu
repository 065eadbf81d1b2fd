// Tensor-core flash attention for fp16/bf16 with head dim 64 or 128
// (FlashAttention-2 scheme on mma.sync.m16n8k16, fp32 accumulation):
//   block = 4 warps, MT m-tiles of 16 query rows per warp, key tiles of 64;
//   Q stays in shared memory; K/V tiles double-buffered in shared
//   memory through cp.async; S = Q·Kᵀ and O += P·V on tensor cores; the
//   softmax runs online in registers (running max / sum per row), so no
//   score ever reaches device memory. Semantics identical to the generic
//   kernel (see fused_launch.cuh).
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {

namespace {

constexpr int kBc = 64, kWarps = 4, kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

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

// Copies rows [row0, row0+ROWS) of a [rows, D] slice (row stride `stride`
// elements) into shared memory with padded row stride D+8.
template <class T, int D, int ROWS>
__device__ __forceinline__ void load_tile(T* s, const T* g, int64_t stride, int row0, int rows) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kStride = D + 8;
  for (int idx = threadIdx.x; idx < ROWS * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool valid = row0 + r < rows;
    const T* src = g + (valid ? int64_t(row0 + r) * stride : 0) + c * 8;
    cp_async16(s + r * kStride + c * 8, src, valid);
  }
}

// v + a bias stored in the kernel's own type T (fp16: add_half_bias's absorbing lowest value).
template <class T>
__device__ __forceinline__ float add_bias_t(float v, float bias) {
  if constexpr (std::is_same_v<T, __half>) return add_half_bias(v, bias);
  else return v + bias;
}

// Out of line on purpose: called from fully unrolled code, inlining the
// dtype switch would bloat the kernel past the instruction cache.
__device__ __noinline__ float bias_call(const void* bias, DType dt, float fill, float v, int64_t idx) {
  switch (dt) {
    case DType::Bool: return static_cast<const uint8_t*>(bias)[idx] ? v : fill;
    case DType::Float16: return add_half_bias(v, __half2float(static_cast<const __half*>(bias)[idx]));
    case DType::BFloat16: return v + __bfloat162float(static_cast<const __nv_bfloat16*>(bias)[idx]);
    default: return v + static_cast<const float*>(bias)[idx];
  }
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// MT = 16-row m-tiles per warp: K/V fragments read from shared memory are
// reused MT times (FlashAttention-2 uses 2). BIAS_T: the attention bias is
// stored in T (the usual case: a float bias computed in the compute
// precision) and is read inline; otherwise any bias dtype goes through the
// out-of-line bias_call.
template <class T, int D, int MT, bool BIAS_T>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(AttentionArgs a) {
  cuda_pdl::pdl_begin();  // launched with programmatic dependent launch (kernels/cuda/pdl.cuh)
  constexpr int kRowsBlk = kWarps * 16 * MT;
  constexpr int kStride = D + 8;  // padded: ldmatrix rows fall in distinct banks
  constexpr int kKSteps = D / 16;  // k-steps of Q·Kᵀ
  constexpr int kONb = D / 8;      // n-blocks of O
  constexpr int kSNb = kBc / 8;    // n-blocks of S
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* k_s = q_s + kRowsBlk * kStride;  // 2 stages
  T* v_s = k_s + 2 * kBc * kStride;   // 2 stages

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // Heaviest query tiles (most keys under causal) first.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRowsBlk;
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.H / a.Hkv);
  const T* qb = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h) * D;
  // K/V heads at their own stride: D in a [B, S, Hkv·D] row, S·D in a KV cache's present
  // [B, Hkv, S, D] (read in place, no re-layout copy).
  const T* kb = static_cast<const T*>(a.k) + b * a.k_batch_stride + hk * a.k_head_stride;
  const T* vb = static_cast<const T*>(a.v) + b * a.v_batch_stride + hk * a.v_head_stride;
  const int causal_off = a.Skv - a.Sq;

  int kv_end = a.Skv;
  if (a.causal) {
    const int last_row = min(q0 + kRowsBlk, a.Sq) - 1;
    kv_end = max(0, min(a.Skv, last_row + causal_off + 1));
  }
  const int n_tiles = (kv_end + kBc - 1) / kBc;
  // Sliding window: key tiles wholly left of the block's first row's window are hidden from
  // every row of the block (j <= q0 + causal_off - window): skip them.
  const int first_tile = a.window > 0 ? min(n_tiles, max(0, q0 + causal_off - a.window + 1) / kBc) : 0;

  load_tile<T, D, kRowsBlk>(q_s, qb, a.q_seq_stride, q0, a.Sq);
  if (first_tile < n_tiles) {
    load_tile<T, D, kBc>(k_s, kb, a.k_seq_stride, first_tile * kBc, a.Skv);
    load_tile<T, D, kBc>(v_s, vb, a.v_seq_stride, first_tile * kBc, a.Skv);
  }
  cp_async_commit();

  float o[MT][kONb][4];
  float m[MT][2], l[MT][2];  // rows g and g+8 of each m-tile; l = this thread's partial sums
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
#pragma unroll
    for (int nb = 0; nb < kONb; ++nb)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[mt][nb][c] = 0.f;
  }
  const int warp_row0 = q0 + warp * 16 * MT;  // first query row of this warp
  // A key-padding mask only forces the checked path on key tiles that hold a
  // masked key (one vote per tile below); a bias forces it everywhere.
  const bool any_elem_checks = a.bias != nullptr;

  // With one m-tile per warp (head dim 64), a bias in T is read one key tile
  // ahead into registers (32 values per thread): its loads are in flight
  // during the softmax and P·V of the tile before instead of stalling the
  // tile's own score update. (Two m-tiles would need 64 more registers.)
  constexpr bool kPrefetchBias = BIAS_T && MT == 1;
  T bias_r[kPrefetchBias ? MT : 1][kPrefetchBias ? kSNb : 1][4];
  // A thread's columns come in adjacent pairs (2t, 2t+1): one 4-byte load
  // per pair when the bias rows are contiguous and 4-byte aligned.
  const T* bias_bh = static_cast<const T*>(a.bias) + b * a.bias_sb + h * a.bias_sh;
  const bool bias_pairs = a.bias_sj == 1 && a.Skv % 2 == 0 && a.bias_si % 2 == 0 &&
                          (reinterpret_cast<uintptr_t>(bias_bh) & 3) == 0;
  auto load_bias = [&](int k0) {
    if constexpr (kPrefetchBias) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int64_t row = int64_t(min(warp_row0 + mt * 16 + g + r * 8, a.Sq - 1)) * a.bias_si;
            const int j = k0 + nb * 8 + 2 * t;
            if (bias_pairs) {
              // j is even; past S_kv the scores are replaced anyway, any pair in range will do.
              const Vec<T, 2> p = *reinterpret_cast<const Vec<T, 2>*>(bias_bh + row + min(j, a.Skv - 2));
              bias_r[mt][nb][2 * r] = p.v[0];
              bias_r[mt][nb][2 * r + 1] = p.v[1];
            } else {
              bias_r[mt][nb][2 * r] = bias_bh[row + min(j, a.Skv - 1) * a.bias_sj];
              bias_r[mt][nb][2 * r + 1] = bias_bh[row + min(j + 1, a.Skv - 1) * a.bias_sj];
            }
          }
    }
  };
  // Key-padding mask of the current key tile, one flag per key, written by
  // the first kBc threads before the tile's barrier (the previous tile's
  // readers have passed the barrier that ends their iteration).
  __shared__ bool col_masked[kBc];
  if (first_tile < n_tiles) load_bias(first_tile * kBc);

  for (int tile = first_tile; tile < n_tiles; ++tile) {
    const int stage = (tile - first_tile) & 1;
    bool key_masked = false;
    if (a.mask && threadIdx.x < kBc) {
      const int j = tile * kBc + threadIdx.x;
      key_masked = j < a.Skv && !mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.Skv + j);
      col_masked[threadIdx.x] = key_masked;
    }
    if (tile + 1 < n_tiles) {
      load_tile<T, D, kBc>(k_s + (stage ^ 1) * kBc * kStride, kb, a.k_seq_stride, (tile + 1) * kBc, a.Skv);
      load_tile<T, D, kBc>(v_s + (stage ^ 1) * kBc * kStride, vb, a.v_seq_stride, (tile + 1) * kBc, a.Skv);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    // The tile's barrier, and the vote: does any key of this tile need the mask?
    // (An unmasked padding mask, the usual case at batch 1 or unpadded
    // batches, then costs nothing: Llama-1B 1×2048 spent 198 µs per layer on
    // the checked path for an all-ones mask.)
    const bool tile_masked = __syncthreads_or(key_masked) != 0;
    const T* ks = k_s + stage * kBc * kStride;
    const T* vs = v_s + stage * kBc * kStride;
    const int k0 = tile * kBc;

    // S = Q·Kᵀ: MT m-tiles × 64 keys per warp; each K fragment feeds MT mmas.
    float s[MT][kSNb][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[mt][nb][c] = 0.f;
#pragma unroll
    for (int kk = 0; kk < kKSteps; kk += 2) {
      uint32_t qf[MT][2][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int u = 0; u < 2; ++u)
          ldmatrix_x4(qf[mt][u], q_s + (warp * 16 * MT + mt * 16 + (lane & 15)) * kStride + (kk + u) * 16 +
                                     (lane >> 4) * 8);
#pragma unroll
      for (int nb = 0; nb < kSNb; ++nb) {
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + (nb * 8 + (lane & 7)) * kStride + kk * 16 + (lane >> 3) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(s[mt][nb], qf[mt][0], bf);
          mma16816<T>(s[mt][nb], qf[mt][1], bf + 2);
        }
      }
    }

    // Per-element work only where it can matter: bias/mask present, the
    // tile runs past S_kv, or it crosses this warp's causal diagonal. The
    // fast path is a separate straight loop so the common case stays small
    // in the instruction cache; the checked path keeps per-element code to
    // a few selects (key-level facts are computed once per column).
    const bool checks = any_elem_checks || tile_masked || k0 + kBc > a.Skv ||
                        (a.causal && k0 + kBc - 1 > warp_row0 + causal_off) ||
                        (a.window > 0 && warp_row0 + 16 * MT - 1 + causal_off - k0 >= a.window);
    if (!checks) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
          for (int c = 0; c < 4; ++c) s[mt][nb][c] *= a.scale;
    } else {
      // Per column: replaced by -inf (past S_kv) or by the filter (masked key).
      bool col_rep[kSNb][2];
      float col_val[kSNb][2];
#pragma unroll
      for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
        for (int cc = 0; cc < 2; ++cc) {
          const int j = k0 + nb * 8 + 2 * t + cc;
          const bool valid = j < a.Skv;
          const bool masked = valid && a.mask && col_masked[nb * 8 + 2 * t + cc];
          col_rep[nb][cc] = !valid || masked;
          col_val[nb][cc] = valid ? a.mask_filter_value : -INFINITY;
        }
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int row_a = warp_row0 + mt * 16 + g;
#pragma unroll
        for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int i = row_a + (c >> 1) * 8;
            const int j = k0 + nb * 8 + 2 * t + (c & 1);
            float v = s[mt][nb][c] * a.scale;
            const int64_t bias_idx = b * a.bias_sb + h * a.bias_sh + min(i, a.Sq - 1) * a.bias_si +
                                     min(j, a.Skv - 1) * a.bias_sj;
            if constexpr (kPrefetchBias) v = add_bias_t<T>(v, to_f(bias_r[mt][nb][c]));
            else if constexpr (BIAS_T) v = add_bias_t<T>(v, to_f(static_cast<const T*>(a.bias)[bias_idx]));
            else if (a.bias) v = bias_call(a.bias, a.bias_dtype, a.mask_filter_value, v, bias_idx);
            v = col_rep[nb][c & 1] ? col_val[nb][c & 1] : v;
            if (a.causal && j > i + causal_off) v = -INFINITY;
            if (a.window > 0 && i + causal_off - j >= a.window) v = -INFINITY;
            s[mt][nb][c] = v;
          }
      }
      if (tile + 1 < n_tiles) load_bias(k0 + kBc);  // bias_r is consumed: fetch the next tile's
    }
    float corr[MT][2], base[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nb = 0; nb < kSNb; ++nb)
#pragma unroll
        for (int c = 0; c < 4; ++c) tile_max[c >> 1] = fmaxf(tile_max[c >> 1], s[mt][nb][c]);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m_new = fmaxf(m[mt][r], tile_max[r]);
        // Nothing allowed yet: keep m = -inf, take no mass (avoids inf - inf).
        base[mt][r] = m_new == -INFINITY ? 0.f : m_new;
        corr[mt][r] = ex2((m[mt][r] - base[mt][r]) * kLog2e);
        m[mt][r] = m_new;
        l[mt][r] *= corr[mt][r];
      }
#pragma unroll
      for (int nb = 0; nb < kONb; ++nb) {
        o[mt][nb][0] *= corr[mt][0];
        o[mt][nb][1] *= corr[mt][0];
        o[mt][nb][2] *= corr[mt][1];
        o[mt][nb][3] *= corr[mt][1];
      }
    }

    // P (fp16/bf16 A fragments) and O += P·V; each V fragment feeds MT mmas.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pf[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        float p[2][4];
#pragma unroll
        for (int half = 0; half < 2; ++half)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const float e = ex2((s[mt][2 * kk + half][c] - base[mt][c >> 1]) * kLog2e);
            p[half][c] = e;
            l[mt][c >> 1] += e;
          }
        pf[mt][0] = MmaType<T>::pack(p[0][0], p[0][1]);
        pf[mt][1] = MmaType<T>::pack(p[0][2], p[0][3]);
        pf[mt][2] = MmaType<T>::pack(p[1][0], p[1][1]);
        pf[mt][3] = MmaType<T>::pack(p[1][2], p[1][3]);
      }
#pragma unroll
      for (int nb = 0; nb < kONb; nb += 2) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + nb * 8 + (lane >> 4) * 8);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(o[mt][nb], pf[mt], bf);
          mma16816<T>(o[mt][nb + 1], pf[mt], bf + 2);
        }
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  // Row sums across the quad, then O / l (l = 0: every score -inf, NaN like Softmax, or 0
  // with masked_rows_zero or a sink; m is the row's max, the same in the four threads of the quad).
  T* yb = static_cast<T*>(a.y) + int64_t(b) * a.Sq * a.H * D + int64_t(h) * D;
  const int64_t y_stride = int64_t(a.H) * D;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float lr = l[mt][r];
      lr += __shfl_xor_sync(0xffffffffu, lr, 1);
      lr += __shfl_xor_sync(0xffffffffu, lr, 2);
      float keep = 1.f;  // the sink joins the row's max and sum (join_sink); its column takes no value
      if (a.sinks) keep = join_sink(m[mt][r], a.sinks[h], lr);
      inv[r] = a.masked_rows_zero && m[mt][r] == -INFINITY ? 0.f : keep / lr;
    }
    const int row_a = warp_row0 + mt * 16 + g, row_b = row_a + 8;
#pragma unroll
    for (int nb = 0; nb < kONb; ++nb) {
      const int col = nb * 8 + 2 * t;
      if (row_a < a.Sq)
        *reinterpret_cast<uint32_t*>(yb + row_a * y_stride + col) =
            MmaType<T>::pack(o[mt][nb][0] * inv[0], o[mt][nb][1] * inv[0]);
      if (row_b < a.Sq)
        *reinterpret_cast<uint32_t*>(yb + row_b * y_stride + col) =
            MmaType<T>::pack(o[mt][nb][2] * inv[1], o[mt][nb][3] * inv[1]);
    }
  }
}

template <class T, int D, int MT, bool BIAS_T>
void launch_bias(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int kRowsBlk = kWarps * 16 * MT;
  constexpr size_t smem = sizeof(T) * size_t(kRowsBlk + 4 * kBc) * (D + 8);
  static bool configured = false;  // the attribute is per function; setting it twice is harmless
  if (!configured) {
    FUSED_CUDA_CHECK(cudaFuncSetAttribute(attention_mma_kernel<T, D, MT, BIAS_T>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                     "Attention");
    configured = true;
  }
  dim3 grid((a.Sq + kRowsBlk - 1) / kRowsBlk, a.H, a.B);
  cuda_pdl::pdl_launch(attention_mma_kernel<T, D, MT, BIAS_T>, grid, dim3(kThreads), smem, stream, a);
}

template <class T, int D, int MT>
void launch_t(const AttentionArgs& a, cudaStream_t stream) {
  if (a.bias && a.bias_dtype == a.dtype) launch_bias<T, D, MT, true>(a, stream);
  else launch_bias<T, D, MT, false>(a, stream);
}

// m-tiles per warp by head dim (register budget: O is MT·D/2 floats per
// thread); settable for tuning and for tests that cover both variants.
// Run 3 (NOTES-perf.md): D=64 mt1 45.7/40.9 us (causal) vs mt2 43.6/49.5 at 8x12x512;
// D=128 mt2 553 us vs mt1 635 at 4x16x2048 (mt2 spills 212 B but wins). Both tested.
int g_mt_d64 = 1, g_mt_d128 = 2;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool attention_mma_supported(const AttentionArgs& a) {
  if (a.dtype != DType::Float16 && a.dtype != DType::BFloat16) return false;
  if (a.Dh != a.Dv || (a.Dh != 64 && a.Dh != 128)) return false;
  // cp.async moves 16 bytes: every row start must be 16-byte aligned.
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.y)) return false;
  for (int64_t s : {a.q_batch_stride, a.q_seq_stride, a.k_batch_stride, a.k_seq_stride, a.v_batch_stride,
                    a.v_seq_stride, a.k_head_stride, a.v_head_stride})
    if (s % 8 != 0) return false;
  return true;
}

void attention_set_m_tiles(int mt_d64, int mt_d128) {
  g_mt_d64 = mt_d64 == 1 ? 1 : 2;
  g_mt_d128 = mt_d128 == 1 ? 1 : 2;
}

void launch_attention_mma(const AttentionArgs& args, cudaStream_t stream) {
  const AttentionArgs a = with_head_strides(args);
  const int mt = a.Dh == 64 ? g_mt_d64 : g_mt_d128;
  if (a.dtype == DType::Float16) {
    if (a.Dh == 64) mt == 2 ? launch_t<__half, 64, 2>(a, stream) : launch_t<__half, 64, 1>(a, stream);
    else mt == 2 ? launch_t<__half, 128, 2>(a, stream) : launch_t<__half, 128, 1>(a, stream);
  } else {
    if (a.Dh == 64) mt == 2 ? launch_t<__nv_bfloat16, 64, 2>(a, stream) : launch_t<__nv_bfloat16, 64, 1>(a, stream);
    else mt == 2 ? launch_t<__nv_bfloat16, 128, 2>(a, stream) : launch_t<__nv_bfloat16, 128, 1>(a, stream);
  }
}

}  // namespace fuseopt::cuda_fused
