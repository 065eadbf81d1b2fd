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

// The same pack writing fp32 (a float graph output of a 16-bit run, gemm_pack.h): each of the 8
// elements converted, then 16-, 8- or 4-byte stores as the destination's alignment allows (a
// 30522-float row starts at an 8-byte boundary every other row).
template <class T>
__global__ void pack_rows_fp32_kernel(const T* __restrict__ src, int64_t ld, float* __restrict__ y, int64_t rows,
                                      int64_t N) {
  pdl_begin();
  const int64_t chunks = (N + 7) / 8;
  const int64_t total = rows * chunks;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t m = i / chunks, c = (i - m * chunks) * 8;
    const Vec<T, 8> v = *reinterpret_cast<const Vec<T, 8>*>(src + m * ld + c);
    float f[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) f[k] = to_f(v.v[k]);
    float* out = y + m * N + c;
    const int n = static_cast<int>(N - c < 8 ? N - c : 8);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(out);
    if (n == 8 && addr % 16 == 0) {
      reinterpret_cast<float4*>(out)[0] = make_float4(f[0], f[1], f[2], f[3]);
      reinterpret_cast<float4*>(out)[1] = make_float4(f[4], f[5], f[6], f[7]);
    } else if (n == 8 && addr % 8 == 0) {
#pragma unroll
      for (int k = 0; k < 4; ++k) reinterpret_cast<float2*>(out)[k] = make_float2(f[2 * k], f[2 * k + 1]);
    } else {
      for (int k = 0; k < n; ++k) out[k] = f[k];
    }
  }
}

}  // namespace

void launch_pack_rows(DType dt, const void* src, int64_t ld, void* y, int64_t rows, int64_t N, cudaStream_t stream,
                      bool y_fp32) {
  FUSE_CHECK(dtype_size(dt) == 2 && ld >= N && ld % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0,
             "pack_rows: needs 2-byte elements and 16-byte aligned source rows (ld " << ld << ", N " << N << ")");
  FUSE_CHECK(!y_fp32 || reinterpret_cast<uintptr_t>(y) % 4 == 0, "pack_rows: fp32 Y must be 4-byte aligned");
  const int64_t total = rows * ((N + 7) / 8);
  if (total == 0) return;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 65536 ? blocks : 65536));
  if (!y_fp32)
    pdl_launch(pack_rows_kernel, grid, dim3(kThreads), 0, stream, static_cast<const uint16_t*>(src), ld,
               static_cast<uint16_t*>(y), rows, N);
  else if (dt == DType::Float16)
    pdl_launch(pack_rows_fp32_kernel<__half>, grid, dim3(kThreads), 0, stream, static_cast<const __half*>(src), ld,
               static_cast<float*>(y), rows, N);
  else
    pdl_launch(pack_rows_fp32_kernel<__nv_bfloat16>, grid, dim3(kThreads), 0, stream,
               static_cast<const __nv_bfloat16*>(src), ld, static_cast<float*>(y), rows, N);
  FUSED_LAUNCH_CHECK("GEMM output row pack");
}

}  // namespace fuseopt::cuda_fused
