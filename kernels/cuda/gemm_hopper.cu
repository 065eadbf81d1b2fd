// Hopper (sm_90a) GEMM with a fused epilogue: Y = act(A · B + bias), fp16/bf16 in and out,
// fp32 accumulation (gemm_hopper.h says why it exists: cuBLASLt has no exact-GELU epilogue).
//
// Block = one producer warpgroup (its first thread issues the TMA copies; setmaxnreg gives its
// registers to the others) + two consumer warpgroups, each 64 rows of a 128 x BN output tile
// (BN 128 or 256: one wgmma m64nBNk16 per 16 of K per warpgroup, the accumulator BN/2 floats
// a thread). A [128 x 64] and B [64 x BN] tiles reach shared memory by TMA (128-byte swizzle,
// zero-filled past M, N and K) through a STAGES-deep ring of mbarriers: full (the copy's bytes
// landed), empty (the 8 consumer warps are done with the stage). B is read in the layout it is
// stored in: [N, K] rows are the K-major operand wgmma takes directly; [K, N] rows (an ONNX
// MatMul weight) are the MN-major operand (transpose bit), loaded as 64-column panels, so no
// transposed copy of the weight exists. Persistent: one block per SM walks the output tiles
// (M fastest, so the blocks running at once share B's tile in L2); the ring runs on across
// tiles, so the producer loads the next tile while the consumers run the epilogue.
// Epilogue straight from the accumulators: + bias, the activation in fp32, one rounding, 4-byte
// stores of column pairs (rows past M and columns past N are not written).
// Only the sm_90a image holds the kernel body (CMakeLists.txt compiles this file for it besides
// sm_90); the host side checks at run time that the device loaded that image (hopper_device.h).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kernels/cuda/fused_attention_hopper_sync.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_hopper.h"
#include "kernels/cuda/gemm_hopper_wgmma.cuh"
#include "kernels/cuda/hopper_device.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_encode.h"

