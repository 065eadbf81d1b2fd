// Hopper (sm_90a) GEMM with a fused epilogue: Y = act(A · B + bias), fp16/bf16 in and out,
// fp32 accumulation (gemm_hopper.h says why it exists: cuBLASLt has no exact-GELU epilogue).
//
// Block = one producer warpgroup (its first thread issues the TMA copies; setmaxnreg gives its
// registers to the others) + two consumer warpgroups, each 64 rows of a 128 x BN output tile
// (BN 128 or 256: one wgmma m64nBNk16 per 16 of K per warpgroup, the accumulator BN/2 floats
// a thread). A [128 x 64] and B [64 x BN] tiles reach shared memory by TMA (128-byte swizzle,
// zero-filled past M, N and K) through a STAGES-deep ring of mbarriers: full (the copy's bytes
// landed), empty (the consumer warps are done with the stage). B is read in the layout it is
// stored in: [N, K] rows are the K-major operand wgmma takes directly; [K, N] rows (an ONNX
// MatMul weight) are the MN-major operand (transpose bit), loaded as 64-column panels, so no
// transposed copy of the weight exists. Persistent: one block per SM walks the output tiles
// (M fastest, so the blocks running at once share B's tile in L2); the ring runs on across
// tiles, so the producer loads the next tile while the consumers run the epilogue.
// Epilogue: + bias, the activation in fp32, one rounding, into a shared-memory staging buffer
// that a TMA store copies to Y (rows past M and columns past N are not written).
// Two schedules beside this cooperative one, for A/B runs: clusters of two blocks sharing B's
// tile by multicast, and ping-pong (each consumer warpgroup its own tiles).
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

#include "kernels/cuda/cluster_launch.cuh"
#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/fused_attention_hopper_sync.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_device.cuh"
#include "kernels/cuda/gemm_hopper.h"
#include "kernels/cuda/gemm_hopper_device.cuh"
#include "kernels/cuda/gemm_hopper_prenorm.cuh"
#include "kernels/cuda/gemm_hopper_wgmma.cuh"
#include "kernels/cuda/hopper_device.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_encode.h"

