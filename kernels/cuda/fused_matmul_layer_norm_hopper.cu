// fuseopt.FusedMatMulLayerNorm with a residual on Hopper (sm_90a): Y = LayerNorm(alpha · A·B +
// bias + skip) · gamma (+ beta) in one kernel, where the unfused path writes the GEMM's output,
// reads it back with the residual in a SkipLayerNorm kernel and writes Y (BERT's
// out-projection and FFN2: 12.6 MB of traffic and a launch at 4096 x 768, twice a layer).
//
// Opt-in (FUSEOPT_GEMM_LN_HOPPER=1): correct, but 0.82x of cuBLASLt's GEMM + the SkipLayerNorm
// kernel at BERT-base's 4096 x 768 x 768 with its best tiles (NOTES-perf.md v39): the saved pass
// does not repay our main loop's deficit to cuBLASLt's.
//
// A LayerNorm needs whole rows, and a block of 128 rows cannot hold 768 columns of fp32
// accumulators beside its operand ring, nor would 4096 / 128 = 32 such blocks fill the SMs.
// So a row of tiles is split across a cluster of CLN blocks (N = CLN · BN: 768 = 3 x 256 or
// 4 x 192, 1024 = 4 x 256, 512 = 4 x 128), each the Hopper GEMM's cooperative block (one producer
// warp issuing TMA copies through an mbarrier ring, two consumer warpgroups of 64 rows running
// wgmma m64nBNk16), and the blocks exchange per-row partial sums through distributed shared
// memory: each writes its partial for every row into every block's table (st.shared::cluster)
// and arrives on that block's mbarrier; each block then adds the CLN partials in rank order, so
// every block derives the same mean. Two exchanges: the mean, then the centred sum of squares
// (two-pass variance, as the SkipLayerNorm kernels compute it). Statistics in fp32.
//
// The residual tile reaches shared memory by TMA into the buffer Y's tile leaves from: the
// producer loads it after the tile's operands; the consumers add it to the accumulators, write
// Y over it (same 128-byte swizzled panels) and one thread a warpgroup stores its 64 rows by
// TMA, which clips rows past M. Persistent over row tiles: cluster c takes row tiles c, c + C,
// ...; the residual buffer is refilled once the previous tile's stores have read it, and the
// partial-sum tables alternate between two sets by tile parity (a block can be at most one tile
// ahead of a peer: it waits for the peer's partials of each tile).
// Only the sm_90a image holds the kernel body (CMakeLists.txt compiles this file for it besides
// sm_90); the host side checks at run time that the device loaded that image (hopper_device.h).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "kernels/cuda/cluster_launch.cuh"
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/fused_attention_hopper_sync.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/fused_matmul_layer_norm.h"
#include "kernels/cuda/gemm_hopper_device.cuh"
#include "kernels/cuda/gemm_hopper_wgmma.cuh"
#include "kernels/cuda/hopper_device.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_encode.h"

namespace fuseopt::cuda_fused {
namespace {

struct LnGemmParams {
  int M, N, tiles_m, k_tiles;
  float alpha, eps, inv_n;
  const void* bias;  // [N] or null
  const void* gamma;
  const void* beta;  // [N] or null
};

// Shared memory: the operand ring, the row buffer (residual in, Y out: BN/64 panels of
// [128 rows][128 B], 128-byte swizzle), the partial-sum tables float[2 sets][2 passes][CLN][128],
// then the mbarriers: full/empty per stage, the row buffer's full/empty, one per (set, pass).
template <int BN, int STAGES, int CLN>
struct LnLayout {
  static constexpr int kABytes = kBM * kBK * 2;
  static constexpr int kBBytes = BN * kBK * 2;
  static constexpr int kStage = kABytes + kBBytes;  // a multiple of 1024: every tile swizzle-aligned
  static constexpr int kOffRow = STAGES * kStage;
  static constexpr int kRowBytes = kBM * BN * 2;
  static constexpr int kOffPart = kOffRow + kRowBytes;
  static constexpr int kPartBytes = 2 * 2 * CLN * kBM * 4;
  static constexpr int kOffBar = kOffPart + kPartBytes;
  static constexpr int kBytes = kOffBar + (2 * STAGES + 2 + 4) * 8;
  static constexpr int kAlloc = kBytes + 1024;  // slack to align the base to 1024
};

#if defined(FUSEOPT_HOPPER_DEVICE)
// Waits for the phase with acquire at cluster scope: the peers' partial sums were written into
// this block's shared memory by other blocks (their arrivals release them).
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
        "p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ uint32_t map_peer(uint32_t addr, uint32_t peer) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(peer));
  return r;
}
// This thread's two row partials into block `peer`'s table, then an arrival on its mbarrier
// (release: the stores are visible to whoever observes the phase complete).
__device__ __forceinline__ void push_partials(uint32_t slot, uint32_t bar, uint32_t peer, float v0, float v1) {
  const uint32_t at = map_peer(slot, peer);
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(at), "f"(v0) : "memory");
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(at + 8 * 4), "f"(v1) : "memory");
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(map_peer(bar, peer)) : "memory");
}
#endif

