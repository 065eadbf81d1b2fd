// Split-KV ("flash-decoding") attention for one query token over a KV cache, the decode step of
// fuseopt.Attention with past/present (host side: fused_attention_kernel.cc, opt-in through
// FUSEOPT_FLASH_DECODE=1 until it has run on a GPU). Reads the present keys/values in their
// [B, Hkv, S_kv, D] layout directly, so no re-layout copy is needed.
//
// Decode is a pure stream over K/V (Llama-3.2-1B, 2048 cached: 4 MB per layer, ~1 µs at
// 4.2 TB/s), so the kernel is built around reading each K/V byte once, 16 bytes at a time,
// with enough blocks in flight to keep every SM's loads going at batch 1:
//   pass 1 (decode_split): grid (splits, Hkv · head groups, B). A block takes one kv head, a
//     group of GB query heads that share it (GQA: the K/V rows are read once for the group,
//     not once per query head) and a chunk of at most kChunk keys. Scores: TPK threads per
//     key row, one 16-byte load each, GB dot products, a shuffle reduction; softmax of the
//     chunk in shared memory; P·V: TPV threads per value row, 16-byte loads, GB·VEC fp32
//     accumulators per thread, reduced across key groups by shuffles, then across warps.
//     The block writes (acc[Dv], max, sum) per query head to scratch.
//   pass 2 (decode_merge): grid (H, B); weights exp(m_s - M) per split computed once into
//     shared memory, then Y[b, 0, h·Dv + d] = sum_s w_s acc_s[d] / sum_s w_s l_s.
// decode_fused, the path a decode step takes (Dh == Dv, 16-byte rows, at most kMaxFusedSplits
// chunks): both passes in ONE launch. Measured in session 8 (ncu, Llama-1B step, 2049 keys),
// the two-pass kernels took 13.6 + 11.6 µs per layer to read 4 MB that stream in ~1 µs: each
// phase waited on the one before (K loads, then the mask, then V loads, then a merge whose
// loop issued one L2 load per split at a time), and the merge paid a launch of its own. Here
// every global load a thread needs (its kKpt keys' K and V pieces, their mask bits, the query)
// is issued before any arithmetic, so a block costs about one memory round trip; the block's
// partial goes to scratch and the LAST block of each (batch, head group) to arrive (a
// threadfence + an atomic counter, as split-K GEMMs do) merges the splits in a fixed order,
// so results are the same on every run. The counters must be zero at launch: the K/V append
// that precedes every decode step zeroes them (launch_kv_append_pair), other callers ask
// launch_flash_decode to memset them.
// Shapes the vector path does not take (D not a multiple of 16 bytes / VEC, D/VEC > 32,
// unaligned rows) run decode_split_scalar: the same algorithm one element at a time.
// Semantics as kernels/cpu/fused_attention.cc for S_q = 1 (causal keeps every key): a masked
// key scores mask_filter_value; a row whose every score is -inf gives NaN (0/0), as Softmax
// does, or 0 with masked_rows_zero.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_attention_decode_args.cuh"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/pdl.cuh"
#include "util/error.h"

namespace fuseopt::cuda_fused {
namespace {

using namespace decode;  // DecodeArgs, the shared constants (fused_attention_decode_args.cuh)

constexpr int kKpt = 4;              // keys per thread in decode_fused (loaded before any math)
constexpr int kMaxFusedSplits = 256; // beyond: the two-pass kernels (the last block's merge is serial in splits)

// Both passes in one launch (see the top of the file). Block: kv head hk, query heads h0 ..
// h0 + GB - 1, keys [j0, j0 + chunk) with chunk = kKpt · (kThreads / tpk): thread (grp, sub)
// holds the sub-th 16-byte piece of keys j0 + u · kpp + grp, u < kKpt, of K and of V.
template <class T, int GB>
__global__ void __launch_bounds__(kThreads) decode_fused(DecodeArgs a) {
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  constexpr int VEC = 16 / sizeof(T);
  __shared__ float red[kWarps][kMaxGD];
  __shared__ float stat_s[kWarps][GB];
  __shared__ float m_s[GB], l_s[GB];
  __shared__ bool last_s;
  const int split = blockIdx.x, b = blockIdx.z;
  const int groups = (a.H / a.Hkv) / GB;
  const int hk = blockIdx.y / groups, h0 = hk * (a.H / a.Hkv) + (blockIdx.y % groups) * GB;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int D = a.Dh, tpk = a.tpk, kpp = kThreads / tpk;
  const int sub = tid % tpk, grp = tid / tpk;
  const bool has = sub < D / VEC;
  const int j0 = split * a.chunk, n = max(0, min(a.St, j0 + a.chunk) - j0);
  const T* kb = static_cast<const T*>(a.k) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * D;
  const T* vb = static_cast<const T*>(a.v) + (int64_t(b) * a.Hkv + hk) * a.kv_rows * D;
  const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h0) * D;