namespace fuseopt::cuda_fused {
namespace {

// GATED: B holds 2N columns (gate, then up); a block's BN columns of B are the gate's
// [n0, n0 + BN/2) and the up's [N + n0, N + n0 + BN/2), and it writes Y's [n0, n0 + BN/2) as
// act(gate + bias) * (up + bias'): fuseopt.GatedMatMul without its [M, 2N] product in memory.
//
// CL = 2 (A/B runs only): the blocks run as clusters of two on vertically adjacent tiles (the
// same columns), and each block loads half of the shared B tile and multicasts it into both
// blocks' shared memory, halving B's L2 traffic. A stage may then be refilled only when both
// blocks' consumers are done with it: each consumer warp arrives on its own block's `empty` and
// on its peer's (16 arrivals). Built on the reading that the 128 x BN tiles were L2-bound;
// measured 1.5x slower (session 22, call 2). Most of that was the remote arrival's cluster-scope
// release, a fence on every k-step (ncu's first stall, "membar"; session 40): with CTA scope
// 1.0-1.2x of one block a tile at BERT's and Llama's shapes, whose L2 traffic is not the limit.
//
// Epilogue: each warpgroup writes its 64 rows of the tile (bias, activation, one rounding) into
// the staging buffer and one of its threads stores them to Y by TMA (asynchronously: the next
// tile's MMAs start while the copy runs; the buffer is reused once the copy has read it). It
// replaced 4-byte stores straight from the registers, 8 rows x 16 bytes a warp instruction,
// that all blocks issued at once between tiles (session 22).
//
// ROWS: Y's rows of any pitch (an odd vocabulary's logits: 30522 or 50257 columns), whose rows
// start off 16-byte boundaries, where a TMA store cannot write. The epilogue then stages each
// row rotated by its misalignment and the warpgroup copies the rows out in aligned 16-byte
// pieces itself (stage_rows_shifted, copy_rows). YT: Y's element (T, or float for logits that
// are a float graph output of a 16-bit run: no conversion after). ROWS = false: YT = T.
//
// NORM: A's rows RMS-normalised first (an RMSNorm whose only reader is this GEMM; gamma already
// in B's K rows): each row's sum of squares from the A stages as the MMAs read them, the rows
// scaled by 1 / rms in the epilogue (gemm_hopper_prenorm.cuh).
template <class T, class YT, int BN, bool B_NK, int STAGES, bool GATED, int ACT, int CL, bool ROWS, bool NORM>
__global__ void __launch_bounds__(384, 1)
    gemm_hopper_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                       const __grid_constant__ CUtensorMap tm_y, const __grid_constant__ GemmParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  using namespace hopper;
  // Launched with programmatic dependent launch: no copy or store before the previous kernel ends.
  // The TMA descriptors (the host's) are fetched before that wait (ROWS has no map for Y).
  if (threadIdx.x == 0) {
    prefetch_tmap(&tm_a);
    prefetch_tmap(&tm_b);
    if (!ROWS) prefetch_tmap(&tm_y);
  }
  cuda_pdl::pdl_begin();
  constexpr int kOutN = GATED ? BN / 2 : BN;  // Y columns a tile writes
  // The staging buffer's width: 32 KB of rows, 128 columns of 16 bits or 64 floats (256-column
  // tiles stage and store in passes, so the ring keeps 4 stages of 48 KB beside it).
  constexpr int kE = int(sizeof(YT));
  static_assert(ROWS || kE == sizeof(T), "a float Y goes through ROWS");
  constexpr int kOutS = kOutN < 256 / kE ? kOutN : 256 / kE;
  using L = GemmLayout<BN, STAGES, kOutS, kE>;
  // B's tile in pieces, each one TMA box: [BN/2 rows][64 of K] twice ([N, K] weights; gated:
  // the gate's rows, then the up's), or BN/64 panels of [64 of K][64 columns] ([K, N]). In a
  // cluster, block r loads the pieces q with q % CL == r for both blocks.
  constexpr int kPieces = B_NK ? 2 : BN / 64;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = (raw + 1023) & ~1023u;
  const uint32_t bar = base + L::kOffBar;
  auto full = [&](int s) { return bar + 8u * s; };
  auto empty = [&](int s) { return bar + 8u * (STAGES + s); };
  auto tile_a = [&](int s) { return base + s * L::kStage; };
  auto tile_b = [&](int s) { return base + s * L::kStage + L::kABytes; };
  const uint32_t rank = CL > 1 ? cluster_rank() : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), 8 * CL);  // lane 0 of each consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // The peer's barriers must be initialised before its first multicast or remote arrival.
  if constexpr (CL > 1) cluster_sync();
  else __syncthreads();

  // Tile t of the block: the cluster's tile group t (CL vertically adjacent tiles), ours by rank.
  auto tile_m0 = [&](int t) { return ((t % p.tiles_m) * CL + int(rank)) * kBM; };
  auto tile_n0 = [&](int t) { return (t / p.tiles_m) * kOutN; };
  const int first = int(blockIdx.x) / CL, step = int(gridDim.x) / CL;

  if (threadIdx.x < 128) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x != 0) return;
    int it = 0;
    for (int t = first; t < p.tiles; t += step) {
      const int m0 = tile_m0(t), n0 = tile_n0(t);
      for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(empty(s), ((it / STAGES) - 1) & 1);
        // The stage's bytes in this block: A (ours; past M it is zero-filled, still delivered)
        // and all of B, whichever block of the cluster loaded each piece.
        mbar_arrive_tx(full(s), L::kStage);
        tma_load_2d(tile_a(s), &tm_a, full(s), kt * kBK, m0);
#pragma unroll
        for (int q = 0; q < kPieces; ++q) {
          if (q % CL != int(rank)) continue;
          uint32_t dst;
          int c0, c1;
          if constexpr (B_NK) {
            dst = tile_b(s) + q * (BN / 2) * 128;
            c0 = kt * kBK;
            c1 = GATED ? (q == 0 ? n0 : p.N + n0) : n0 + q * (BN / 2);
          } else {
            dst = tile_b(s) + q * kBK * 128;
            c0 = GATED && q >= BN / 128 ? p.N + n0 + (q - BN / 128) * 64 : n0 + q * 64;
            c1 = kt * kBK;
          }
          if constexpr (CL > 1) tma_load_2d_multicast(dst, &tm_b, full(s), c0, c1, uint16_t((1u << CL) - 1));
          else tma_load_2d(dst, &tm_b, full(s), c0, c1);
        }
      }
    }
    if constexpr (CL > 1) {
      // Stay until both blocks' consumers have released every stage this block filled: the
      // peer's last remote arrivals land on our barriers, and our multicasts on its memory.
      for (int k = 0; k < STAGES && k < it; ++k) {
        const int i = it - 1 - k;
        mbar_wait(empty(i % STAGES), (i / STAGES) & 1);
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int ct = threadIdx.x - 128;
  const int wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  // A stage is free once every consumer warp of the cluster has arrived on its `empty`.
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) {
      mbar_arrive(empty(s));
      if constexpr (CL > 1) mbar_arrive_remote(empty(s), rank ^ 1u);
    }
  };
  float acc[BN / 2];  // column 8j + 2·t4 + (c & 1), row g + 8·(c >> 1) of the warp's 16, at acc[4j + c]
  const uint32_t out = base + L::kOffOut;
  const bool storer = (ct & 127) == 0;  // the warpgroup's thread that issues its TMA stores
  int it = 0;
  TileBias<GATED, kOutN> tb;
  float row_ss = 0.f;  // NORM: the sum of squares of the thread's half of an A row
  for (int t = first; t < p.tiles; t += step) {
    const int m0 = tile_m0(t), n0 = tile_n0(t);
    load_tile_bias(tb, n0 + 2 * t4, p);  // used in the epilogue: in flight meanwhile
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
      // NORM: the rows' squares from the stage the MMAs now read (both only read it).
      if constexpr (NORM) prenorm_sum_stage<T>(tile_a(s) + wg * 64 * 128, ct & 127, row_ss);
      // The previous stage's MMAs are done once at most this one is in flight: free it.
      wgmma_wait<1>();
      if (kt > 0) release((it - 1) % STAGES);
    }
    wgmma_wait<0>();
    fence_regs(acc);
    if (p.k_tiles > 0) release((it - 1) % STAGES);
    if constexpr (NORM) prenorm_scale_rows(acc, row_ss, g, p);
    // In passes of kOutS columns (the buffer's width). Before each, the previous copy out of
    // the staging rows must have read them (across tiles it had a whole main loop to do so).
    // ROWS: each of the thread's two rows' misalignment (the same in every pass: a pass is 256
    // bytes of a row, a tile 256 columns).
    uint32_t mis0 = 0, mis1 = 0;
    if constexpr (ROWS) {
      const uintptr_t y = reinterpret_cast<uintptr_t>(p.y);
      const int r0 = m0 + wg * 64 + warp * 16 + g;
      mis0 = uint32_t((y + uintptr_t(r0) * uintptr_t(p.N) * kE) & 15u);
      mis1 = uint32_t((y + uintptr_t(r0 + 8) * uintptr_t(p.N) * kE) & 15u);
    }
    // The passes unrolled by hand: the column groups must be compile-time (acc's indices).
    auto run_pass = [&](auto pass_c) {
      constexpr int pass = decltype(pass_c)::value;
      if constexpr (ROWS) {
        warpgroup_sync(wg);  // the previous pass's copy has read the buffer
        stage_rows_shifted<T, YT, ACT, pass * (kOutS / 8), kOutS / 8>(acc, tb, out, wg * 64 + warp * 16 + g,
                                                                       wg * 64 + warp * 16 + g + 8, mis0, mis1, t4);
        warpgroup_sync(wg);
        copy_rows<YT>(out, wg, ct & 127, m0, n0 + pass * kOutS, kOutS, p);
      } else {
        // The pass's values first: their arithmetic runs while the previous pass's copy reads
        // the buffer (before, each second pass waited for that read with nothing to do).
        uint32_t v[kOutS / 8][2];
        epilogue_pairs<T, ACT, GATED, kOutN, pass * (kOutS / 8), kOutS / 8>(acc, tb, v);
        if (storer) bulk_wait_read();
        warpgroup_sync(wg);
        store_pairs(v, out, wg * 64 + warp * 16 + g, t4);
        fence_async_shared();
        warpgroup_sync(wg);
        if (storer) {
#pragma unroll
          for (int pn = 0; pn < kOutS / 64; ++pn)
            tma_store_2d(&tm_y, out + uint32_t(pn) * (kBM * 128) + uint32_t(wg) * 64 * 128,
                         n0 + pass * kOutS + pn * 64, m0 + wg * 64);
          bulk_commit();
        }
      }
    };
    run_pass(std::integral_constant<int, 0>{});
    if constexpr (kOutN / kOutS > 1) run_pass(std::integral_constant<int, 1>{});
    if constexpr (kOutN / kOutS > 2) run_pass(std::integral_constant<int, 2>{});
    if constexpr (kOutN / kOutS > 3) run_pass(std::integral_constant<int, 3>{});
    static_assert(kOutN / kOutS <= 4, "at most four staging passes a tile");
  }
  if (storer) bulk_wait_all();  // Y is written before the grid completes
