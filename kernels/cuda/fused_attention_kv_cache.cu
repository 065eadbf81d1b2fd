// KV-cache append for fuseopt.Attention (host side: fused_attention_kernel.cc). One launch
// (K and V as the grid's two y slices, launch_kv_append_pair) or one per tensor writes present[b, h, t, :] = past[b, h, t, :] for t < S_past, else the new row
// new[b, t - S_past, h, :] (read through its sequence / batch strides, so packed QKV works).
// The attention kernels then read the present in place through their K/V head strides
// (AttentionArgs::k_head_stride = S_total·D), so no second, re-laid-out copy is written.
// Elements are moved as raw 16-byte chunks where rows and strides allow it, else 2- or 4-byte words.
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/pdl.cuh"
#include "util/error.h"

namespace fuseopt::cuda_fused {
namespace {

template <class W>
__global__ void kv_append_kernel(const W* past, const W* now, int64_t now_seq, int64_t now_batch, W* present,
                                 int64_t Hkv, int64_t Sp, int64_t St, int64_t D, int64_t n) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  CUDA_GRID_STRIDE(i, n) {
    const int64_t d = i % D;
    int64_t r = i / D;
    const int64_t t = r % St;
    r /= St;
    const int64_t h = r % Hkv;
    const int64_t b = r / Hkv;
    present[i] = t < Sp ? past[((b * Hkv + h) * Sp + t) * D + d] : now[b * now_batch + (t - Sp) * now_seq + h * D + d];
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// One KvAppend in 16-byte words (D, now_seq, now_batch in words; n = B·Hkv·St·D).
struct KvWords {
  const uint4* past;
  const uint4* now;
  int64_t now_seq, now_batch, D, n;
  uint4* present;
};

// kv_append_kernel<uint4> for K (blockIdx.y 0) and V (1) in one launch: a decode step
// appends one row to each, and two launches of ~3 us cost more than the bytes they move.
__global__ void kv_append_pair_kernel(KvWords k, KvWords v, int64_t Hkv, int64_t Sp, int64_t St) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  const KvWords& j = blockIdx.y == 0 ? k : v;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < j.n; i += int64_t(blockDim.x) * gridDim.x) {
    const int64_t d = i % j.D;
    int64_t r = i / j.D;
    const int64_t t = r % St;
    r /= St;
    const int64_t h = r % Hkv;
    const int64_t b = r / Hkv;
    j.present[i] = t < Sp ? j.past[((b * Hkv + h) * Sp + t) * j.D + d]
                          : j.now[b * j.now_batch + (t - Sp) * j.now_seq + h * j.D + d];
  }
}

// The append as 16-byte words, when its rows, strides and pointers allow it.
bool as_words(const KvAppend& a, size_t elem_size, int64_t B, int64_t Hkv, int64_t St, KvWords* w) {
  const int64_t esz = static_cast<int64_t>(elem_size), row_bytes = a.D * esz;
  if (row_bytes % 16 != 0 || (a.now_seq * esz) % 16 != 0 || (a.now_batch * esz) % 16 != 0 || !aligned16(a.past) ||
      !aligned16(a.now) || !aligned16(a.present))
    return false;
  const int64_t per16 = 16 / esz;
  *w = KvWords{static_cast<const uint4*>(a.past), static_cast<const uint4*>(a.now), a.now_seq / per16,
               a.now_batch / per16, row_bytes / 16, B * Hkv * St * (row_bytes / 16), static_cast<uint4*>(a.present)};
  return true;
}

}  // namespace

void launch_kv_append_pair(size_t elem_size, const KvAppend& k, const KvAppend& v, int64_t B, int64_t Hkv, int64_t Sp,
                           int64_t St, cudaStream_t stream) {
  KvWords wk{}, wv{};
  if (B * Hkv * St > 0 && as_words(k, elem_size, B, Hkv, St, &wk) && as_words(v, elem_size, B, Hkv, St, &wv)) {
    const unsigned gx = cuda::grid_for(wk.n > wv.n ? wk.n : wv.n);
    cuda_pdl::pdl_launch(kv_append_pair_kernel, dim3(gx, 2), dim3(cuda::kThreads), 0, stream, wk, wv, Hkv, Sp, St);
    return;
  }
  launch_kv_append(elem_size, k.past, k.now, k.now_seq, k.now_batch, k.present, B, Hkv, Sp, St, k.D, stream);
  launch_kv_append(elem_size, v.past, v.now, v.now_seq, v.now_batch, v.present, B, Hkv, Sp, St, v.D, stream);
}

void launch_kv_append(size_t elem_size, const void* past, const void* now, int64_t now_seq, int64_t now_batch,
                      void* present, int64_t B, int64_t Hkv, int64_t Sp, int64_t St, int64_t D, cudaStream_t stream) {
  const int64_t n = B * Hkv * St * D;
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
        static_cast<uint4*>(present), Hkv, Sp, St, C, nv);
    return;
  }
  const unsigned grid = cuda::grid_for(n);
  if (elem_size == 2) {
    cuda_pdl::pdl_launch(kv_append_kernel<uint16_t>, dim3(grid), dim3(cuda::kThreads), 0, stream,
                         static_cast<const uint16_t*>(past), static_cast<const uint16_t*>(now), now_seq, now_batch,
                         static_cast<uint16_t*>(present), Hkv, Sp, St, D, n);
  } else if (elem_size == 4) {
    cuda_pdl::pdl_launch(kv_append_kernel<uint32_t>, dim3(grid), dim3(cuda::kThreads), 0, stream,
                         static_cast<const uint32_t*>(past), static_cast<const uint32_t*>(now), now_seq, now_batch,
                         static_cast<uint32_t*>(present), Hkv, Sp, St, D, n);
  } else {
    FUSE_CHECK(false, "Attention KV append: element size " << elem_size << " not supported");
  }
}

}  // namespace fuseopt::cuda_fused