  // Every load first: K, V, the mask bits, the query pieces.
  Vec<T, VEC> kr[kKpt], vr[kKpt];
  bool keep[kKpt];
#pragma unroll
  for (int u = 0; u < kKpt; ++u) {
    const int jj = u * kpp + grp;
    const bool in = has && jj < n;
    const int64_t off = int64_t(j0 + jj) * D + sub * VEC;
    if (in) {
      kr[u] = *reinterpret_cast<const Vec<T, VEC>*>(kb + off);
      vr[u] = *reinterpret_cast<const Vec<T, VEC>*>(vb + off);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) kr[u].v[e] = vr[u].v[e] = from_f<T>(0.f);  // 0 · p, never 0 · garbage
    }
    keep[u] = jj < n && (!a.mask || mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j0 + jj));
  }
  float qr[GB][VEC];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float t[VEC];
    if (has) load_vec<T, VEC>(t, q + g * D + sub * VEC);
#pragma unroll
    for (int e = 0; e < VEC; ++e) qr[g][e] = has ? t[e] * a.scale : 0.f;
  }

  // Scores: each key's dot product summed over its tpk lanes (every lane of the group ends with
  // it); a masked key scores the fill value, a key past the chunk -inf (it takes no mass).
  float s[kKpt][GB];
#pragma unroll
  for (int u = 0; u < kKpt; ++u) {
    const bool in_chunk = u * kpp + grp < n;
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float dot = 0.f;
#pragma unroll
      for (int e = 0; e < VEC; ++e) dot = fmaf(qr[g][e], to_f(kr[u].v[e]), dot);
      for (int o = tpk / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[u][g] = !in_chunk ? -INFINITY : keep[u] ? dot : a.fill;
    }
  }
  // The chunk's max per query head (NaN skipped, as fmaxf does on the CPU side), then
  // p = exp(s - m) and l = sum p over distinct keys (lanes tpk apart hold other keys).
  float m[GB];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float x = -INFINITY;
#pragma unroll
    for (int u = 0; u < kKpt; ++u) x = fmaxf(x, s[u][g]);
    for (int o = 16; o >= tpk; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    if (lane == 0) stat_s[warp][g] = x;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float x = stat_s[0][g];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) x = fmaxf(x, stat_s[w][g]);
    m[g] = x;
  }
  __syncthreads();  // stat_s is reused for the sums
  float acc[GB][VEC];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    const float base = m[g] == -INFINITY ? 0.f : m[g];  // a chunk with nothing above -inf: no mass
    float l = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
#pragma unroll
    for (int u = 0; u < kKpt; ++u) {
      const float p = __expf(s[u][g] - base);
      l += p;
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[g][e] = fmaf(p, to_f(vr[u].v[e]), acc[g][e]);
    }
    for (int o = 16; o >= tpk; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
    if (lane == 0) stat_s[warp][g] = l;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      for (int o = 16; o >= tpk; o >>= 1) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], o);
    if (lane < tpk && has)
#pragma unroll
      for (int e = 0; e < VEC; ++e) red[warp][g * D + sub * VEC + e] = acc[g][e];
  }
  __syncthreads();
  // Partials: acc [B, H, splits, D] (16-byte aligned rows for the merge's float4 loads), then
  // (max, sum) [B, H, splits, 2].
  float* acc_out = a.partial;
  float* ml_out = a.partial + int64_t(gridDim.z) * a.H * a.splits * D;
  for (int i = tid; i < GB * D; i += kThreads) {
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += red[w][i];
    const int g = i / D, d = i % D;
    acc_out[((int64_t(b) * a.H + h0 + g) * a.splits + split) * D + d] = o;
  }
