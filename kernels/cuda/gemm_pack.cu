// launch_pack_rows (gemm_pack.h). Threads walk Y as one flat array of rows × N
// elements in 16-byte pieces of Y's own alignment, so every store is a full
// aligned vector (Y's first and last pieces excepted) and a warp writes 512
// contiguous bytes; the source elements of a piece (one row, or the end of one
// and the start of the next) are read one by one, which a warp still reads as
// contiguous bytes. The first form walked the source rows 8 elements a thread
// and stored as Y's row alignment allowed: with N odd (GPT-2's 50257) most rows
// start at 4- or 2-byte boundaries and a warp's scalar stores hit 32 sectors per
// instruction; its fp32 pack of 4096 × 50257 logits took 1.39 ms on an H100
// (NOTES-perf.md v32). (Session 6 packed with cudaMemcpy2DAsync and kept N
// unsplit; that was slower end to end, for reasons not isolated: v12.)
#include <cstdint>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_pack.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt::cuda_fused {

namespace {

using cuda_pdl::pdl_begin;
using cuda_pdl::pdl_launch;

constexpr int kThreads = 256;

// O: Y's element (uint16_t copies 16-bit values as they are, float converts).
template <class T, class O>
__device__ __forceinline__ O pack_convert(T v) {
  if constexpr (sizeof(O) == sizeof(T)) return v;
  else return to_f(v);
}

// Y's flat elements [piece·kPer − lead, piece·kPer − lead + kPer) for each piece: `lead` is
// how many elements Y starts past the 16-byte boundary below it.
template <class T, class O>
__global__ void pack_rows_kernel(const T* __restrict__ src, int64_t ld, O* __restrict__ y, int64_t rows,
                                 int64_t N, int lead) {
  pdl_begin();
  constexpr int kPer = 16 / sizeof(O);
  const int64_t total = rows * N;
  const int64_t pieces = (total + lead + kPer - 1) / kPer;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pieces; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e0 = p * kPer - lead;  // flat index of the piece's first element (may be < 0)
    const int64_t first = e0 < 0 ? 0 : e0;
    int64_t m = first / N, n = first - m * N;
    alignas(16) O v[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t e = e0 + k;
      if (e >= first && e < total) {
        v[k] = pack_convert<T, O>(src[m * ld + n]);
        if (++n == N) n = 0, ++m;
      }
    }
    if (e0 >= 0 && e0 + kPer <= total) {
      *reinterpret_cast<uint4*>(y + e0) = *reinterpret_cast<const uint4*>(v);
    } else {
#pragma unroll
      for (int k = 0; k < kPer; ++k)
        if (e0 + k >= 0 && e0 + k < total) y[e0 + k] = v[k];
    }
  }
}

template <class T, class O>
void launch_flat(const void* src, int64_t ld, void* y, int64_t rows, int64_t N, cudaStream_t stream) {
  constexpr int kPer = 16 / sizeof(O);
  const int lead = static_cast<int>(reinterpret_cast<uintptr_t>(y) % 16 / sizeof(O));
  const int64_t pieces = (rows * N + lead + kPer - 1) / kPer;
  const int64_t blocks = (pieces + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 65536 ? blocks : 65536));
  pdl_launch(pack_rows_kernel<T, O>, grid, dim3(kThreads), 0, stream, static_cast<const T*>(src), ld,
             static_cast<O*>(y), rows, N, lead);
}

}  // namespace

void launch_pack_rows(DType dt, const void* src, int64_t ld, void* y, int64_t rows, int64_t N, cudaStream_t stream,
                      bool y_fp32) {
  FUSE_CHECK(dtype_size(dt) == 2 && ld >= N && N > 0,
             "pack_rows: needs 2-byte elements and ld >= N (ld " << ld << ", N " << N << ")");
  FUSE_CHECK(reinterpret_cast<uintptr_t>(y) % (y_fp32 ? 4 : 2) == 0, "pack_rows: Y is not aligned to its element");
  if (rows == 0) return;
  if (!y_fp32)
    launch_flat<uint16_t, uint16_t>(src, ld, y, rows, N, stream);
  else if (dt == DType::Float16)
    launch_flat<__half, float>(src, ld, y, rows, N, stream);
  else
    launch_flat<__nv_bfloat16, float>(src, ld, y, rows, N, stream);
  FUSED_LAUNCH_CHECK("GEMM output row pack");
}

}  // namespace fuseopt::cuda_fused