template <class T, int BN, bool B_NK, int STAGES, int CLN>
__global__ void __launch_bounds__(384, 1)
    gemm_layer_norm_hopper_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                                  const __grid_constant__ CUtensorMap tm_res, const __grid_constant__ CUtensorMap tm_y,
                                  const __grid_constant__ LnGemmParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  using namespace hopper;
  // Launched with programmatic dependent launch: no copy or store before the previous kernel ends.
  cuda_pdl::pdl_begin();
  using L = LnLayout<BN, STAGES, CLN>;
  constexpr int kPieces = B_NK ? 2 : BN / 64;  // B's tile in TMA boxes (as in gemm_hopper.cu)
  constexpr int kPanels = BN / 64;             // 64-column panels of the row buffer
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t bar = base + L::kOffBar;
  auto full = [&](int s) { return bar + 8u * s; };
  auto empty = [&](int s) { return bar + 8u * (STAGES + s); };
  const uint32_t row_full = bar + 8u * (2 * STAGES), row_empty = row_full + 8u;
  auto stat_bar = [&](int set, int pass) { return bar + 8u * (2 * STAGES + 2 + set * 2 + pass); };
  auto tile_a = [&](int s) { return base + s * L::kStage; };
  auto tile_b = [&](int s) { return base + s * L::kStage + L::kABytes; };
  const uint32_t rowbuf = base + L::kOffRow;
  const uint32_t rank = cluster_rank();  // this block's column slice of the row of tiles
  const int n0 = int(rank) * BN;
  const int first = int(blockIdx.x) / CLN, step = int(gridDim.x) / CLN;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8);  // lane 0 of each consumer warp
    }
    mbar_init(row_full, 1);
    mbar_init(row_empty, 2);  // each warpgroup's storer, once its stores have read the buffer
    for (int i = 0; i < 4; ++i) mbar_init(stat_bar(i / 2, i % 2), 64 * CLN);  // 64 row-pair threads a block
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // Every block's barriers are initialised before any peer pushes partials into it.
  cluster_sync();

  if (threadIdx.x < 128) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x != 0) return;
    int it = 0, j = 0;
    for (int t = first; t < p.tiles_m; t += step, ++j) {
      const int m0 = t * kBM;
      for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(empty(s), ((it / STAGES) - 1) & 1);
        mbar_arrive_tx(full(s), L::kStage);
        // The cluster's blocks load the same A tile each: multicasting it (two 64-row halves from
        // ranks 0 and 1, every block's stage released by all blocks' consumers) measured 1.8-2.7x
        // slower (session 35, NOTES-perf.md v39), as B's multicast in gemm_hopper.cu did.
        tma_load_2d(tile_a(s), &tm_a, full(s), kt * kBK, m0);
#pragma unroll
        for (int q = 0; q < kPieces; ++q) {
          if constexpr (B_NK) tma_load_2d(tile_b(s) + q * (BN / 2) * 128, &tm_b, full(s), kt * kBK, n0 + q * (BN / 2));
          else tma_load_2d(tile_b(s) + q * kBK * 128, &tm_b, full(s), n0 + q * 64, kt * kBK);
        }
      }
      // The residual tile, once the previous tile's Y has been read out of the buffer.
      if (j > 0) mbar_wait(row_empty, (j - 1) & 1);
      mbar_arrive_tx(row_full, L::kRowBytes);