#pragma unroll
  for (int g = 0; g < GB; ++g)
    if (tid == g) {  // (m[g] with a constant g: m stays in registers)
      float l = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) l += stat_s[w][g];
      float* out = ml_out + ((int64_t(b) * a.H + h0 + g) * a.splits + split) * 2;
      out[0] = m[g];
      out[1] = l;
    }

  // The last block of this (batch, head group) to finish merges every split.
  __threadfence();  // this block's partial is visible device-wide before it is counted
  __syncthreads();
  if (tid == 0) {
    unsigned* c = a.arrived + int64_t(b) * (a.H / GB) + blockIdx.y;
    last_s = atomicAdd(c, 1u) == unsigned(a.splits - 1);
  }
  __syncthreads();
  if (!last_s) return;
  __threadfence();  // the other blocks' partials, counted before this block's arrival, are read after it
  // Warp g: M and L of head g, and each split's weight exp(m_s - M) into shared memory.
  __shared__ float w_s[GB][kMaxFusedSplits];
  if (warp < GB) {
    const float* ml = ml_out + (int64_t(b) * a.H + h0 + warp) * a.splits * 2;
    float M = -INFINITY;
    for (int sp = lane; sp < a.splits; sp += 32) M = fmaxf(M, __ldcg(ml + 2 * sp));
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    float L = 0.f;
    for (int sp = lane; sp < a.splits; sp += 32) {
      const float ms = __ldcg(ml + 2 * sp);
      // A split with no score above -inf adds nothing (w = 0), except a NaN in its l / acc.
      const float w = ms == -INFINITY ? 0.f : __expf(ms - M);
      w_s[warp][sp] = w;
      L += w * __ldcg(ml + 2 * sp + 1);
    }
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    if (lane == 0) {
      m_s[warp] = M;
      l_s[warp] = L;
    }
  }
  __syncthreads();
  // Y: each output float4 (g, d4) summed over the splits by tpo neighbouring lanes, split
  // r, r + tpo, ..., kU loads in flight each, then a fixed shuffle tree: the same order on
  // every run (the merge used to issue one dependent L2 load per split).
  constexpr int kU = 8;
  const int D4 = D / 4, n_out = GB * D4;
  int tpo = 1;  // a power of two (the shuffle tree), at most a warp
  while (tpo < 32 && 2 * tpo * n_out <= kThreads) tpo <<= 1;
  for (int base_o = 0; base_o < n_out; base_o += kThreads / tpo) {
    const int o = base_o + tid / tpo, r = tid % tpo;
    const bool live = o < n_out;  // every lane stays for the shuffles
    const int g = live ? o / D4 : 0, d4 = live ? o % D4 : 0;
    const float4* acc4 =
        reinterpret_cast<const float4*>(acc_out + (int64_t(b) * a.H + h0 + g) * a.splits * D) + d4;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int sp0 = r; sp0 < a.splits; sp0 += tpo * kU) {
      float4 v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int sp = sp0 + u * tpo;
        v[u] = live && sp < a.splits ? __ldcg(acc4 + int64_t(sp) * D4) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int sp = sp0 + u * tpo;
        const float w = live && sp < a.splits ? w_s[g][sp] : 0.f;
        sum.x = fmaf(w, v[u].x, sum.x);
        sum.y = fmaf(w, v[u].y, sum.y);
        sum.z = fmaf(w, v[u].z, sum.z);
        sum.w = fmaf(w, v[u].w, sum.w);
      }
    }
    for (int off = tpo / 2; off > 0; off >>= 1) {
      sum.x += __shfl_xor_sync(0xffffffffu, sum.x, off);
      sum.y += __shfl_xor_sync(0xffffffffu, sum.y, off);
      sum.z += __shfl_xor_sync(0xffffffffu, sum.z, off);
      sum.w += __shfl_xor_sync(0xffffffffu, sum.w, off);
    }
    if (live && r == 0) {
      // L == 0 (every score -inf): 0/0 = NaN, as Softmax gives, or 0 with masked_rows_zero.
      const bool zero = a.rows_zero && m_s[g] == -INFINITY;
      const float L = l_s[g];
      T* y = static_cast<T*>(a.y) + (int64_t(b) * a.H + h0 + g) * D + d4 * 4;
      y[0] = from_f<T>(zero ? 0.f : sum.x / L);
      y[1] = from_f<T>(zero ? 0.f : sum.y / L);
      y[2] = from_f<T>(zero ? 0.f : sum.z / L);
      y[3] = from_f<T>(zero ? 0.f : sum.w / L);
    }
  }
}

