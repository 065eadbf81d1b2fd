// Device side of the Hopper GEMM (gemm_hopper.cu; fused_matmul_layer_norm_hopper.cu reuses it): tile constants, the shared-
// memory layout, the kernel parameters, and the primitives its kernels share — TMA copies in and
// out (multicast too), cluster barriers, bulk-group waits, and the epilogue into the staging
// buffer the TMA store reads. sm_90a only where it is PTX.
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fused_attention_hopper_sync.cuh"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_hopper.h"

namespace fuseopt::cuda_fused {
namespace {

constexpr int kBM = 128;  // output rows per block: two consumer warpgroups of 64
constexpr int kBK = 64;   // K per stage: one 128-byte swizzle row of 16-bit elements

// OUT_N > 0: after the ring, a staging buffer for the output tile (the cooperative kernel's
// epilogue): 128 rows x OUT_N columns of OUT_E-byte values (Y's element: 2, or 4 for float Y) as
// panels of [128 rows][128 bytes] with the 128-byte swizzle, stored to Y by TMA.
template <int BN, int STAGES, int OUT_N = 0, int OUT_E = 2>
struct GemmLayout {
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = BN * kBK * 2;
  static constexpr int kStage = kABytes + kBBytes;  // a multiple of 1024: every tile swizzle-aligned
  static constexpr int kOffOut = STAGES * kStage;
  static constexpr int kOutBytes = kBM * OUT_N * OUT_E;
  static constexpr int kOffBar = kOffOut + kOutBytes;
  static constexpr int kBytes = kOffBar + 2 * STAGES * 8;
  static constexpr int kAlloc = kBytes + 1024;  // slack to align the base to 1024
};

struct GemmParams {
  int M, N, tiles_m, tiles, k_tiles;  // N: Y's columns (gated: half of B's)
  const void* bias;
  void* y;
  // The RMSNorm the kernel applies to A's rows (NORM, gemm_hopper_prenorm.cuh): mean over K, eps.
  int K;
  float norm_eps;
};

#if defined(FUSEOPT_HOPPER_DEVICE)
// 2-d tile copy global -> shared, completing on mbarrier `bar` (coordinates innermost first).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same copy multicast: the box lands at `dst` (and completes on `bar`) in every block of the
// cluster named in `mask`, at the same shared-memory offsets as in this block.
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                                      int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of the cluster's blocks (release/acquire: barrier inits become visible).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Arrives on the mbarrier at the same offset as `bar` in block `peer` of the cluster. The default
// release at CTA scope: what it orders is this warp's wgmma reads of its own block's stage (done
// at its wgmma wait) before the peer's next multicast into it. `.release.cluster` made every
// arrival a cluster-scope fence: ncu put "membar" first among the stalls (3.8-5.4 a
// instruction) and the cluster schedules 1.4-2x behind one block a tile (NOTES-perf.md v44).
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar, uint32_t peer) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(peer));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// 2-d tile copy shared -> global (a bulk group of this thread); out-of-bounds rows/columns of
// the box are not written.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
// bulk_commit, bulk_wait_read, bulk_wait_all, fence_async_shared: fused_attention_hopper_sync.cuh
// (the attention's epilogue stores the same way).
// The 128 threads of consumer warpgroup `wg` (named barriers 3 and 4).
__device__ __forceinline__ void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(3 + wg) : "memory");
}

// The activation on an fp32 value (the formulas of the passes it replaces: fused_elementwise.cu's
// erf-GELU, gated_matmul.cu's gate).
// A 16-bit pair (as loaded: two adjacent columns) as floats.
template <class T>
__device__ __forceinline__ float2 pair_to_float2(uint32_t u) {
  if constexpr (std::is_same_v<T, __half>) return __half22float2(*reinterpret_cast<const __half2*>(&u));
  else return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
}

// Two adjacent 16-bit values (4-byte aligned) as floats, through the read-only data path.
template <class T>
__device__ __forceinline__ float2 load_pair(const T* p) {
  return pair_to_float2<T>(__ldg(reinterpret_cast<const unsigned*>(p)));
}

// A compile-time choice: with the activation a run-time switch, the fully unrolled epilogue
// held every activation's code for each of its 64-128 values (~100 KB), and each tile's epilogue
// ran from instruction-cache misses (~10 us a 128 x 128 tile; session 14, call 2).
template <class T, int ACT>
__device__ __forceinline__ float apply_act(float v) {
  if constexpr (ACT == int(HopperGemmAct::Relu)) return v > 0.f ? v : (v == v ? 0.f : v);  // NaN stays NaN
  else if constexpr (ACT == int(HopperGemmAct::GeluErf)) return gelu_erf_for<T>(v);
  else if constexpr (ACT == int(HopperGemmAct::GeluTanh))
    return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  else if constexpr (ACT == int(HopperGemmAct::Silu)) return v / (1.f + __expf(-v));
  else if constexpr (ACT == int(HopperGemmAct::GeluErfExact)) return gelu_erf(v);
  else if constexpr (ACT == int(HopperGemmAct::Relu2))
    return v > 0.f ? v * v : (v == v ? 0.f : v);  // squared ReLU; NaN stays NaN
  else return v;
}