#endif  // FUSEOPT_HOPPER_DEVICE
}

// Ping-pong schedule (not gated; 128 x 128 output tiles): each consumer warpgroup owns whole
// tiles — the block's tiles alternate between them — and runs two m64n128k16 per 16 of K (its
// 128 rows share B's descriptor). The warpgroups take turns at issuing a tile's MMAs (named
// barrier 1 + w: "warpgroup w may issue"; passed on once a tile's last MMAs are issued), so
// one runs its epilogue (bias, GELU, stores: ~1.5 us a tile with the tensor cores idle in the
// cooperative kernel above) while the other's MMAs run. The ring and the producer are the
// cooperative kernel's, with BN = 128: a stage is consumed by one warpgroup (4 arrivals). The
// epilogue stages and TMA-stores as the cooperative kernel's does (a panel a warpgroup).
template <class T, bool B_NK, int STAGES, int ACT>
__global__ void __launch_bounds__(384, 1)
    gemm_hopper_pingpong_kernel(const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
                                const __grid_constant__ CUtensorMap tm_y, const GemmParams p) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  using namespace hopper;
  if (threadIdx.x == 0) {  // the TMA descriptors (the host's) fetched before the launch wait
    prefetch_tmap(&tm_a);
    prefetch_tmap(&tm_b);
    prefetch_tmap(&tm_y);
  }
  cuda_pdl::pdl_begin();  // programmatic dependent launch: no copy or store before the previous kernel ends
  constexpr int BN = 128;
  using L = GemmLayout<BN, STAGES, 128>;  // staging: a [128 rows][64 columns] panel a warpgroup
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
      mbar_init(empty(s), 4);  // lane 0 of each warp of the one warpgroup that consumes the stage
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (threadIdx.x < 128) {
    // ---------------- producer: the block's tiles in order, K-tiles in order ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x != 0) return;
    int it = 0;
    for (int t = blockIdx.x; t < p.tiles; t += gridDim.x) {
      const int m0 = (t % p.tiles_m) * kBM, n0 = (t / p.tiles_m) * BN;
      for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
        const int s = it % STAGES;
        if (it >= STAGES) mbar_wait(empty(s), ((it / STAGES) - 1) & 1);
        mbar_arrive_tx(full(s), L::kStage);  // boxes past the edges still deliver their (zero) bytes
        tma_load_2d(tile_a(s), &tm_a, full(s), kt * kBK, m0);
        if constexpr (B_NK) {
          tma_load_2d(tile_b(s), &tm_b, full(s), kt * kBK, n0);  // [128 rows][64 of K]
        } else {
#pragma unroll
          for (int pn = 0; pn < BN / 64; ++pn)  // panels of [64 of K][64 columns]
            tma_load_2d(tile_b(s) + pn * kBK * 128, &tm_b, full(s), n0 + pn * 64, kt * kBK);
        }
      }
    }
    return;
  }

  // ---------------- consumers: warpgroup w takes the block's tiles w, w + 2, ... ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int ct = threadIdx.x - 128;
  const int wg = ct >> 7, warp = (ct >> 5) & 3, lane = ct & 31;
  const int g = lane >> 2, t4 = lane & 3;
  auto tile_of = [&](int j) { return int(blockIdx.x) + j * int(gridDim.x); };
  // acc[h]: rows 64h.. of the tile, laid out as the cooperative kernel's acc.
  float acc[2][BN / 2];
  const uint32_t out = base + L::kOffOut + uint32_t(wg) * (kBM * 128);
  const bool storer = (ct & 127) == 0;  // the warpgroup's thread that issues its TMA stores
  // Warpgroup 0 issues first: warpgroup 1 hands it the first turn (every block has a tile 0).
  if (wg == 1) named_arrive(1);
  for (int j = wg; tile_of(j) < p.tiles; j += 2) {
    const int t = tile_of(j);
    const int m0 = (t % p.tiles_m) * kBM, n0 = (t / p.tiles_m) * BN;
    const bool next = tile_of(j + 1) < p.tiles;  // the other warpgroup has a tile after this one
    TileBias<false, BN> tb;
    load_tile_bias(tb, n0 + 2 * t4, p);  // used in the epilogue: in flight during the main loop
    named_sync(1 + wg);  // my turn
    int it = j * p.k_tiles;
    for (int kt = 0; kt < p.k_tiles; ++kt, ++it) {
      const int s = it % STAGES;
      mbar_wait(full(s), (it / STAGES) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        const uint64_t db = B_NK ? make_desc(tile_b(s) + kk * 32, 16) : make_desc(tile_b(s) + kk * 16 * 128, kBK * 128);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint64_t da = make_desc(tile_a(s) + h * 64 * 128 + kk * 32, 16);
          hopper_gemm::GemmMma<T, BN, !B_NK>::run(acc[h], da, db, kt > 0 || kk > 0);
        }
      }
      wgmma_commit();
      // The previous stage's MMAs are done once at most this one is in flight: free it.
      wgmma_wait<1>();
      if (kt > 0) {
        __syncwarp();
        if (lane == 0) mbar_arrive(empty((it - 1) % STAGES));
      }
    }
    // Every MMA of this tile is issued: the other warpgroup's tile may start on the tensor cores.
    if (next) named_arrive(1 + (1 - wg));
    wgmma_wait<0>();
    fence_regs(acc[0]);
    fence_regs(acc[1]);
    __syncwarp();
    if (lane == 0 && p.k_tiles > 0) mbar_arrive(empty((it - 1) % STAGES));
    // Epilogue through this warpgroup's staging panel ([128 rows][64 columns], the cooperative
    // kernel's format) in two passes of 64 columns, each stored by TMA as two 64-row boxes.
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      uint32_t v[2][8][2];  // the pass's values of both 64-row halves, computed before the wait
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (pass == 0) epilogue_pairs<T, ACT, false, BN, 0, 8>(acc[h], tb, v[h]);
        else epilogue_pairs<T, ACT, false, BN, 8, 8>(acc[h], tb, v[h]);
      }
      if (storer) bulk_wait_read();
      warpgroup_sync(wg);