namespace fuseopt::cuda_fused {
namespace {

constexpr int kBM = 128;  // output rows per block: two consumer warpgroups of 64
constexpr int kBK = 64;   // K per stage: one 128-byte swizzle row of 16-bit elements

template <int BN, int STAGES>
struct GemmLayout {
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = BN * kBK * 2;
  static constexpr int kStage = kABytes + kBBytes;  // a multiple of 1024: every tile swizzle-aligned
  static constexpr int kOffBar = STAGES * kStage;
  static constexpr int kBytes = kOffBar + 2 * STAGES * 8;
  static constexpr int kAlloc = kBytes + 1024;  // slack to align the base to 1024
};

struct GemmParams {
  int M, N, tiles_m, tiles, k_tiles;  // N: Y's columns (gated: half of B's)
  const void* bias;
  void* y;
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

// The activation on an fp32 value (the formulas of the passes it replaces: fused_elementwise.cu's
// erf-GELU, gated_matmul.cu's gate).
// Two adjacent 16-bit values (4-byte aligned) as floats, through the read-only data path.
template <class T>
__device__ __forceinline__ float2 load_pair(const T* p) {
  const unsigned u = __ldg(reinterpret_cast<const unsigned*>(p));
  if constexpr (sizeof(T) == 2 && std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
  }
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
#endif

// GATED: B holds 2N columns (gate, then up); a block's BN columns of B are the gate's
// [n0, n0 + BN/2) and the up's [N + n0, N + n0 + BN/2), and it writes Y's [n0, n0 + BN/2) as
// act(gate + bias) * (up + bias'): fuseopt.GatedMatMul without its [M, 2N] product in memory.
template <class T, int BN, bool B_NK, int STAGES, bool GATED, int ACT>
__global__ void __launch_bounds__(384, 1)
    gemm_hopper_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                       const GemmParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  using namespace hopper;
  // Launched with programmatic dependent launch: no copy or store before the previous kernel ends.
  cuda_pdl::pdl_begin();
  using L = GemmLayout<BN, STAGES>;
  constexpr int kOutN = GATED ? BN / 2 : BN;  // Y columns a tile writes
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  const uint32_t bar = base + L::kOffBar;
  auto full = [&](int s) { return bar + 8u * s; };
  auto empty = [&](int s) { return bar + 8u * (STAGES + s); };
  auto tile_a = [&](int s) { return base + s * L::kStage; };
  auto tile_b = [&](int s) { return base + s * L::kStage + L::kABytes; };

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8);  // lane 0 of each consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x != 0) return;
    int it = 0;
    for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
      const int m0 = (t % p.tiles_m) * kBM, n0 = (t / p.tiles_m) * kOutN;
      for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(empty(s), ((it / STAGES) - 1) & 1);
        mbar_arrive_tx(full(s), L::kStage);  // boxes past the edges still deliver their (zero) bytes
        tma_load_2d(tile_a(s), &tm_a, full(s), kt * kBK, m0);
        if constexpr (B_NK && !GATED) {
          tma_load_2d(tile_b(s), &tm_b, full(s), kt * kBK, n0);  // [BN rows][64 of K]
        } else if constexpr (B_NK) {
          tma_load_2d(tile_b(s), &tm_b, full(s), kt * kBK, n0);  // gate rows, then up rows
          tma_load_2d(tile_b(s) + (BN / 2) * 128, &tm_b, full(s), kt * kBK, p.N + n0);
        } else {
#pragma unroll
          for (int pn = 0; pn < BN / 64; ++pn) {  // panels of [64 of K][64 columns]
            const int col = GATED && pn >= BN / 128 ? p.N + n0 + (pn - BN / 128) * 64 : n0 + pn * 64;
            tma_load_2d(tile_b(s) + pn * kBK * 128, &tm_b, full(s), col, kt * kBK);
          }
        }
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int ct = threadIdx.x - 128;
  const int wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  float acc[BN / 2];  // column 8j + 2·t4 + (c & 1), row g + 8·(c >> 1) of the warp's 16, at acc[4j + c]
  const T* __restrict__ bias = static_cast<const T*>(p.bias);
  T* __restrict__ y = static_cast<T*>(p.y);
  int it = 0;
  for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const int m0 = (t % p.tiles_m) * kBM, n0 = (t / p.tiles_m) * kOutN;
    for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(full(s), (it / STAGES) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const uint64_t da = make_desc(tile_a(s) + wg * 64 * 128 + kk * 32, 16);
        // K-major B: 16 of K are 32 bytes along its rows; MN-major: 16 rows down every panel,
        // the panels kBK · 128 bytes apart (the leading byte offset).
        const uint64_t db = B_NK ? make_desc(tile_b(s) + kk * 32, 16) : make_desc(tile_b(s) + kk * 16 * 128, kBK * 128);
        hopper_gemm::GemmMma<T, BN, !B_NK>::run(acc, da, db, kt > 0 || kk > 0);
      }
      wgmma_commit();
      // The previous stage's MMAs are done once at most this one is in flight: free it.
      wgmma_wait<1>();
      if (kt > 0) {
        __syncwarp();
        if (lane == 0) mbar_arrive(empty((it - 1) % STAGES));
      }
    }
    wgmma_wait<0>();
    fence_regs(acc);
    __syncwarp();
    if (lane == 0 && p.k_tiles > 0) mbar_arrive(empty((it - 1) % STAGES));

    // Epilogue, 8 column groups at a time: their bias pairs are loaded first, all at once (one
    // 4-byte read each, through the read-only path), then the 8 groups are computed and stored.
    // Loading each pair just before its stores made every group wait a full L2 round trip (the
    // compiler cannot move a load of `bias` above a store to `y`): ~11 us a 128 x 128 tile,
    // 3x the tile's MMAs (session 14, call 1).
    const int row_a = m0 + wg * 64 + warp * 16 + g;
    constexpr int kChunk = 8;
#pragma unroll
    for (int jc = 0; jc < kOutN / 8; jc += kChunk) {
      float2 bg[kChunk], bu[kChunk];
#pragma unroll
      for (int jj = 0; jj < kChunk; ++jj) {
        const int col = n0 + (jc + jj) * 8 + 2 * t4;
        bg[jj] = bu[jj] = make_float2(0.f, 0.f);
        if (bias && col < p.N) {
          bg[jj] = load_pair<T>(bias + col);
          if constexpr (GATED) bu[jj] = load_pair<T>(bias + p.N + col);
        }
      }
#pragma unroll
      for (int jj = 0; jj < kChunk; ++jj) {
        const int j = jc + jj;
        const int col = n0 + j * 8 + 2 * t4;
        if (col >= p.N) continue;  // N is a multiple of 8: a pair is all in or all out
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int row = row_a + 8 * r;
          if (row < p.M) {
            float v0 = apply_act<T, ACT>(acc[4 * j + 2 * r] + bg[jj].x);
            float v1 = apply_act<T, ACT>(acc[4 * j + 2 * r + 1] + bg[jj].y);
            if constexpr (GATED) {  // the up half: the same columns kOutN further on
              v0 *= acc[4 * (j + kOutN / 8) + 2 * r] + bu[jj].x;
              v1 *= acc[4 * (j + kOutN / 8) + 2 * r + 1] + bu[jj].y;
            }
            *reinterpret_cast<uint32_t*>(y + int64_t(row) * p.N + col) = pack2<T>(v0, v1);
          }
        }
      }
    }
  }