// A tile's bias pairs for one thread's columns col0 + 8j (j < kOutN / 8; gated: the up half's
// too), packed as loaded (zero bits, i.e. +0, where there is no bias or the column is past N).
// Loaded when the tile's main loop starts, so the L2 round trips run beside its MMAs: loaded in
// the epilogue, eight pairs at a time, each group of eight waited a round trip with the tensor
// cores idle (BERT FFN1 + erf-GELU: 36.6 us without a bias, 39.7 with one; NOTES-perf.md v44).
template <bool GATED, int kOutN>
struct TileBias {
  uint32_t g[kOutN / 8];
  uint32_t u[GATED ? kOutN / 8 : 1];
};
// An odd N (ROWS: a vocabulary's logits) ends on a pair whose second column does not exist: its
// first value is loaded alone (the pair's second half, never stored, is 0).
template <bool GATED, int kOutN>
__device__ __forceinline__ void load_tile_bias(TileBias<GATED, kOutN>& b, int col0, const GemmParams& p) {
  const unsigned* bias = static_cast<const unsigned*>(p.bias);  // pairs: col0 is even, bias 4-byte aligned
#pragma unroll
  for (int j = 0; j < kOutN / 8; ++j) {
    const int col = col0 + j * 8;
    const bool in = bias && col < p.N;
    b.g[j] = !in ? 0u
             : col + 1 < p.N ? __ldg(bias + col / 2)
                             : uint32_t(__ldg(reinterpret_cast<const unsigned short*>(bias) + col));
    if constexpr (GATED) b.u[j] = in ? __ldg(bias + (p.N + col) / 2) : 0u;  // gated: N % 8 == 0
  }
}

// The epilogue's values for column groups [J0, J0 + NJ) of the tile (8 columns each): + bias,
// the activation in fp32 (gated: times the up half), one rounding, as the 4-byte pairs
// v[j - J0][r] of this thread's rows row_local + 8r. Computed apart from the stores so that a
// pass's arithmetic runs while the previous pass's TMA store still reads the staging buffer.
template <class T, int ACT, bool GATED, int kOutN, int J0, int NJ, int kAcc>
__device__ __forceinline__ void epilogue_pairs(const float (&acc)[kAcc], const TileBias<GATED, kOutN>& b,
                                               uint32_t (&v)[NJ][2]) {
#pragma unroll
  for (int j = J0; j < J0 + NJ; ++j) {
    const float2 bg = pair_to_float2<T>(b.g[j]);
    float2 bu = make_float2(0.f, 0.f);
    if constexpr (GATED) bu = pair_to_float2<T>(b.u[j]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float v0 = apply_act<T, ACT>(acc[4 * j + 2 * r] + bg.x);
      float v1 = apply_act<T, ACT>(acc[4 * j + 2 * r + 1] + bg.y);
      if constexpr (GATED) {
        v0 *= acc[4 * (j + kOutN / 8) + 2 * r] + bu.x;
        v1 *= acc[4 * (j + kOutN / 8) + 2 * r + 1] + bu.y;
      }
      v[j - J0][r] = pack2<T>(v0, v1);
    }
  }
}

// epilogue_pairs' values into the staging buffer (GemmLayout's OUT_N panels, from panel 0):
// 16-byte chunk j % 8 of a 128-byte panel row at chunk (j % 8) ^ (row % 8) (the 128-byte swizzle
// the TMA store undoes), which also spreads a warp's 8 rows over all 32 banks. Rows and columns
// past M and N hold whatever they compute: the TMA store does not write them.
template <int NJ>
__device__ __forceinline__ void store_pairs(const uint32_t (&v)[NJ][2], uint32_t out, int row_local, int t4) {
  const uint32_t sw = uint32_t(row_local & 7);
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const uint32_t at = out + uint32_t(j / 8) * (kBM * 128) + uint32_t(row_local) * 128 + ((uint32_t(j % 8) ^ sw) << 4) +
                        uint32_t(t4) * 4;
#pragma unroll
    for (int r = 0; r < 2; ++r)
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at + uint32_t(r) * 8 * 128), "r"(v[j][r]) : "memory");
  }
}