#pragma unroll
      for (int h = 0; h < 2; ++h) store_pairs(v[h], out, h * 64 + warp * 16 + g, t4);
      fence_async_shared();
      warpgroup_sync(wg);
      if (storer) {
        tma_store_2d(&tm_y, out, n0 + pass * 64, m0);
        tma_store_2d(&tm_y, out + 64 * 128, n0 + pass * 64, m0 + 64);
        bulk_commit();
      }
    }
  }
  if (storer) bulk_wait_all();  // Y is written before the grid completes
#endif  // FUSEOPT_HOPPER_DEVICE
}

// ---------------- host side ----------------

int g_mode = -2;  // -2: read the environment once; -1 default; 0 off; 1 the intended GEMMs; 2 every one it fits
int g_tile_n = 0;  // 0 by shape
int g_schedule = -1;  // -1: read the environment once; 0 by shape; 1 cooperative; 2 ping-pong
int g_cluster = 0;   // blocks a cluster of the cooperative schedule: 0 by shape (1); 1; 2
std::atomic<long long> g_launches{0};

int mode() {
  if (g_mode == -2) {
    const char* e = std::getenv("FUSEOPT_HOPPER_GEMM");
    const std::string v = e ? e : "";
    g_mode = v.empty() ? -1 : v == "0" ? 0 : v == "all" ? 2 : 1;
  }
  return g_mode;
}