#endif  // FUSEOPT_HOPPER_DEVICE
}

// ---------------- host side ----------------

int g_mode = -2;  // -2: read the environment once; -1 default; 0 off; 1 the intended GEMMs; 2 every one it fits
int g_tile_n = 0;  // 0 by shape
std::atomic<long long> g_launches{0};

int mode() {
  if (g_mode == -2) {
    const char* e = std::getenv("FUSEOPT_HOPPER_GEMM");
    const std::string v = e ? e : "";
    g_mode = v.empty() ? -1 : v == "0" ? 0 : v == "all" ? 2 : 1;
  }
  return g_mode;
}

bool aligned(const void* p, uintptr_t n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

// A 2-d view [rows][cols] (cols contiguous, row pitch `pitch` elements) in boxes of
// box_cols x box_rows, 128-byte swizzle, zero fill out of bounds.
bool make_map_2d(CUtensorMap* map, DType dt, const void* ptr, int64_t rows, int64_t cols, int64_t pitch,
                 int box_cols, int box_rows) {
  auto encode = tma_encode_tiled();
  if (!encode) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(pitch) * 2};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t estr[2] = {1, 1};
  return encode(map, dt == DType::Float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <class T, int BN, bool B_NK, bool GATED, int ACT>
bool launch_t(const HopperGemm& g, cudaStream_t stream) {
  constexpr int kStages = BN == 256 ? 4 : 6;
  constexpr int kOutN = GATED ? BN / 2 : BN;
  using L = GemmLayout<BN, kStages>;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  auto kernel = gemm_hopper_kernel<T, BN, B_NK, kStages, GATED, ACT>;
  static std::atomic<bool> configured{false};
  if (!configured.load()) {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kAlloc) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    configured.store(true);
  }
  const int64_t nb = GATED ? 2 * g.N : g.N;  // B's columns
  CUtensorMap ta, tb;
  if (!make_map_2d(&ta, g.dt, g.a, g.M, g.K, g.K, kBK, kBM)) return false;
  const bool mapped = B_NK ? make_map_2d(&tb, g.dt, g.b, nb, g.K, g.K, kBK, kOutN == BN ? BN : BN / 2)
                           : make_map_2d(&tb, g.dt, g.b, g.K, nb, nb, 64, kBK);
  if (!mapped) return false;
  GemmParams p{};
  p.M = int(g.M);
  p.N = int(g.N);
  p.tiles_m = int((g.M + kBM - 1) / kBM);
  p.tiles = p.tiles_m * int((g.N + kOutN - 1) / kOutN);
  p.k_tiles = int((g.K + kBK - 1) / kBK);
  p.bias = g.bias;
  p.y = g.y;
  const int grid = std::max(1, std::min(p.tiles, sm_count()));
  cuda_pdl::pdl_launch(kernel, dim3(grid), dim3(384), size_t(L::kAlloc), stream, ta, tb, p);
  if (cudaPeekAtLastError() != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

template <class T, int BN, bool B_NK, bool GATED>
bool launch_act(const HopperGemm& g, cudaStream_t stream) {
  using A = HopperGemmAct;
  if constexpr (GATED) {  // GatedMatMul's gates
    switch (g.act) {
      case A::Silu: return launch_t<T, BN, B_NK, true, int(A::Silu)>(g, stream);
      case A::GeluErfExact: return launch_t<T, BN, B_NK, true, int(A::GeluErfExact)>(g, stream);
      case A::GeluTanh: return launch_t<T, BN, B_NK, true, int(A::GeluTanh)>(g, stream);
      case A::Relu: return launch_t<T, BN, B_NK, true, int(A::Relu)>(g, stream);
      default: return false;
    }
  } else {  // FusedMatMul's activations
    switch (g.act) {
      case A::None: return launch_t<T, BN, B_NK, false, int(A::None)>(g, stream);
      case A::Relu: return launch_t<T, BN, B_NK, false, int(A::Relu)>(g, stream);
      case A::GeluErf: return launch_t<T, BN, B_NK, false, int(A::GeluErf)>(g, stream);
      case A::GeluTanh: return launch_t<T, BN, B_NK, false, int(A::GeluTanh)>(g, stream);
      case A::Relu2: return launch_t<T, BN, B_NK, false, int(A::Relu2)>(g, stream);
      default: return false;
    }
  }
}

template <class T>
bool launch_dt(const HopperGemm& g, cudaStream_t stream) {
  // Gated: 256 columns of B a tile (128 of the gate, 128 of the up), 128 of Y.
  if (g.gated) return g.b_nk ? launch_act<T, 256, true, true>(g, stream) : launch_act<T, 256, false, true>(g, stream);
  // 256 columns a tile where N is wide enough that the tiles still fill the SMs; else 128.
  int bn = g_tile_n;
  if (bn != 128 && bn != 256) {
    const int64_t tiles256 = ((g.M + kBM - 1) / kBM) * ((g.N + 255) / 256);
    bn = g.N >= 512 && tiles256 >= sm_count() ? 256 : 128;
  }
  if (bn == 256)
    return g.b_nk ? launch_act<T, 256, true, false>(g, stream) : launch_act<T, 256, false, false>(g, stream);
  return g.b_nk ? launch_act<T, 128, true, false>(g, stream) : launch_act<T, 128, false, false>(g, stream);
}

}  // namespace

bool hopper_gemm_fits(const HopperGemm& g, cudaStream_t stream) {
  if (g.dt != DType::Float16 && g.dt != DType::BFloat16) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.M >= (int64_t(1) << 31) || g.N >= (int64_t(1) << 31) ||
      g.K >= (int64_t(1) << 31) || g.M * g.N >= (int64_t(1) << 40))
    return false;
  if (g.K % 8 != 0 || g.N % 8 != 0) return false;
  if (g.gated && 2 * g.N >= (int64_t(1) << 31)) return false;
  if (!g.a || !g.b || !g.y || !aligned(g.a, 16) || !aligned(g.b, 16) || !aligned(g.y, 4)) return false;
  if (g.bias && !aligned(g.bias, 4)) return false;
  return hopper_sm90a_ready(stream);
}

bool hopper_gemm_wanted(const HopperGemm& g) {
  const int m = mode();
  if (m == 0) return false;
  if (m == 2) return true;
  // The epilogues cuBLASLt lacks (the exact GELU; squared ReLU; a gate), whose cuBLASLt path needs a second
  // pass over Y, on GEMMs with enough rows to fill the SMs (small M has gemm_gelu.cu,
  // gemv_nk_fused.cu and cuBLASLt's small-M kernels). Opt-in (m == 1) until measured faster
  // than cuBLASLt + the pass: 0.80-0.96x of it so far, the epilogue not yet overlapped with the
  // next tile's MMAs (NOTES-perf.md v19).
  const bool intended = (g.gated || g.act == HopperGemmAct::GeluErf || g.act == HopperGemmAct::GeluErfExact ||
                         g.act == HopperGemmAct::Relu2) &&
                        g.M >= 1024;
  return intended && m == 1;
}

bool launch_gemm_hopper(const HopperGemm& g, cudaStream_t stream) {
  if (!hopper_gemm_fits(g, stream)) return false;
  return g.dt == DType::Float16 ? launch_dt<__half>(g, stream) : launch_dt<__nv_bfloat16>(g, stream);
}

void set_hopper_gemm(int m) { g_mode = m < 0 ? -2 : m > 2 ? 2 : m; }
void set_hopper_gemm_tile_n(int n) { g_tile_n = n == 128 || n == 256 ? n : 0; }
long long hopper_gemm_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