// ROWS (Y's rows of any pitch, so no TMA store: the TMA writes 16-byte aligned runs only, an
// offset box is an illegal instruction, session 28 call 2). The warpgroup's 64 rows are staged
// row-major, 256 bytes a row (kOutS columns of YT), each row rotated by its misalignment `mis`
// (the byte offset of its first column from the 16-byte boundary before it): column j at byte
// (j · e + mis) mod 256, so every aligned 16-byte piece of Y's row is one 16-byte slot of the
// buffer (the first and the last piece, both partial, share slot 0 with complementary bytes).
// Slots are XOR-swizzled with row % 8 (rows 256 bytes apart would share banks). Values as in
// epilogue_pairs, written an element at a time (mis is a run-time value).
__device__ __forceinline__ uint32_t rows_slot(uint32_t row, uint32_t byte) {
  return row * 256 + ((((byte >> 4) & 15u) ^ (row & 7u)) << 4) + (byte & 15u);
}
template <class T, class YT, int ACT, int J0, int NJ, int kAcc, int kOutN>
__device__ __forceinline__ void stage_rows_shifted(const float (&acc)[kAcc], const TileBias<false, kOutN>& tb,
                                                   uint32_t out, int row0, int row1, uint32_t mis0, uint32_t mis1,
                                                   int t4) {
  constexpr uint32_t kE = sizeof(YT);
#pragma unroll
  for (int j = J0; j < J0 + NJ; ++j) {
    const float2 bj = pair_to_float2<T>(tb.g[j]);
    const float b0 = bj.x, b1 = bj.y;
    const uint32_t jb = uint32_t(((j - J0) * 8 + 2 * t4)) * kE;  // the pair's byte in the pass's row
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float v0 = apply_act<T, ACT>(acc[4 * j + 2 * r] + b0);
      const float v1 = apply_act<T, ACT>(acc[4 * j + 2 * r + 1] + b1);
      const uint32_t row = uint32_t(r ? row1 : row0), mis = r ? mis1 : mis0;
      const uint32_t a0 = out + rows_slot(row, (jb + mis) & 255u), a1 = out + rows_slot(row, (jb + kE + mis) & 255u);
      if constexpr (std::is_same_v<YT, float>) {
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(a0), "f"(v0) : "memory");
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(a1), "f"(v1) : "memory");
      } else {
        const uint32_t v = pack2<T>(v0, v1);
        asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(a0), "h"(uint16_t(v & 0xFFFFu)) : "memory");
        asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(a1), "h"(uint16_t(v >> 16)) : "memory");
      }
    }
  }
}

// The staged rows of one warpgroup to Y: 64 rows x up to 17 aligned 16-byte pieces, one piece a
// thread at a time (16-byte shared load, 16-byte global store); the partial first and last
// pieces (and a row's end at N) an element at a time. c0: the pass's first column; rows past M
// and columns past N are not written.
template <class YT>
__device__ __forceinline__ void copy_rows(uint32_t out, int wg, int tid, int m0, int c0, int cols,
                                          const GemmParams& p) {
  constexpr int kE = sizeof(YT);
  const int ncols = min(cols, p.N - c0);
  if (ncols <= 0) return;
  char* const y = static_cast<char*>(p.y);
  for (int task = tid; task < 64 * 17; task += 128) {
    const int r = task / 17, k = task % 17;
    const int m = m0 + wg * 64 + r;
    if (m >= p.M) continue;
    const uintptr_t gs = reinterpret_cast<uintptr_t>(y) + (uintptr_t(m) * uintptr_t(p.N) + uintptr_t(c0)) * kE;
    const uintptr_t ge = gs + uintptr_t(ncols) * kE;
    const uintptr_t first = gs & ~uintptr_t(15);
    const uintptr_t piece = first + 16u * uintptr_t(k);
    const uintptr_t lo = gs > piece ? gs : piece, hi = ge < piece + 16u ? ge : piece + 16u;
    if (lo >= hi) continue;
    const uint32_t row = uint32_t(wg * 64 + r);
    if (lo == piece && hi == piece + 16u) {
      uint4 v;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "r"(out + rows_slot(row, uint32_t(16 * k))));
      *reinterpret_cast<uint4*>(lo) = v;
    } else {
      for (uintptr_t b = lo; b < hi; b += kE) {
        const uint32_t at = out + rows_slot(row, uint32_t(b - first));
        if constexpr (kE == 4) {
          uint32_t v;
          asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(at));
          *reinterpret_cast<uint32_t*>(b) = v;
        } else {
          uint16_t v;
          asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(at));
          *reinterpret_cast<uint16_t*>(b) = v;
        }
      }
    }
  }
}
#endif

}  // namespace
}  // namespace fuseopt::cuda_fused