#pragma unroll
      for (int pn = 0; pn < kPanels; ++pn) tma_load_2d(rowbuf + pn * (kBM * 128), &tm_res, row_full, n0 + pn * 64, m0);
    }
    return;
  }

  // ---------------- consumers ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int ct = threadIdx.x - 128;
  const int wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  const int lr = wg * 64 + warp * 16 + g;  // this thread's rows of the tile: lr, lr + 8 (same lr % 8)
  const bool storer = (ct & 127) == 0;     // the warpgroup's thread that issues its TMA stores
  const T* __restrict__ bias = static_cast<const T*>(p.bias);
  const T* __restrict__ gamma = static_cast<const T*>(p.gamma);
  const T* __restrict__ beta = static_cast<const T*>(p.beta);
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(s));
  };
  // Where column pair (8 jj + 2 t4) of row lr + 8 r sits in the row buffer.
  auto at = [&](int jj, int r) {
    return rowbuf + uint32_t(jj / 8) * (kBM * 128) + uint32_t(lr + 8 * r) * 128 + ((uint32_t(jj % 8) ^ uint32_t(g)) << 4) +
           uint32_t(t4) * 4;
  };
  // Adds this thread's two row values over the quad (the four threads holding a row's columns),
  // pushes them to every block of the cluster and returns the cluster's row totals.
  auto exchange = [&](int set, int pass, uint32_t use, float v0, float v1, float& tot0, float& tot1) {
    v0 += __shfl_xor_sync(0xffffffffu, v0, 1);
    v0 += __shfl_xor_sync(0xffffffffu, v0, 2);
    v1 += __shfl_xor_sync(0xffffffffu, v1, 1);
    v1 += __shfl_xor_sync(0xffffffffu, v1, 2);
    const uint32_t table = base + L::kOffPart + uint32_t((set * 2 + pass) * CLN) * (kBM * 4);
    if (t4 == 0) {
#pragma unroll
      for (int q = 0; q < CLN; ++q)
        push_partials(table + rank * (kBM * 4) + uint32_t(lr) * 4, stat_bar(set, pass), uint32_t(q), v0, v1);
    }
    mbar_wait_cluster(stat_bar(set, pass), use & 1);
    tot0 = tot1 = 0.f;
#pragma unroll
    for (int q = 0; q < CLN; ++q) {  // rank order: every block adds the same numbers in the same order
      float a0, a1;
      asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(a0) : "r"(table + q * (kBM * 4) + uint32_t(lr) * 4) : "memory");
      asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(a1) : "r"(table + q * (kBM * 4) + uint32_t(lr + 8) * 4) : "memory");
      tot0 += a0;
      tot1 += a1;
    }
  };

  float acc[BN / 2];  // column 8j + 2·t4 + (c & 1), row g + 8·(c >> 1) of the warp's 16, at acc[4j + c]
  int it = 0, j = 0;
  for (int t = first; t < p.tiles_m; t += step, ++j) {
    const int m0 = t * kBM;
    for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(full(s), (it / STAGES) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const uint64_t da = make_desc(tile_a(s) + wg * 64 * 128 + kk * 32, 16);
        const uint64_t db = B_NK ? make_desc(tile_b(s) + kk * 32, 16) : make_desc(tile_b(s) + kk * 16 * 128, kBK * 128);
        hopper_gemm::GemmMma<T, BN, !B_NK>::run(acc, da, db, kt > 0 || kk > 0);
      }
      wgmma_commit();
      wgmma_wait<1>();
      if (kt > 0) release((it - 1) % STAGES);
      // The previous tile's stores have had a k-step to read the buffer: let the producer refill it.
      if (kt == 0 && j > 0 && storer) {
        bulk_wait_read();
        mbar_arrive(row_empty);
      }
    }
    wgmma_wait<0>();
    fence_regs(acc);
    release((it - 1) % STAGES);  // K > 0 (gemm_layer_norm_hopper_fits): at least one stage

    // Sum = alpha · acc + bias + residual, in fp32, and its row sums.
    mbar_wait(row_full, j & 1);
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj) {
      const float2 b = bias ? load_pair<T>(bias + n0 + jj * 8 + 2 * t4) : make_float2(0.f, 0.f);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t u;
        asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(u) : "r"(at(jj, r)) : "memory");
        const float2 x = pair_to_float2<T>(u);
        float& v0 = acc[4 * jj + 2 * r];
        float& v1 = acc[4 * jj + 2 * r + 1];
        v0 = (p.alpha * v0 + b.x) + x.x;
        v1 = (p.alpha * v1 + b.y) + x.y;
        (r == 0 ? s0 : s1) += v0 + v1;
      }
    }
    const int set = j & 1;
    const uint32_t use = uint32_t(j >> 1);  // how often this set's barriers completed before
    float tot0, tot1;
    exchange(set, 0, use, s0, s1, tot0, tot1);
    const float mean0 = tot0 * p.inv_n, mean1 = tot1 * p.inv_n;
    float q0 = 0.f, q1 = 0.f;
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj) {
      float& a = acc[4 * jj];
      float& b = acc[4 * jj + 1];
      float& c = acc[4 * jj + 2];
      float& d = acc[4 * jj + 3];
      a -= mean0;
      b -= mean0;
      c -= mean1;
      d -= mean1;
      q0 += a * a + b * b;
      q1 += c * c + d * d;
    }
    exchange(set, 1, use, q0, q1, tot0, tot1);
    const float rstd0 = rsqrtf(tot0 * p.inv_n + p.eps), rstd1 = rsqrtf(tot1 * p.inv_n + p.eps);

    // Y over the residual in the buffer, then one thread a warpgroup stores its 64 rows.
