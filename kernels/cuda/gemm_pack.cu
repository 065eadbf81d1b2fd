// launch_pack_rows (gemm_pack.h). One thread moves 8 elements: one 16-byte
// load from the aligned padded row, then the widest stores the destination's
// alignment allows (16, 4 or 2 bytes). A warp's stores cover 512 contiguous
// bytes whatever their width, so DRAM sees full sectors. (Session 6 packed
// with cudaMemcpy2DAsync and kept N unsplit; that was slower end to end, for
// reasons not isolated: NOTES-perf.md v12.)
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

__global__ void pack_rows_kernel(const uint16_t* __restrict__ src, int64_t ld, uint16_t* __restrict__ y,
                                 int64_t rows, int64_t N) {
  pdl_begin();
  const int64_t chunks = (N + 7) / 8;  // per row
  const int64_t total = rows * chunks;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / chunks, c = (i - m * chunks) * 8;
    const uint4 v = *reinterpret_cast<const uint4*>(src + m * ld + c);  // ld % 8 == 0: aligned, in the row
    uint16_t* out = y + m * N + c;
    const int n = static_cast<int>(N - c < 8 ? N - c : 8);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(out);
    if (n == 8 && addr % 16 == 0) {
      *reinterpret_cast<uint4*>(out) = v;
    } else if (n == 8 && addr % 4 == 0) {
      uint32_t* o = reinterpret_cast<uint32_t*>(out);
      o[0] = v.x;
      o[1] = v.y;
      o[2] = v.z;
      o[3] = v.w;
    } else {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
      for (int k = 0; k < n; ++k) out[k] = h[k];
    }
  }
}

}  // namespace

void launch_pack_rows(DType dt, const void* src, int64_t ld, void* y, int64_t rows, int64_t N, cudaStream_t stream) {
  FUSE_CHECK(dtype_size(dt) == 2 && ld >= N && ld % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0,
             "pack_rows: needs 2-byte elements and 16-byte aligned source rows (ld " << ld << ", N " << N << ")");
  const int64_t total = rows * ((N + 7) / 8);
  if (total == 0) return;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  pdl_launch(pack_rows_kernel, dim3(static_cast<unsigned>(blocks < 65536 ? blocks : 65536)), dim3(kThreads), 0,
             stream, static_cast<const uint16_t*>(src), ld, static_cast<uint16_t*>(y), rows, N);
  FUSED_LAUNCH_CHECK("GEMM output row pack");
}

}  // namespace fuseopt::cuda_fused