// Query heads per block: the largest of 8, 4, 2, 1 that divides the group H / Hkv and keeps
// GB · D within kMaxGD (1 on the scalar path).
int heads_per_block(int H, int Hkv, int Dh, int Dv, bool vec) {
  if (!vec) return 1;
  const int G = H / Hkv;
  for (int gb : {8, 4, 2})
    if (G % gb == 0 && gb * std::max(Dh, Dv) <= kMaxGD) return gb;
  return 1;
}

struct Plan {
  bool vec;
  int gb, splits, chunk;
};

// Splits: at least ceil(St / kChunk) (the chunk fits shared memory); more where the grid
// would not reach ~2 blocks per SM (batch 1: 8 kv heads x 1 would be 8 blocks on 132 SMs),
// but chunks of no fewer than kMinChunk keys.
Plan make_plan(DType dt, int B, int H, int Hkv, int St, int Dh, int Dv, bool aligned) {
  Plan p;
  const int vec = dt == DType::Float ? 4 : 8;
  p.vec = aligned && Dh % vec == 0 && Dv % vec == 0 && Dh / vec <= 32 && Dv / vec <= 32;
  p.gb = heads_per_block(H, Hkv, Dh, Dv, p.vec);
  const int64_t blocks = int64_t(B) * (H / p.gb);
  const int64_t want = std::max<int64_t>(1, (2 * int64_t(sm_count()) + blocks - 1) / blocks);
  const int64_t lo = (St + kChunk - 1) / kChunk, hi = std::max(1, (St + kMinChunk - 1) / kMinChunk);
  p.splits = static_cast<int>(std::max<int64_t>(lo, std::min<int64_t>(want, hi)));
  p.chunk = (St + p.splits - 1) / p.splits;
  p.splits = std::max(1, (St + p.chunk - 1) / p.chunk);  // no empty trailing split
  return p;
}

// decode_fused's plan: chunks of kKpt key rows per thread; not taken (ok false) where Dh != Dv,
// rows are not 16-byte vectors, or the cache needs more than kMaxFusedSplits chunks.
struct FusedPlan {
  bool ok;
  int gb, tpk, chunk, splits;
};

// B x heads-groups x chunks beyond kFusedMaxBlocksPerSm blocks per SM go to the two-pass
// kernels: session 8's micro-benchmark (append + attention per layer, H200) had the one-launch
// kernel ahead at 1 x 2048 (18.9 vs 19.9 us, 264 blocks) and behind at 8 x 2048 (73.3 vs 67.3,
// 2112 blocks, where the two-pass kernels' 228-key chunks move fewer partials).
constexpr int kFusedMaxBlocksPerSm = 4;

FusedPlan make_fused_plan(DType dt, int B, int H, int Hkv, int St, int Dh, int Dv, bool aligned) {
  FusedPlan p{};
  const int vec = dt == DType::Float ? 4 : 8;
  if (!aligned || Dh != Dv || Dh % vec != 0 || Dh / vec > 32) return p;
  const int G = H / Hkv;
  p.gb = G % 4 == 0 && 4 * Dh <= kMaxGD ? 4 : G % 2 == 0 && 2 * Dh <= kMaxGD ? 2 : 1;
  int tpk = 1;
  while (tpk < Dh / vec) tpk <<= 1;
  p.tpk = tpk;
  p.chunk = kKpt * (kThreads / tpk);
  p.splits = (St + p.chunk - 1) / p.chunk;
  p.ok = p.splits <= kMaxFusedSplits &&
         int64_t(B) * (H / p.gb) * p.splits <= int64_t(kFusedMaxBlocksPerSm) * sm_count();
  return p;
}

size_t counter_bytes(int B, int H) { return (size_t(B) * H * sizeof(unsigned) + 255) / 256 * 256; }

template <class T>
void launch_fused_t(DecodeArgs a, const FusedPlan& p, int B, cudaStream_t stream) {
  a.splits = p.splits;
  a.chunk = p.chunk;
  a.gb = p.gb;
  a.tpk = p.tpk;
  const dim3 grid(p.splits, a.H / p.gb, B), block(kThreads);
  switch (p.gb) {
    case 4: cuda_pdl::pdl_launch(decode_fused<T, 4>, grid, block, 0, stream, a); break;
    case 2: cuda_pdl::pdl_launch(decode_fused<T, 2>, grid, block, 0, stream, a); break;
    default: cuda_pdl::pdl_launch(decode_fused<T, 1>, grid, block, 0, stream, a); break;
  }
}


std::atomic<long long> g_launches{0};        // flash_decode_launch_count
std::atomic<long long> g_fused_launches{0};  // flash_decode_fused_launch_count

