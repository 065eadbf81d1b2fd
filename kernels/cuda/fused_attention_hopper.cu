// Hopper (sm_90a) flash attention for fp16/bf16, head dim 64 or 128
// (FlashAttention-3 scheme, written for fuseopt; NOTES-perf.md v7):
//   block = a producer warpgroup (its lane 0 issues the TMA copies; with a
//   key-padding mask its first warp also writes per-key flags) + NC consumer
//   warpgroups of 64 query rows each (setmaxnreg:
//   NC = 2, head dim 128, 40/232 registers, 24/240 with 160/176-key tiles; NC = 1,
//   64-row blocks two per SM, head dim 64 at S_q <= 1024 and causal; NC = 3,
//   head dim 64 past 1024).
//   Q and K/V tiles [128 keys; 160 at head dim 128 without a mask] reach
//   shared memory by TMA (cp.async.bulk.tensor,
//   128-byte swizzle, zero-filled past the end), K/V through a STAGES-deep
//   ring guarded by mbarriers (full: TMA bytes landed; K-empty / V-empty: all
//   consumer warps are done with the stage's K / V).
//   S = Q·Kᵀ: wgmma m64n128k16 (m64n160k16), A and B from shared memory (descriptors).
//   O += P·V: wgmma m64n(D)k16 (or 2 x m64n64 for D = 128), P from registers
//   (the S accumulator converted to fp16/bf16 is the A fragment), V as an
//   MN-major B (transpose bit), so V needs no transposed copy.
//   Within a warpgroup S(t+1) and PV(t) are issued back to back and the
//   softmax of S(t+1) runs while PV(t) is on the tensor cores; between
//   warpgroups a named-barrier ping-pong orders the MMA issue, its turns
//   running on across a block's items.
//   Online softmax in fp32: running max and sum per row; one FFMA (scale·log2e
//   folded) and one ex2 per score, the keys a row may not see (causal
//   diagonal, past S_kv) set to -inf first; with a key-padding mask, tiles
//   holding a masked key or one past S_kv (the producer's flags say which)
//   check each score. Varlen: a batch whose mask is a prefix of n kept keys (the per-batch
//   counts AttentionArgs::mask_prefix, computed once a forward) writes no flags; its items
//   run over their first n keys as without a mask, and a launch whose every batch is a
//   prefix runs the unmasked one-thread producer.
//   Epilogue (head dim 64, and 128 with 160-key tiles): O / l staged in shared
//   memory and written by one TMA store a warpgroup while it starts its next item.
//   Persistent grid (blocks walk query-tile x head x batch items; the K/V ring
//   and its phases carry over); causal in snake order of the heaviest-first
//   items.
// Semantics are the generic kernel's (fused_launch.cuh): key-padding mask
// replaced by mask_filter_value, causal bottom-right aligned (-inf), a row
// with every score -inf gives NaN, finfo.min fills give uniform rows.
// Only the sm_90a image holds the kernel body (CMakeLists.txt gives this
// file that target besides the project's sm_90); the host side checks at
// run time that the device is 9.0 and that the loaded image is sm_90a.
//
// Files: fused_attention_hopper_sync.cuh (device primitives), _kernel.cuh (the kernel),
// _layout.cuh (its parameters, shared-memory layout and register split), _producer.cuh (its
// producer warpgroup), _softmax.cuh (its consumers' per-tile softmax), _wgmma.cuh (the MMA
// wrappers); this file: the host side (TMA maps, variant choice, switches, the device probe).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/dynamic_smem.cuh"
#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_attention_hopper_kernel.cuh"
#include "kernels/cuda/hopper_device.h"
#include "kernels/cuda/tma_encode.h"

