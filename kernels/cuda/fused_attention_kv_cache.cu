// KV-cache append for fuseopt.Attention (host side: fused_attention_kernel.cc). One launch
// (K and V as the grid's two z slices, launch_kv_append_pair) or one per tensor writes
// present[b, h, t, :] = past[b, h, t, :] for t < S_past, else the new row
// new[b, t - S_past, h, :] (read through its sequence / batch strides, so packed QKV works).
// The attention kernels then read the present in place through their K/V head strides
// (AttentionArgs::k_head_stride = S_total·D), so no second, re-laid-out copy is written.
// Elements are moved as raw 16-byte chunks where rows and strides allow it, else 2- or 4-byte words.
// present_rows (rows per (b, h) in the present's memory) lets a session-held KV cache append in
// place: the caller passes Sp = 0 and the cache's row Sp_old as `present`, so only the new rows move.
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/pdl.cuh"
#include "util/error.h"

namespace fuseopt::cuda_fused {
namespace {

template <class W>
__global__ void kv_append_kernel(const W* past, const W* now, int64_t now_seq, int64_t now_batch, W* present,
                                 int64_t Hkv, int64_t Sp, int64_t St, int64_t D, int64_t n, int64_t PR) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  CUDA_GRID_STRIDE(i, n) {
    const int64_t d = i % D;
    int64_t r = i / D;
    const int64_t t = r % St;
    r /= St;
    const int64_t h = r % Hkv;
    const int64_t b = r / Hkv;
    present[((b * Hkv + h) * PR + t) * D + d] =
        t < Sp ? past[((b * Hkv + h) * Sp + t) * D + d] : now[b * now_batch + (t - Sp) * now_seq + h * D + d];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// One KvAppend in 16-byte words (D, now_seq, now_batch in words; n = B·Hkv·St·D).
struct KvWords {
  const uint4* past;
  const uint4* now;
  int64_t now_seq, now_batch, D, n, Hkv;
  uint4* present;
  int64_t present_words;  // per (b, h) in the present's memory: present_rows · D
};

// K (blockIdx.z 0) and V (1) in one launch, one (b, h) per blockIdx.y: a decode step appends
// one row to each, and two launches of ~3 µs cost more than the bytes they move. Per (b, h)
// the present's first Sp·D words are the past's, contiguous, so most of the work is a straight
// copy; only the new rows need index arithmetic. Each thread moves kWordsPerThread 16-byte
// words with every load issued before any store (session 8's ncu: the grid-stride form with
// three 64-bit divisions per word moved 8 MB in 11 µs at 2048 cached tokens). Block (0, 0, 0)
// also zeroes `zero` (the decode kernel's arrival counters), which is ready when this grid is.
constexpr int kWordsPerThread = 4;

__global__ void kv_append_pair_kernel(KvWords k, KvWords v, int64_t Sp, int64_t St, uint4* zero, int zero_words) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  const KvWords& j = blockIdx.z == 0 ? k : v;
  const int64_t bh = blockIdx.y;
  const int64_t C = j.D, past_words = Sp * C, words = St * C;
  const uint4* past = j.past + bh * past_words;
  uint4* present = j.present + bh * j.present_words;
  const int64_t b = bh / j.Hkv, h = bh % j.Hkv;
  const int64_t first = (int64_t(blockIdx.x) * blockDim.x * kWordsPerThread) + threadIdx.x;
  uint4 w[kWordsPerThread];
#pragma unroll
  for (int u = 0; u < kWordsPerThread; ++u) {
    const int64_t i = first + int64_t(u) * blockDim.x;
    if (i < past_words) {
      w[u] = past[i];
    } else if (i < words) {
      const int64_t t = (i - past_words) / C, d = (i - past_words) - t * C;
      w[u] = j.now[b * j.now_batch + t * j.now_seq + h * C + d];
    }
  }
#pragma unroll
  for (int u = 0; u < kWordsPerThread; ++u) {
    const int64_t i = first + int64_t(u) * blockDim.x;
    if (i < words) present[i] = w[u];
  }
  if (zero && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
    for (int i = threadIdx.x; i < zero_words; i += blockDim.x) zero[i] = make_uint4(0, 0, 0, 0);
}

// The append as 16-byte words, when its rows, strides and pointers allow it.
bool as_words(const KvAppend& a, size_t elem_size, int64_t B, int64_t Hkv, int64_t St, KvWords* w) {
  const int64_t esz = static_cast<int64_t>(elem_size), row_bytes = a.D * esz;
  if (row_bytes % 16 != 0 || (a.now_seq * esz) % 16 != 0 || (a.now_batch * esz) % 16 != 0 || !aligned16(a.past) ||
      !aligned16(a.now) || !aligned16(a.present))
    return false;
  const int64_t per16 = 16 / esz;
  *w = KvWords{static_cast<const uint4*>(a.past), static_cast<const uint4*>(a.now), a.now_seq / per16,
               a.now_batch / per16, row_bytes / 16, B * Hkv * St * (row_bytes / 16), Hkv, static_cast<uint4*>(a.present),
               (a.present_rows > 0 ? a.present_rows : St) * (row_bytes / 16)};
  return true;
}

}  // namespace

void launch_kv_append_pair(size_t elem_size, const KvAppend& k, const KvAppend& v, int64_t B, int64_t Hkv, int64_t Sp,
                           int64_t St, cudaStream_t stream, void* zero, size_t zero_bytes) {
  KvWords wk{}, wv{};
  const bool zero_ok = !zero || (aligned16(zero) && zero_bytes % 16 == 0 && zero_bytes < (size_t(1) << 30));
  if (B * Hkv * St > 0 && B * Hkv < 65536 && zero_ok && as_words(k, elem_size, B, Hkv, St, &wk) &&
      as_words(v, elem_size, B, Hkv, St, &wv)) {
    const int64_t per_block = int64_t(cuda::kThreads) * kWordsPerThread;
    const int64_t row_words = St * (wk.D > wv.D ? wk.D : wv.D);
    const dim3 grid(static_cast<unsigned>((row_words + per_block - 1) / per_block), static_cast<unsigned>(B * Hkv), 2);
    cuda_pdl::pdl_launch(kv_append_pair_kernel, grid, dim3(cuda::kThreads), 0, stream, wk, wv, Sp, St,
                         static_cast<uint4*>(zero), static_cast<int>(zero ? zero_bytes / 16 : 0));
    return;
  }
  if (zero) FUSE_CHECK(cudaMemsetAsync(zero, 0, zero_bytes, stream) == cudaSuccess, "KV append: zeroing failed");
  launch_kv_append(elem_size, k.past, k.now, k.now_seq, k.now_batch, k.present, B, Hkv, Sp, St, k.D, stream,
                   k.present_rows);
  launch_kv_append(elem_size, v.past, v.now, v.now_seq, v.now_batch, v.present, B, Hkv, Sp, St, v.D, stream,
                   v.present_rows);
}

void launch_kv_append(size_t elem_size, const void* past, const void* now, int64_t now_seq, int64_t now_batch,
                      void* present, int64_t B, int64_t Hkv, int64_t Sp, int64_t St, int64_t D, cudaStream_t stream,
                      int64_t present_rows) {
  const int64_t n = B * Hkv * St * D;
  const int64_t PR = present_rows > 0 ? present_rows : St;
  if (n == 0) return;
  const int64_t row_bytes = D * static_cast<int64_t>(elem_size);
  if (row_bytes % 16 == 0 && (now_seq * static_cast<int64_t>(elem_size)) % 16 == 0 &&
      (now_batch * static_cast<int64_t>(elem_size)) % 16 == 0 && aligned16(past) && aligned16(now) && aligned16(present)) {
    const int64_t per16 = 16 / static_cast<int64_t>(elem_size);  // elements per chunk
    const int64_t C = row_bytes / 16, nv = B * Hkv * St * C;
    // The same kernel over 16-byte words (C per row): the index arithmetic runs once per 16
    // bytes instead of once per element, which made the per-element copy slower than the bytes
    // it moves for thousands of cached tokens.
    cuda_pdl::pdl_launch(kv_append_kernel<uint4>, dim3(cuda::grid_for(nv)), dim3(cuda::kThreads), 0, stream,
        static_cast<const uint4*>(past), static_cast<const uint4*>(now), now_seq / per16, now_batch / per16,
        static_cast<uint4*>(present), Hkv, Sp, St, C, nv, PR);
    return;
  }
  const unsigned grid = cuda::grid_for(n);
  if (elem_size == 2) {
    cuda_pdl::pdl_launch(kv_append_kernel<uint16_t>, dim3(grid), dim3(cuda::kThreads), 0, stream,
                         static_cast<const uint16_t*>(past), static_cast<const uint16_t*>(now), now_seq, now_batch,
                         static_cast<uint16_t*>(present), Hkv, Sp, St, D, n, PR);
  } else if (elem_size == 4) {
    cuda_pdl::pdl_launch(kv_append_kernel<uint32_t>, dim3(grid), dim3(cuda::kThreads), 0, stream,
                         static_cast<const uint32_t*>(past), static_cast<const uint32_t*>(now), now_seq, now_batch,
                         static_cast<uint32_t*>(present), Hkv, Sp, St, D, n, PR);
  } else {
    FUSE_CHECK(false, "Attention KV append: element size " << elem_size << " not supported");
  }
}

}  // namespace fuseopt::cuda_fused