#pragma unroll
    for (int jj = 0; jj < BN / 8; ++jj) {
      const int col = n0 + jj * 8 + 2 * t4;
      const float2 ga = load_pair<T>(gamma + col);
      const float2 be = beta ? load_pair<T>(beta + col) : make_float2(0.f, 0.f);
      const uint32_t y0 = pack2<T>(acc[4 * jj] * rstd0 * ga.x + be.x, acc[4 * jj + 1] * rstd0 * ga.y + be.y);
      const uint32_t y1 = pack2<T>(acc[4 * jj + 2] * rstd1 * ga.x + be.x, acc[4 * jj + 3] * rstd1 * ga.y + be.y);
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at(jj, 0)), "r"(y0) : "memory");
      asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(at(jj, 1)), "r"(y1) : "memory");
    }
    fence_async_shared();
    warpgroup_sync(wg);
    if (storer) {
#pragma unroll
      for (int pn = 0; pn < kPanels; ++pn)
        tma_store_2d(&tm_y, rowbuf + uint32_t(pn) * (kBM * 128) + uint32_t(wg) * 64 * 128, n0 + pn * 64, m0 + wg * 64);
      bulk_commit();
    }
  }
  if (storer) bulk_wait_all();  // Y is written before the grid completes
#endif  // FUSEOPT_HOPPER_DEVICE
}

// ---------------- host side ----------------

int g_mode = -2;  // -2: read the environment once; -1 default (off); 0 off; 2 every call it fits
int g_tile_n = 0;  // 0: by shape and the clusters the device holds; else forced (tests, A/B runs)
std::atomic<long long> g_launches{0};
std::atomic<int> g_last_bn{0}, g_last_cln{0}, g_last_resident{0}, g_last_grid{0};

int mode() {
  if (g_mode == -2) {
    const char* e = std::getenv("FUSEOPT_GEMM_LN_HOPPER");
    const std::string v = e ? e : "";
    g_mode = v.empty() ? -1 : v == "1" ? 2 : 0;
  }
  return g_mode;
}