namespace fuseopt::cuda_fused {

namespace {

using hopper::hopper_attention_kernel;
using hopper::HopperParams;
using hopper::kLog2e;
using hopper::Layout;

// Writes 1 when the image that runs is the sm_90a one (holds the kernel body).
__global__ void hopper_probe_kernel(int* out) {
#if defined(FUSEOPT_HOPPER_DEVICE)
  *out = 1;
#else
  *out = 0;
#endif
}

// ---------------- host side ----------------

int g_pingpong = 1;  // attention_hopper_set_pingpong
int g_blocks = 0;    // attention_hopper_set_blocks: 0 = by shape, else the rows (64, 128, 192)
int g_persistent = 1;  // attention_hopper_set_persistent
int g_max_blocks = 0;  // its optional cap on the grid (tests: several items per block)
int g_wide_pv = 1;     // attention_hopper_set_wide_pv
int g_causal_persistent = 1;  // attention_hopper_set_causal_persistent
int g_key_tile = 0;            // attention_hopper_set_key_tile: 0 = by shape, else 128, 160 or 176
int g_tma_store = 1;           // attention_hopper_set_tma_store
int g_mask_prefix = -1;        // attention_hopper_set_mask_prefix (-1: FUSEOPT_ATTENTION_MASK_PREFIX, default on)
std::atomic<long long> g_launches{0};  // attention_hopper_launch_count

int sm_count() {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  if (cached[dev] == 0) cudaDeviceGetAttribute(&cached[dev], cudaDevAttrMultiProcessorCount, dev);
  return cached[dev];
}

// Head dim 64: rows per block by shape (measured, NOTES-perf.md v36, H100):
// - causal: 64-row blocks, two per SM, on the persistent grid (snake order):
//   8x12x512 19.0 us vs 21.7 one block per item, 1x32x2048 53.5 vs 60.1;
// - no causal, S_q > 1024: 192-row blocks (three consumer warpgroups; since the
//   unmasked producer and P·V completing before the softmax they no longer spill):
//   1x33x1536 47.4 us vs 52.0 (64 rows), 1x32x2048 88.1 vs 89.1, with a mask
//   114.9 vs 117.9 (128 rows); at S 512 their 192-row tiles waste a third (30.8 vs 22.3);
// - else 64-row blocks at S_kv <= 1024, 128-row beyond (v7, v26).
int default_rows_d64(const AttentionArgs& a) {
  if (a.causal) return 64;
  if (a.Sq > 1024) return 192;
  return a.Skv <= 1024 ? 64 : 128;
}

// View of Q, K or V as a 4-d tensor [B][seq][heads][D] (innermost last), one
// box = 64 head-dim columns x `rows` positions of one head. The strides need not
// grow with the dimension: a KV cache's present [B, Hkv, S, D] is this view with
// head_stride S·D and seq_stride D (TMA wants each a multiple of 16 bytes only).
bool make_map(CUtensorMap* map, DType dt, const void* base, int heads, int seq, int batch, int D,
              int64_t head_stride, int64_t seq_stride, int64_t batch_stride, int rows) {
  auto encode = tma_encode_tiled();
  if (!encode) return false;
  const cuuint64_t dims[4] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(seq), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(head_stride) * 2, cuuint64_t(seq_stride) * 2,
                                 cuuint64_t(batch_stride) * 2};
  const cuuint32_t box[4] = {64, 1, cuuint32_t(rows), 1};
  const cuuint32_t estr[4] = {1, 1, 1, 1};
  return encode(map, dt == DType::Float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4,
                const_cast<void*>(base), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The varlen path for batches whose mask is a prefix (AttentionArgs::mask_prefix): on unless
// attention_hopper_set_mask_prefix(false) or FUSEOPT_ATTENTION_MASK_PREFIX=0 (A/B runs).
bool mask_prefix_on() {
  if (g_mask_prefix >= 0) return g_mask_prefix == 1;
  static const bool env = [] {
    const char* e = std::getenv("FUSEOPT_ATTENTION_MASK_PREFIX");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return env;
}

template <class T, int D, int BN, int STAGES, int NC, int QB, bool WIDE_PV, bool MASKED>
bool launch_t(const AttentionArgs& args, cudaStream_t stream) {
  const AttentionArgs a = with_head_strides(args);
  using L = Layout<D, BN, STAGES, NC, QB>;
  constexpr int kBM = L::kBM;
  static_assert(L::kAlloc <= 232448, "over the 227 KB of shared memory a block may have");
  if (!allow_dynamic_smem_once<hopper_attention_kernel<T, D, BN, STAGES, NC, QB, WIDE_PV, MASKED>>(L::kAlloc))
    return false;
  CUtensorMap tq, tk, tv;
  if (!make_map(&tq, a.dtype, a.q, a.H, a.Sq, a.B, D, D, a.q_seq_stride, a.q_batch_stride, kBM) ||
      !make_map(&tk, a.dtype, a.k, a.Hkv, a.Skv, a.B, D, a.k_head_stride, a.k_seq_stride, a.k_batch_stride, BN) ||
      !make_map(&tv, a.dtype, a.v, a.Hkv, a.Skv, a.B, D, a.v_head_stride, a.v_seq_stride, a.v_batch_stride, BN))
    return false;  // the driver refused a map: the caller runs the mma.sync kernel instead
  // Y [B][S_q][H][D] for the TMA-store epilogue (Layout::kTmaStore), a 64-row box a consumer
  // warpgroup; the other variants never read it (a copy of Q's map fills the parameter).
  CUtensorMap ty = tq;
  if (L::kTmaStore &&
      !make_map(&ty, a.dtype, a.y, a.H, a.Sq, a.B, D, D, int64_t(a.H) * D, int64_t(a.Sq) * a.H * D, 64))
    return false;
  HopperParams p;
  p.H = a.H;
  p.Hkv = a.Hkv;
  p.Sq = a.Sq;
  p.Skv = a.Skv;
  p.scale = a.scale;
  p.scale_log2 = a.scale * kLog2e;
  p.fill = a.mask_filter_value;
  p.causal = a.causal ? 1 : 0;
  p.pingpong = g_pingpong;
  p.tma_store = g_tma_store;
  p.rows_zero = a.masked_rows_zero ? 1 : 0;
  p.mask = a.mask;
  p.mask_dtype = a.mask_dtype;
  p.kv_prefix = MASKED && mask_prefix_on() && mask_prefix_exact(a.mask_filter_value) ? a.mask_prefix : nullptr;
  p.sinks = a.sinks;
  p.y = a.y;
  const int64_t items = int64_t((a.Sq + kBM - 1) / kBM) * a.H * a.B;
  if (items >= (int64_t(1) << 31)) return false;
  p.n_items = static_cast<int>(items);
  // Persistent: as many blocks as fit at once (one or two per SM), each
  // walking the items; otherwise one block per item. Causal items differ in
  // work: the persistent grid takes them heaviest first in snake order (the
  // blocks' work evens out). At head dim 128 one block per causal item was
  // faster until the consumers' ping-pong turns ran on across items; since then
  // the persistent grid is 4-8 % faster there too (NOTES-perf.md v37).
  int grid = p.n_items;
  if (g_persistent && (!a.causal || g_causal_persistent || g_max_blocks > 0)) {
    int fit = sm_count() * hopper::blocks_per_sm(NC);
    if (g_max_blocks > 0 && g_max_blocks < fit) fit = g_max_blocks;
    if (fit > 0 && fit < grid) grid = fit;
  }
  // One block per causal item: longest first over all heads (FUSEOPT_ATTENTION_CAUSAL_ORDER=head
  // keeps the per-head order, for A/B runs).
  static const bool per_head_order = [] {
    const char* e = std::getenv("FUSEOPT_ATTENTION_CAUSAL_ORDER");
    return e && std::strcmp(e, "head") == 0;
  }();
  p.heaviest_first = a.causal && !per_head_order ? 1 : 0;
  p.snake = p.heaviest_first && grid < p.n_items ? 1 : 0;
  // PDL: the kernel waits for the previous one first thing (fused_attention_hopper_kernel.cuh).
  cuda_pdl::pdl_launch(hopper_attention_kernel<T, D, BN, STAGES, NC, QB, WIDE_PV, MASKED>, dim3(grid),
                       dim3(L::kThreads), L::kAlloc, stream, tq, tk, tv, ty, p);
  g_launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The kernel without a key-padding mask is its own instantiation (no key flags: a leaner
// producer, fused_attention_hopper_producer.cuh); with one the producer warp writes per-key flags.
template <class T, int D, int STAGES, int NC, int QB, bool WIDE_PV>
bool launch_v(const AttentionArgs& a, cudaStream_t stream) {
  return a.mask ? launch_t<T, D, 128, STAGES, NC, QB, WIDE_PV, true>(a, stream)
                : launch_t<T, D, 128, STAGES, NC, QB, WIDE_PV, false>(a, stream);
}

// Head dim 128 without a mask: 160-key tiles (two stages, 24 / 240 registers, the wide P·V) and
// O through shared memory and a TMA store, causal or not; 176 (FlashAttention-3's width, no room
// for O's buffer) and 128 stay as variants. With a mask 128 (its key flags are written 32 keys a
// pass). Measured (NOTES-perf.md v38, H100, interleaved with SDPA): 4 x 16 x 2048 x 128 245.7 us
// against 176's 249.4 and 128's 271 (v37), causal on the persistent grid 156.8 against 128's
// 169.7; 1 x 16 x 8192 x 128 equal to 176 without causal (921.5 / 915.6), causal 480.2 / 491.8.
int key_tile_d128(const AttentionArgs& a) {
  if (a.mask || !g_wide_pv) return 128;
  if (g_key_tile > 0) return g_key_tile;
  return 160;
}

// -1: not yet known for the device; 0: no; 1: yes.
int g_device_ok[64];
bool g_device_init = false;
int g_mode = -1;
// On by default (FUSEOPT_HOPPER_ATTENTION=0 switches it off): faster than the mma.sync kernel
// on every benchmark shape. Session 4 made it opt-in after three cases of its test failed under
// GPU load (relative error 1.0, whole outputs wrong); the cause was the test harness, not the
// kernel: inputs were uploaded with a cudaMemcpy from pageable memory, which may return before
// the DMA lands and is ordered only on the legacy stream, while the kernel ran on a non-blocking
// stream (tests/support/cuda_kernel_check.h, upload_bytes). Session 5 re-ran it under load and
// through compute-sanitizer (NOTES-perf.md v10).
constexpr bool kDefaultOn = true;

// 0 = off, 1 = forced on (wherever it is correct), -1 = default.
int switch_state() {
  if (g_mode >= 0) return g_mode;
  static const int env = [] {
    const char* e = std::getenv("FUSEOPT_HOPPER_ATTENTION");
    if (!e || !*e) return -1;
    return std::strcmp(e, "0") == 0 ? 0 : 1;
  }();
  return env;
}

// Default choice: where the kernel measured faster than the mma.sync one: everywhere
// (short causal sequences with a padding mask went to the mma.sync kernel until the
// persistent causal grid: 32x12x128x64 14.4 vs 16.9 us, NOTES-perf.md v36).
bool default_takes(const AttentionArgs&) { return kDefaultOn; }

bool takes(const AttentionArgs& a) {
  const int st = switch_state();
  return st == 1 || (st < 0 && default_takes(a));
}

// Compute capability 9.0 and the sm_90a image loaded (probed once per
// device, outside stream capture).
bool probe_sm90a(cudaStream_t stream) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  if (!g_device_init) {
    for (int& v : g_device_ok) v = -1;
    g_device_init = true;
  }
  if (g_device_ok[dev] >= 0) return g_device_ok[dev] == 1;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) {
    g_device_ok[dev] = 0;
    return false;
  }
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return false;
  int* d = nullptr;
  int h = 0;
  bool ok = cudaMalloc(&d, sizeof(int)) == cudaSuccess;
  if (ok) {
    hopper_probe_kernel<<<1, 1>>>(d);
    ok = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
  }
  (void)cudaGetLastError();
  g_device_ok[dev] = ok && h == 1 ? 1 : 0;
  return g_device_ok[dev] == 1;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

bool args_fit(const AttentionArgs& a) {
  if (a.dtype != DType::Float16 && a.dtype != DType::BFloat16) return false;
  if (a.Dh != a.Dv || (a.Dh != 64 && a.Dh != 128)) return false;
  if (a.bias) return false;
  if (!(a.scale > 0.f) || !std::isfinite(a.scale)) return false;
  if (a.B <= 0 || a.Sq <= 0 || a.Skv <= 0 || a.H <= 0 || a.Hkv <= 0 || a.H % a.Hkv != 0) return false;
  if (a.B > 65535 || a.H > 65535) return false;
  // TMA: 16-byte aligned base addresses and strides.
  if (!aligned16(a.q) || !aligned16(a.k) || !aligned16(a.v) || !aligned16(a.y)) return false;
  const AttentionArgs n = with_head_strides(a);
  for (int64_t s : {n.q_batch_stride, n.q_seq_stride, n.k_batch_stride, n.k_seq_stride, n.v_batch_stride,
                    n.v_seq_stride, n.k_head_stride, n.v_head_stride})
    if (s % 8 != 0 || s <= 0) return false;
  return true;
}

}  // namespace

bool hopper_sm90a_ready(cudaStream_t stream) { return probe_sm90a(stream); }

void attention_set_hopper(int mode) { g_mode = mode < 0 ? -1 : mode == 0 ? 0 : 1; }
void attention_hopper_set_pingpong(bool on) { g_pingpong = on ? 1 : 0; }
void attention_hopper_set_blocks(int rows) { g_blocks = rows == 64 || rows == 128 || rows == 192 ? rows : 0; }
void attention_hopper_set_persistent(bool on, int max_blocks) {
  g_persistent = on ? 1 : 0;
  g_max_blocks = max_blocks > 0 ? max_blocks : 0;
}
void attention_hopper_set_wide_pv(bool on) { g_wide_pv = on ? 1 : 0; }
void attention_hopper_set_causal_persistent(bool on) { g_causal_persistent = on ? 1 : 0; }
void attention_hopper_set_key_tile(int keys) { g_key_tile = keys == 128 || keys == 160 || keys == 176 ? keys : 0; }
void attention_hopper_set_tma_store(bool on) { g_tma_store = on ? 1 : 0; }
void attention_hopper_set_mask_prefix(int mode) { g_mask_prefix = mode < 0 ? -1 : mode == 0 ? 0 : 1; }
long long attention_hopper_launch_count() { return g_launches.load(std::memory_order_relaxed); }

bool hopper_attention_applies(const AttentionArgs& a) { return args_fit(a) && takes(a) && hopper_sm90a_ready(nullptr); }

bool launch_hopper_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (!args_fit(a) || !takes(a) || !hopper_sm90a_ready(stream)) return false;
  // 64-row blocks (two per SM) where 128-row blocks would leave SMs idle or
  // the sequence is too short to hide a block's prologue (default_rows_d64).
  const int rows = a.Dh == 128 ? 128 : g_blocks > 0 ? g_blocks : default_rows_d64(a);
  if (a.dtype == DType::Float16) {
    if (a.Dh == 128 && key_tile_d128(a) == 176) return launch_t<__half, 128, 176, 2, 2, 1, true, false>(a, stream);
    if (a.Dh == 128 && key_tile_d128(a) == 160) return launch_t<__half, 128, 160, 2, 2, 1, true, false>(a, stream);
    if (a.Dh == 128)
      return g_wide_pv ? launch_v<__half, 128, 3, 2, 1, true>(a, stream)
                       : launch_v<__half, 128, 3, 2, 1, false>(a, stream);
    return rows == 64    ? launch_v<__half, 64, 2, 1, 2, false>(a, stream)
           : rows == 192 ? launch_v<__half, 64, 4, 3, 2, false>(a, stream)
                         : launch_v<__half, 64, 4, 2, 2, false>(a, stream);
  }
  if (a.Dh == 128 && key_tile_d128(a) == 176)
    return launch_t<__nv_bfloat16, 128, 176, 2, 2, 1, true, false>(a, stream);
  if (a.Dh == 128 && key_tile_d128(a) == 160)
    return launch_t<__nv_bfloat16, 128, 160, 2, 2, 1, true, false>(a, stream);
  if (a.Dh == 128)
    return g_wide_pv ? launch_v<__nv_bfloat16, 128, 3, 2, 1, true>(a, stream)
                     : launch_v<__nv_bfloat16, 128, 3, 2, 1, false>(a, stream);
  return rows == 64    ? launch_v<__nv_bfloat16, 64, 2, 1, 2, false>(a, stream)
         : rows == 192 ? launch_v<__nv_bfloat16, 64, 4, 3, 2, false>(a, stream)
                       : launch_v<__nv_bfloat16, 64, 4, 2, 2, false>(a, stream);
}

}  // namespace fuseopt::cuda_fused