// FUSEOPT_HOPPER_GEMM_SCHEDULE=cooperative / pingpong: one schedule for every non-gated GEMM of
// ours, for end-to-end A/B runs (the tests and the micro-benchmark set it in code).
int schedule() {
  if (g_schedule == -1) {
    const char* e = std::getenv("FUSEOPT_HOPPER_GEMM_SCHEDULE");
    const std::string v = e ? e : "";
    g_schedule = v == "cooperative" ? 1 : v == "pingpong" ? 2 : 0;
  }
  return g_schedule;
}

bool aligned(const void* p, uintptr_t n) { return (reinterpret_cast<uintptr_t>(p) & (n - 1)) == 0; }

template <class T, class YT, int BN, bool B_NK, bool GATED, int ACT, int CL, bool ROWS = false, bool NORM = false>
bool launch_t(const HopperGemm& g, cudaStream_t stream) {
  constexpr int kOutN = GATED ? BN / 2 : BN;
  constexpr int kE = int(sizeof(YT));
  constexpr int kOutS = kOutN < 256 / kE ? kOutN : 256 / kE;  // the kernel's staging width
  constexpr int kStages = BN == 256 ? 4 : 6;                  // what fits beside the staging buffer
  using L = GemmLayout<BN, kStages, kOutS, kE>;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  constexpr auto kernel = gemm_hopper_kernel<T, YT, BN, B_NK, kStages, GATED, ACT, CL, ROWS, NORM>;
  if (!allow_dynamic_smem_once<kernel>(L::kAlloc)) return false;
  const int64_t nb = GATED ? 2 * g.N : g.N;  // B's columns
  CUtensorMap ta, tb;
  // B's boxes: [BN/2 rows][64 of K] ([N, K]) or [64 of K][64 columns] ([K, N]); see kPieces.
  if (!make_gemm_operand_maps(&ta, &tb, g.dt, g.a, g.b, g.M, nb, g.K, B_NK, kBK, kBM, BN / 2)) return false;
  // Y in boxes of [64 rows][64 columns], the staging panels' swizzle; ROWS: no map (copied out
  // by the warpgroups).
  CUtensorMap ty{};
  if (!ROWS && !make_map_2d(&ty, g.dt, g.y, g.M, g.N, g.N, 64, 64)) return false;
  GemmParams p{};
  p.M = int(g.M);
  p.N = int(g.N);
  p.tiles_m = int((g.M + CL * kBM - 1) / (CL * kBM));  // groups of CL vertically adjacent tiles
  p.tiles = p.tiles_m * int((g.N + kOutN - 1) / kOutN);
  p.k_tiles = int((g.K + kBK - 1) / kBK);
  p.bias = g.bias;
  p.y = g.y;
  p.K = int(g.K);
  p.norm_eps = g.norm_eps;
  // Persistent: as many blocks (clusters) as can be resident at once — for clusters the GPCs
  // decide that, not the SM count alone (asked once per kernel).
  static std::atomic<int> resident{0};
  if (resident.load() == 0) {
    int r = sm_count() / CL;
    if constexpr (CL > 1) {
      if (const int clusters = max_active_clusters(kernel, CL, 384, size_t(L::kAlloc), sm_count()); clusters > 0)
        r = std::min(r, clusters);
    }
    resident.store(r);
  }
  const int groups = std::max(1, std::min(p.tiles, resident.load()));
  bool launched;
  if constexpr (CL > 1) {
    launched = launch_clustered(kernel, dim3(unsigned(groups * CL)), CL, 384, size_t(L::kAlloc), stream, ta, tb, ty, p);
  } else {
    cuda_pdl::pdl_launch(kernel, dim3(groups), dim3(384), size_t(L::kAlloc), stream, ta, tb, ty, p);
    launched = cudaPeekAtLastError() == cudaSuccess;
    if (!launched) (void)cudaGetLastError();
  }
  if (!launched) return false;
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// One block a tile by default; clusters of two (B multicast) where asked (tests, A/B runs:
// 1.0-1.2x slower than one block a tile at BERT's and Llama's shapes, NOTES-perf.md v44) and a
// second row of tiles exists.
template <class T, int BN, bool B_NK, bool GATED, int ACT>
bool launch_cl(const HopperGemm& g, cudaStream_t stream) {
  if (g_cluster != 2 || g.M <= kBM) return launch_t<T, T, BN, B_NK, GATED, ACT, 1>(g, stream);
  return launch_t<T, T, BN, B_NK, GATED, ACT, 2>(g, stream);
}

// Y's rows of any pitch, or a float Y (an odd vocabulary's logits; as float where they are a
// float graph output of a 16-bit run): 256-column tiles, B [N, K] (a tied head; a [K, N] B
// with odd N has no 16-byte rows for TMA), one block a tile, the epilogues cuBLASLt has (the
// others run as a pass after, as on its path).
template <class T, class YT>
bool launch_rows(const HopperGemm& g, cudaStream_t stream) {
  using A = HopperGemmAct;
  switch (g.act) {
    case A::None: return launch_t<T, YT, 256, true, false, int(A::None), 1, true>(g, stream);
    case A::Relu: return launch_t<T, YT, 256, true, false, int(A::Relu), 1, true>(g, stream);
    case A::GeluTanh: return launch_t<T, YT, 256, true, false, int(A::GeluTanh), 1, true>(g, stream);
    default: return false;
  }
}

// Y's rows are 16-byte multiples from a 16-byte aligned Y: the kernels with the TMA store.
bool plain_y(const HopperGemm& g) { return !g.y_fp32 && g.N % 8 == 0 && aligned(g.y, 16); }

template <class T, bool B_NK, int ACT>
bool launch_pingpong(const HopperGemm& g, cudaStream_t stream) {
  constexpr int kStages = 6;
  using L = GemmLayout<128, kStages, 128>;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  constexpr auto kernel = gemm_hopper_pingpong_kernel<T, B_NK, kStages, ACT>;
  if (!allow_dynamic_smem_once<kernel>(L::kAlloc)) return false;
  CUtensorMap ta, tb;
  if (!make_gemm_operand_maps(&ta, &tb, g.dt, g.a, g.b, g.M, g.N, g.K, B_NK, kBK, kBM, 128)) return false;
  CUtensorMap ty;  // Y in boxes of [64 rows][64 columns], the staging panel's swizzle
  if (!make_map_2d(&ty, g.dt, g.y, g.M, g.N, g.N, 64, 64)) return false;
  GemmParams p{};
  p.M = int(g.M);
  p.N = int(g.N);
  p.tiles_m = int((g.M + kBM - 1) / kBM);
  p.tiles = p.tiles_m * int((g.N + 127) / 128);
  p.k_tiles = int((g.K + kBK - 1) / kBK);
  p.bias = g.bias;
  p.y = g.y;
  // Two tiles in flight a block (one a warpgroup): no more blocks than half the tiles, rounded up.
  const int grid = std::max(1, std::min((p.tiles + 1) / 2, sm_count()));
  cuda_pdl::pdl_launch(kernel, dim3(grid), dim3(384), size_t(L::kAlloc), stream, ta, tb, ty, p);
  if (cudaPeekAtLastError() != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Ping-pong for the plain (not gated) GEMMs unless the cooperative schedule is asked for.
template <class T, bool B_NK>
bool launch_pingpong_act(const HopperGemm& g, cudaStream_t stream) {
  using A = HopperGemmAct;
  switch (g.act) {
    case A::None: return launch_pingpong<T, B_NK, int(A::None)>(g, stream);
    case A::Relu: return launch_pingpong<T, B_NK, int(A::Relu)>(g, stream);
    case A::GeluErf: return launch_pingpong<T, B_NK, int(A::GeluErf)>(g, stream);
    case A::GeluTanh: return launch_pingpong<T, B_NK, int(A::GeluTanh)>(g, stream);
    case A::Relu2: return launch_pingpong<T, B_NK, int(A::Relu2)>(g, stream);
    default: return false;
  }
}

template <class T, int BN, bool B_NK, bool GATED>
bool launch_act(const HopperGemm& g, cudaStream_t stream) {
  using A = HopperGemmAct;
  if constexpr (GATED && B_NK) {  // the RMSNorm before the gate (hopper_gemm_fits: these only)
    if (g.rms_norm) {
      switch (g.act) {
        case A::Silu: return launch_t<T, T, BN, true, true, int(A::Silu), 1, false, true>(g, stream);
        case A::GeluTanh: return launch_t<T, T, BN, true, true, int(A::GeluTanh), 1, false, true>(g, stream);
        default: return false;
      }
    }
  }
  if (g.rms_norm) return false;
  if constexpr (GATED) {  // GatedMatMul's gates
    switch (g.act) {
      case A::Silu: return launch_cl<T, BN, B_NK, true, int(A::Silu)>(g, stream);
      case A::GeluErfExact: return launch_cl<T, BN, B_NK, true, int(A::GeluErfExact)>(g, stream);
      case A::GeluTanh: return launch_cl<T, BN, B_NK, true, int(A::GeluTanh)>(g, stream);
      case A::Relu: return launch_cl<T, BN, B_NK, true, int(A::Relu)>(g, stream);
      default: return false;
    }
  } else {  // FusedMatMul's activations
    switch (g.act) {
      case A::None: return launch_cl<T, BN, B_NK, false, int(A::None)>(g, stream);
      case A::Relu: return launch_cl<T, BN, B_NK, false, int(A::Relu)>(g, stream);
      case A::GeluErf: return launch_cl<T, BN, B_NK, false, int(A::GeluErf)>(g, stream);
      case A::GeluTanh: return launch_cl<T, BN, B_NK, false, int(A::GeluTanh)>(g, stream);
      case A::Relu2: return launch_cl<T, BN, B_NK, false, int(A::Relu2)>(g, stream);
      default: return false;
    }
  }
}

// Columns of B a block tile takes: the setter's width, else 256 where the 256-column tiles still
// fill the SMs (a gated tile of 256 holds 128 gate and the matching 128 up columns, so 128 of Y),
// else 128 (gated: 64 + 64; a 128-row prefill, e.g. Llama-1B's gate/up at 1 x 128, is 64 tiles of
// 256 on 132 SMs but 128 tiles of 128).
int tile_width(const HopperGemm& g) {
  if (g_tile_n == 128 || g_tile_n == 256) return g_tile_n;
  const int64_t out_cols = g.gated ? 128 : 256;
  const int64_t tiles = ((g.M + kBM - 1) / kBM) * ((g.N + out_cols - 1) / out_cols);
  return (g.gated || g.N >= 512) && tiles >= sm_count() ? 256 : 128;
}

template <class T, bool GATED>
bool launch_width(const HopperGemm& g, cudaStream_t stream) {
  if (tile_width(g) == 256)
    return g.b_nk ? launch_act<T, 256, true, GATED>(g, stream) : launch_act<T, 256, false, GATED>(g, stream);
  return g.b_nk ? launch_act<T, 128, true, GATED>(g, stream) : launch_act<T, 128, false, GATED>(g, stream);
}

template <class T>
bool launch_dt(const HopperGemm& g, cudaStream_t stream) {
  if (!plain_y(g)) return g.y_fp32 ? launch_rows<T, float>(g, stream) : launch_rows<T, T>(g, stream);
  if (g.gated) return launch_width<T, true>(g, stream);  // gated GEMMs are always cooperative
  if (schedule() == 2)
    return g.b_nk ? launch_pingpong_act<T, true>(g, stream) : launch_pingpong_act<T, false>(g, stream);
  return launch_width<T, false>(g, stream);
}

}  // namespace

bool hopper_gemm_fits(const HopperGemm& g, cudaStream_t stream) {
  if (g.dt != DType::Float16 && g.dt != DType::BFloat16) return false;
  if (g.M <= 0 || g.N <= 0 || g.K <= 0 || g.M >= (int64_t(1) << 31) || g.N >= (int64_t(1) << 31) ||
      g.K >= (int64_t(1) << 31) || g.M * g.N >= (int64_t(1) << 40))
    return false;
  // K: A's and B's rows are TMA rows (16-byte pitches). N: B's too where B is [K, N] or gated;
  // Y's rows may have any pitch (launch_rows), Y aligned to its element.
  if (g.K % 8 != 0 || ((!g.b_nk || g.gated) && g.N % 8 != 0)) return false;
  if (g.gated && 2 * g.N >= (int64_t(1) << 31)) return false;
  if (!g.a || !g.b || !g.y || !aligned(g.a, 16) || !aligned(g.b, 16) || !aligned(g.y, g.y_fp32 ? 4 : 2)) return false;
  if (g.bias && !aligned(g.bias, 4)) return false;
  // The RMSNorm in the kernel: gated, B [2N, K] (the runtime's layout), SiLU or tanh-GELU gates,
  // rows the TMA store writes.
  if (g.rms_norm && (!g.gated || !g.b_nk || !plain_y(g) ||
                     (g.act != HopperGemmAct::Silu && g.act != HopperGemmAct::GeluTanh) || !(g.norm_eps >= 0.f)))
    return false;
  // Rows of any pitch (launch_rows): not gated, B [N, K], the epilogues cuBLASLt has.
  if (!plain_y(g) && (g.gated || !g.b_nk ||
                      (g.act != HopperGemmAct::None && g.act != HopperGemmAct::Relu && g.act != HopperGemmAct::GeluTanh)))
    return false;
  return hopper_sm90a_ready(stream);
}

bool hopper_gemm_wanted(const HopperGemm& g) {
  const int m = mode();
  if (m == 0) return false;
  if (m == 2) return true;
  // The gate (GatedMatMul), whose cuBLASLt path writes the [M, 2N] product and needs a pass over
  // it: from 128 rows by default, where it measured faster than cuBLASLt + the gate pass (session
  // 43, H100, B as [2N, K]: 128 x 2048 x 2 * 8192 28.0 vs 30.5 us with 64 + 64-column tiles, 1024
  // rows 118.3 vs 124.8, 2048 rows 223.7 vs 233.8; Llama-1B-shaped 1 x 128 -1.9 %, 1 x 2048 -1.4 % end to end;
  // NOTES-perf.md v49); with m == 1 also 9-127 rows (not measured; 8 and fewer: the decode kernels).
  if (g.gated) return g.M >= (m == 1 ? 9 : 128);
  // The epilogues cuBLASLt lacks (the exact GELU; squared ReLU), whose cuBLASLt path needs a second
  // pass over Y, on GEMMs with enough rows to fill the SMs (small M has gemm_gelu.cu,
  // gemv_nk_fused.cu and cuBLASLt's small-M kernels): every one of them with m == 1.
  const bool intended =
      (g.act == HopperGemmAct::GeluErf || g.act == HopperGemmAct::GeluErfExact || g.act == HopperGemmAct::Relu2) &&
      g.M >= 1024;
  if (m == 1) return intended;
  // By default where it measured faster than cuBLASLt + the pass (session 22, the TMA-store
  // epilogue: BERT FFN1 4096 x 768 x 3072 43.9 vs 45.5 us, BERT-base 8 x 512 and 32 x 128 -2 %
  // end to end): 2048 rows or more. Not yet: 1024 rows (0.91x); ViT's 6304 rows are 0.93x in
  // isolation but even end to end (NOTES-perf v27).
  return intended && g.M >= 2048;
}

bool launch_gemm_hopper(const HopperGemm& g, cudaStream_t stream) {
  if (!hopper_gemm_fits(g, stream)) return false;
  return g.dt == DType::Float16 ? launch_dt<__half>(g, stream) : launch_dt<__nv_bfloat16>(g, stream);
}

void set_hopper_gemm(int m) { g_mode = m < 0 ? -2 : m > 2 ? 2 : m; }
void set_hopper_gemm_tile_n(int n) { g_tile_n = n == 128 || n == 256 ? n : 0; }
void set_hopper_gemm_schedule(int s) { g_schedule = s == 1 || s == 2 ? s : 0; }
void set_hopper_gemm_cluster(int c) { g_cluster = c == 1 || c == 2 ? c : 0; }
long long hopper_gemm_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