// FUSEOPT_DECODE_FUSED=0 sends every decode step to the two-pass kernels (A/B, tests).
bool fused_decode_enabled() {
  const char* e = std::getenv("FUSEOPT_DECODE_FUSED");
  return !(e && std::string(e) == "0");
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool flash_decode_supported(int Dh, int Dv, int H, int Hkv) {
  return Dh >= 1 && Dh <= kMaxD && Dv >= 1 && Dv <= kMaxD && H > 0 && Hkv > 0 && H % Hkv == 0;
}

size_t flash_decode_scratch_bytes(DType dt, int B, int H, int Hkv, int St, int Dh, int Dv) {
  // The arrival counters, then the partials for the worst case over alignment and paths.
  const Plan a = make_plan(dt, B, H, Hkv, St, Dh, Dv, true), b = make_plan(dt, B, H, Hkv, St, Dh, Dv, false);
  const FusedPlan f = make_fused_plan(dt, B, H, Hkv, St, Dh, Dv, true);
  const int splits = std::max({a.splits, b.splits, f.ok ? f.splits : 1});
  return counter_bytes(B, H) + size_t(B) * H * splits * (Dv + 2) * sizeof(float);
}

size_t flash_decode_counter_bytes(int B, int H) { return counter_bytes(B, H); }

// q: [B, 1, H·Dh] rows at q_batch_stride; k/v: the present [B, Hkv, St, D]; y: [B, 1, H·Dv].
void launch_flash_decode(DType dt, const void* q, int64_t q_batch_stride, const void* k, const void* v,
                         const void* mask, DType mask_dtype, void* y, void* scratch, int B, int H, int Hkv, int St,
                         int Dh, int Dv, float scale, float fill, bool rows_zero, cudaStream_t stream,
                         bool counters_zeroed, int kv_rows) {
  FUSE_CHECK(St > 0 && flash_decode_supported(Dh, Dv, H, Hkv), "flash decode: unsupported sizes");
  const int vec = dt == DType::Float ? 4 : 8;
  const bool aligned = aligned16(q) && aligned16(k) && aligned16(v) && q_batch_stride % vec == 0;
  const Plan p = make_plan(dt, B, H, Hkv, St, Dh, Dv, aligned);
  const FusedPlan f = fused_decode_enabled() ? make_fused_plan(dt, B, H, Hkv, St, Dh, Dv, aligned) : FusedPlan{};
  DecodeArgs a{};
  a.q = q;
  a.q_batch_stride = q_batch_stride;
  a.k = k;
  a.v = v;
  a.mask = mask;
  a.mask_dtype = mask_dtype;
  a.arrived = static_cast<unsigned*>(scratch);
  a.partial = reinterpret_cast<float*>(static_cast<char*>(scratch) + counter_bytes(B, H));
  a.y = y;
  a.H = H;
  a.Hkv = Hkv;
  a.St = St;
  a.kv_rows = kv_rows > 0 ? kv_rows : St;
  a.Dh = Dh;
  a.Dv = Dv;
  a.splits = p.splits;
  a.chunk = p.chunk;
  a.gb = p.gb;
  a.scale = scale;
  a.fill = fill;
  a.rows_zero = rows_zero;
  if (f.ok) {
    if (!counters_zeroed) FUSED_CUDA_CHECK(cudaMemsetAsync(a.arrived, 0, counter_bytes(B, H), stream), "flash decode counters");
    switch (dt) {
      case DType::Float16: launch_fused_t<__half>(a, f, B, stream); break;
      case DType::BFloat16: launch_fused_t<__nv_bfloat16>(a, f, B, stream); break;
      case DType::Float: launch_fused_t<float>(a, f, B, stream); break;
      default: FUSE_CHECK(false, "flash decode: unsupported dtype " << dtype_name(dt));
    }
    g_fused_launches.fetch_add(1, std::memory_order_relaxed);
  } else {
    launch_two_pass(dt, a, p.vec, B, stream);
  }
  g_launches.fetch_add(1, std::memory_order_relaxed);
}

long long flash_decode_launch_count() { return g_launches.load(std::memory_order_relaxed); }
long long flash_decode_fused_launch_count() { return g_fused_launches.load(std::memory_order_relaxed); }

bool flash_decode_vector_path(DType dt, int Dh, int Dv) {
  return make_plan(dt, 1, 1, 1, 1, Dh, Dv, true).vec;
}

}  // namespace fuseopt::cuda_fused