bool aligned(const void* p, uintptr_t n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

template <int CLN>
int query_resident() {
  // The smallest-tile instance: every configuration runs one block an SM (168 registers x 384
  // threads), so the clusters the GPCs hold at once depend on the cluster size alone.
  using L = LnLayout<128, 4, CLN>;
  auto kernel = gemm_layer_norm_hopper_kernel<__half, 128, true, 4, CLN>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kAlloc) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return max_active_clusters(kernel, CLN, 384, size_t(L::kAlloc), sm_count());
}

// Clusters of `cln` blocks the device holds at once (asked once per size; 0: none). Not every
// SM count divides into them: the H100's GPCs hold 30 clusters of 4 (120 of 132 SMs), 66 of 2.
int resident_clusters(int cln) {
  static std::atomic<int> cache[9] = {};
  if (cln < 2 || cln > 8) return 0;
  int r = cache[cln].load();
  if (r != 0) return r < 0 ? 0 : r;
  switch (cln) {
    case 2: r = query_resident<2>(); break;
    case 3: r = query_resident<3>(); break;
    case 4: r = query_resident<4>(); break;
    case 6: r = query_resident<6>(); break;
    case 8: r = query_resident<8>(); break;
    default: r = 0;
  }
  cache[cln].store(r > 0 ? r : -1);
  return r;
}

// Column slices a row of tiles: BN of 256, 192 or 128 columns with N = CLN · BN, CLN of 2, 3, 4,
// 6 or 8, the one whose rounds of row tiles take least time: ceil(row tiles / clusters held at
// once) rounds of BN-wide tiles (ties: the wider tile, fewer partials to exchange). At BERT's
// 4096 x 768 that is 3 x 256 (32 tiles in one round on 96 SMs), not 4 x 192 (30 clusters of 4:
// two rounds, the second nearly empty). 0 where none applies.
int pick_bn(int64_t M, int64_t N) {
  const int64_t tiles_m = (M + kBM - 1) / kBM;
  int best = 0;
  int64_t best_cost = 0;
  for (int bn : {256, 192, 128}) {
    if (N % bn != 0 || (g_tile_n != 0 && bn != g_tile_n)) continue;
    const int64_t cln = N / bn;
    if (cln < 2 || cln > 8 || cln == 5 || cln == 7) continue;
    const int r = resident_clusters(int(cln));
    if (r <= 0) continue;
    const int64_t cost = (tiles_m + r - 1) / r * bn;
    if (best == 0 || cost < best_cost) best = bn, best_cost = cost;
  }
  return best;
}

template <class T, int BN, bool B_NK, int CLN>
bool launch_t(const HopperGemmLayerNorm& g, cudaStream_t stream) {
  constexpr int kStages = BN == 256 ? 3 : 4;  // what fits beside the row buffer
  using L = LnLayout<BN, kStages, CLN>;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  constexpr auto kernel = gemm_layer_norm_hopper_kernel<T, BN, B_NK, kStages, CLN>;
  if (!allow_dynamic_smem_once<kernel>(L::kAlloc)) return false;
  const int resident = resident_clusters(CLN);  // the same for every tile width (query_resident)
  if (resident <= 0) return false;
  CUtensorMap ta, tb, tr, ty;
  // B's boxes: [BN/2 rows][64 of K] ([N, K]) or [64 of K][64 columns] ([K, N]).
  if (!make_gemm_operand_maps(&ta, &tb, g.dt, g.a, g.b, g.M, g.N, g.K, B_NK, kBK, kBM, BN / 2)) return false;
  // The residual in [128 rows][64 columns] boxes (a panel of the row buffer), Y in the
  // warpgroups' [64 rows][64 columns].
  if (!make_map_2d(&tr, g.dt, g.skip, g.M, g.N, g.N, 64, kBM) || !make_map_2d(&ty, g.dt, g.y, g.M, g.N, g.N, 64, 64))
    return false;
  LnGemmParams p{};
  p.M = int(g.M);
  p.N = int(g.N);
  p.tiles_m = int((g.M + kBM - 1) / kBM);
  p.k_tiles = int((g.K + kBK - 1) / kBK);
  p.alpha = g.alpha;
  p.eps = g.eps;
  p.inv_n = 1.f / float(g.N);
  p.bias = g.bias;
  p.gamma = g.gamma;
  p.beta = g.beta;
  const int clusters = std::max(1, std::min(p.tiles_m, resident));

  const bool launched = launch_clustered(kernel, dim3(unsigned(clusters * CLN)), CLN, 384, size_t(L::kAlloc), stream,
                                         ta, tb, tr, ty, p);
  if (launched) {
    g_launches.fetch_add(1, std::memory_order_relaxed);
    g_last_bn.store(BN);
    g_last_cln.store(CLN);
    g_last_resident.store(resident);
    g_last_grid.store(clusters * CLN);
  }
  return launched;
}

template <class T, int BN, bool B_NK>
bool launch_cln(const HopperGemmLayerNorm& g, cudaStream_t stream) {
  switch (g.N / BN) {
    case 2: return launch_t<T, BN, B_NK, 2>(g, stream);
    case 3: return launch_t<T, BN, B_NK, 3>(g, stream);
    case 4: return launch_t<T, BN, B_NK, 4>(g, stream);
    case 6: return launch_t<T, BN, B_NK, 6>(g, stream);
    case 8: return launch_t<T, BN, B_NK, 8>(g, stream);
    default: return false;  // 5 and 7: no hidden size we know of; the two-kernel path takes them
  }
}

template <class T>
bool launch_dt(const HopperGemmLayerNorm& g, cudaStream_t stream) {
  switch (pick_bn(g.M, g.N)) {
    case 256: return g.b_nk ? launch_cln<T, 256, true>(g, stream) : launch_cln<T, 256, false>(g, stream);
    case 192: return g.b_nk ? launch_cln<T, 192, true>(g, stream) : launch_cln<T, 192, false>(g, stream);
    case 128: return g.b_nk ? launch_cln<T, 128, true>(g, stream) : launch_cln<T, 128, false>(g, stream);
    default: return false;
  }
}

}  // namespace

bool gemm_layer_norm_hopper_fits(const HopperGemmLayerNorm& g, cudaStream_t stream) {
  if (g.dt != DType::Float16 && g.dt != DType::BFloat16) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.M >= (int64_t(1) << 31) || g.K >= (int64_t(1) << 31) || g.N > 2048)
    return false;
  if (g.K % 8 != 0) return false;
  if (!g.a || !g.b || !g.skip || !g.gamma || !g.y) return false;
  for (const void* q : std::initializer_list<const void*>{g.a, g.b, g.skip, g.y})
    if (!aligned(q, 16)) return false;
  for (const void* q : std::initializer_list<const void*>{g.bias, g.gamma, g.beta})
    if (q && !aligned(q, 4)) return false;
  return hopper_sm90a_ready(stream) && pick_bn(g.M, g.N) != 0;
}

bool gemm_layer_norm_hopper_wanted(const HopperGemmLayerNorm&) {
  // Opt-in: measured slower than cuBLASLt's GEMM + the SkipLayerNorm kernel at every shape tried
  // (0.82x at BERT-base's 4096 x 768 x 768 with its best tiles, 3 x 256 on 96 SMs; NOTES-perf.md
  // v39): the main loop of our wgmma GEMM trails cuBLASLt's, which the saved pass does not repay.
  return mode() == 2;
}

bool launch_gemm_layer_norm_hopper(const HopperGemmLayerNorm& g, cudaStream_t stream) {
  if (!gemm_layer_norm_hopper_fits(g, stream)) return false;
  return g.dt == DType::Float16 ? launch_dt<__half>(g, stream) : launch_dt<__nv_bfloat16>(g, stream);
}

void set_gemm_layer_norm_hopper(int m) { g_mode = m < 0 ? -2 : m == 0 ? 0 : 2; }
void set_gemm_layer_norm_hopper_tile_n(int n) { g_tile_n = n == 128 || n == 192 || n == 256 ? n : 0; }
long long gemm_layer_norm_hopper_launch_count() { return g_launches.load(std::memory_order_relaxed); }
GemmLayerNormLaunch gemm_layer_norm_hopper_last_launch() {
  return {g_last_bn.load(), g_last_cln.load(), g_last_resident.load(), g_last_grid.load()};
}

}  // namespace fuseopt::cuda_fused
