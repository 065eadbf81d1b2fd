// The decode step of fuseopt.Attention with past/present in ONE launch: the K/V append
// (present = past ++ the new row) and split-KV attention for S_q = 1, the splits of a
// (batch, head group) merged through a thread-block cluster (host side:
// fused_attention_kernel.cc; the older two-launch path is fused_attention_kv_cache.cu +
// fused_attention_decode.cu). Since session 17 launch_decode_append first offers the step to
// the tensor-core kernel (fused_attention_decode_mma.cu: fp16/bf16, head dim 64/128, up to 16
// query heads a kv head; 3x faster at 8 x 2048); this one takes what that declines, or all of it
// with FUSEOPT_DECODE_MMA=0.
//
// Why (session 10's ncu budget of the Llama-1B-shaped fp16 step, per layer): at 8 x 2048 the
// append took 33.5 us (67 MB moved) and the two-pass attention 34.4 + 4.8 us to read the 33.5 MB
// the append had just written; at 1 x 2048, 6.8 + 16.4 us for 4 MB each way. Both kernels read
// the same rows. Here each block reads its chunk of the cache once, from the past (and the new
// row from the projection's output), stores it to the present and uses it for the scores and
// P·V while it is in registers: the bytes the step must move (read the past, write the present)
// and nothing else, in one launch.
//
// Block: kv head hk, query heads h0 .. h0 + GB - 1 that share it (GQA: the rows are read once
// for the group), keys [j0, j0 + chunk) of its split, in passes of kKpt · (threads / tpk)
// keys: thread (grp, sub) holds the sub-th 16-byte piece of kKpt key rows of K and of V. The
// loads of pass p + 1 are issued before pass p's arithmetic (two register buffers), so a
// block always has a pass of loads in flight. Online softmax per thread in fp32; at the end
// the key groups of a warp, then the warps, are combined in a fixed order.
// Merge: the splits of one (batch, head group) are the blocks of one cluster (grid x = splits
// = cluster x <= 8). Each block leaves (max, sum, acc[GB·D]) in its shared memory; after a
// cluster barrier every block merges a slice of the outputs by reading all ranks' partials
// through distributed shared memory in rank order (deterministic), and a second barrier keeps
// each block's shared memory alive until the others have read it. No scratch, no counters,
// no global round trip for the merge.
// Only one head group per kv head (blockIdx.y % groups == 0) writes the present, so every
// present row is written exactly once.
// Measured (H200, fp16, 32/8 heads, D 64, append + attention per layer; bench_kernels
// "[decode_bench]"): 1 x 128 5.2 us (two launches before: 7.0), 8 x 128 8.4 (10.6), 1 x 2048 16.1
// staged / 16.5 in registers (18.7), 8 x 2048 44.4 (67.0). NOTES-perf.md v15. Session 12: 1 x 2048
// 10.4 with 512 threads a block (make_plan), the model's step at 1 x 2048 1.047 -> 0.880 ms (v17).
//
// Semantics as kernels/cpu/fused_attention.cc for S_q = 1 (causal keeps every key): a masked key
// scores mask_filter_value; a NaN score poisons the row; a row whose every score is -inf gives
// NaN (0/0), as Softmax does, or 0 with masked_rows_zero.
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cluster_launch.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/fused_attention_common.cuh"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/pdl.h"
#include "util/error.h"

namespace fuseopt::cuda_fused {
namespace {

namespace cg = cooperative_groups;

// Threads per block: 128, or 256 / 512 where a long cache would leave each warp alone on its
// scheduler walking many passes (make_plan). The block's partials in shared memory shrink with
// the warps: GB · D <= kMaxGD · 128 / threads.
constexpr int kMinThreads = 128, kMaxThreads = 512;
constexpr int kKpt = 2;          // key rows per thread per pass (two passes in flight: 4)
constexpr int kMaxGD = 1024;     // GB · D: the block's partial in shared memory
constexpr int kMaxCluster = 8;   // portable cluster size: the most splits per (batch, head group)

struct AppendArgs {
  const void* q;            // [B, 1, H·D] rows at q_batch_stride
  int64_t q_batch_stride;
  const void* past_k;       // [B, Hkv, Sp, D]
  const void* past_v;
  const void* new_k;        // row of batch b, kv head h at new_k + b·new_k_batch + h·D
  const void* new_v;
  int64_t new_k_batch, new_v_batch;
  void* present_k;          // [B, Hkv, St, D], or nullptr (present not wanted)
  void* present_v;
  const void* mask;         // [B, St] key padding, or nullptr
  DType mask_dtype;
  void* y;                  // [B, 1, H·D]
  int H, Hkv, Sp, St, D;
  int64_t past_rows, present_rows;  // rows per (b, h) in memory (a held cache: its capacity)
  bool in_place;            // present_k/v is the past's block: only the new row (key Sp) is stored
  bool defer_mask;          // mask bits loaded with the rows, compared a pass later (decode_defer_mask)
  int tpk, chunk, passes;   // lanes per key row, keys per split, passes per split
  float scale, fill;
  bool rows_zero;
};

template <class T, int VEC>
struct Rows {
  Vec<T, VEC> k[kKpt], v[kKpt];
  bool keep[kKpt];
  uint64_t mraw[kKpt];  // defer_mask: the mask element's bits, compared in consume
};

// The staged form's copies (cp.async, 16 bytes, L2 only) and their completion, per thread.
__device__ __forceinline__ void cp_async16(void* smem, const void* g) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(g));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// STAGED: every row of the split is requested at once (cp.async into dynamic shared memory, pass
// 0 as its own group so its arithmetic starts first) and each thread reads back only the pieces it
// copied, so no block barrier is needed; the mask bits are read up front too (kStagedMaxSlots).
// Unstaged: two register buffers, a pass of loads in flight. The staged form needs chunk · D · 2
// elements of shared memory; it exists because at batch 1 over a long cache each block walks ~9
// passes, and one pass in flight left the stream latency-bound (session 10: 16.5 us per layer at
// 1 x 2048 for 8 MB moved, floor 2).
constexpr int kStagedMaxSlots = 32;  // passes · kKpt per thread: the keep bits fit one word

template <class T, int GB, bool STAGED, int NT>
__global__ void __launch_bounds__(NT) decode_append_kernel(AppendArgs a) {
  constexpr int kWarps = NT / 32, kGD = kMaxGD * kMinThreads / NT;
  cuda_pdl::pdl_begin();  // PDL (kernels/cuda/pdl.cuh): before any global access
  constexpr int VEC = 16 / sizeof(T);
  using V = Vec<T, VEC>;
  __shared__ float red[kWarps][kGD];
  __shared__ float wstat[kWarps][GB][2];  // per warp: max, sum
  __shared__ float part[kMaxGD];          // the block's partial acc, read by the cluster
  __shared__ float part_ml[GB][2];        // its max and sum per query head
  cg::cluster_group cluster = cg::this_cluster();

  const int split = blockIdx.x, b = blockIdx.z, splits = gridDim.x;
  const int groups = (a.H / a.Hkv) / GB;
  const int hk = blockIdx.y / groups, h0 = hk * (a.H / a.Hkv) + (blockIdx.y % groups) * GB;
  const bool writer = blockIdx.y % groups == 0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int D = a.D, tpk = a.tpk, kpp = NT / tpk;
  const int sub = tid % tpk, grp = tid / tpk;
  const bool has = sub < D / VEC;
  const int j0 = split * a.chunk, n = max(0, min(a.St, j0 + a.chunk) - j0);
  const int64_t bh = int64_t(b) * a.Hkv + hk;
  const T* pk = static_cast<const T*>(a.past_k) + bh * a.past_rows * D + sub * VEC;
  const T* pv = static_cast<const T*>(a.past_v) + bh * a.past_rows * D + sub * VEC;
  const T* nk = static_cast<const T*>(a.new_k) + b * a.new_k_batch + int64_t(hk) * D + sub * VEC;
  const T* nv = static_cast<const T*>(a.new_v) + b * a.new_v_batch + int64_t(hk) * D + sub * VEC;
  T* ok = a.present_k && writer ? static_cast<T*>(a.present_k) + bh * a.present_rows * D + sub * VEC : nullptr;
  T* ov = a.present_v && writer ? static_cast<T*>(a.present_v) + bh * a.present_rows * D + sub * VEC : nullptr;

  // Key row jj of this split (pass p, slot u): jj = p · kKpt · kpp + u · kpp + grp.
  auto load = [&](Rows<T, VEC>& r, int p) {
#pragma unroll
    for (int u = 0; u < kKpt; ++u) {
      const int jj = (p * kKpt + u) * kpp + grp, j = j0 + jj;
      if (has && jj < n) {
        // Keys before Sp are the past's; the new row (S_q = 1) is key Sp.
        r.k[u] = j < a.Sp ? *reinterpret_cast<const V*>(pk + int64_t(j) * D) : *reinterpret_cast<const V*>(nk);
        r.v[u] = j < a.Sp ? *reinterpret_cast<const V*>(pv + int64_t(j) * D) : *reinterpret_cast<const V*>(nv);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) r.k[u].v[e] = r.v[u].v[e] = from_f<T>(0.f);  // 0 · p, never 0 · garbage
      }
      if (a.defer_mask) {
        // Only the load here: comparing its value would stall this pass on the mask read
        // before the previous pass's arithmetic can start.
        r.keep[u] = jj < n;
        r.mraw[u] = jj < n && a.mask ? mask_load_raw(a.mask, a.mask_dtype, int64_t(b) * a.St + j) : 1;
      } else {
        r.keep[u] = jj < n && (!a.mask || mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j));
      }
    }
  };

  float qr[GB][VEC];
  {
    const T* q = static_cast<const T*>(a.q) + b * a.q_batch_stride + int64_t(h0) * D + sub * VEC;
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      V t;
      if (has) t = *reinterpret_cast<const V*>(q + g * D);
#pragma unroll
      for (int e = 0; e < VEC; ++e) qr[g][e] = has ? to_f(t.v[e]) * a.scale : 0.f;
    }
  }
  float m[GB], l[GB], acc[GB][VEC];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
  }

  // One pass: store the rows to the present, then scores, online softmax, P·V.
  auto consume = [&](const Rows<T, VEC>& r, int p) {
    float s[kKpt][GB];
#pragma unroll
    for (int u = 0; u < kKpt; ++u) {
      const int jj = (p * kKpt + u) * kpp + grp;
      const bool in = jj < n;
      const bool keep = a.defer_mask ? r.keep[u] && mask_raw_keep(r.mraw[u], a.mask_dtype) : r.keep[u];
      if (ok && has && in && (!a.in_place || j0 + jj == a.Sp)) {  // in place: the past rows are there
        *reinterpret_cast<V*>(ok + int64_t(j0 + jj) * D) = r.k[u];
        *reinterpret_cast<V*>(ov + int64_t(j0 + jj) * D) = r.v[u];
      }
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float dot = 0.f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) dot = fmaf(qr[g][e], to_f(r.k[u].v[e]), dot);
        for (int o = tpk / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        // A masked key scores the fill value; a key past the split takes no mass.
        s[u][g] = !in ? -INFINITY : keep ? dot : a.fill;
      }
    }
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < kKpt; ++u) mx = fmaxf(mx, s[u][g]);  // NaN skipped, as fmaxf on the CPU side
      const float base = mx == -INFINITY ? 0.f : mx;           // nothing above -inf yet: no mass
      const float corr = __expf(m[g] - base);
      l[g] *= corr;
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[g][e] *= corr;
#pragma unroll
      for (int u = 0; u < kKpt; ++u) {
        const float pe = __expf(s[u][g] - base);
        l[g] += pe;
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[g][e] = fmaf(pe, to_f(r.v[u].v[e]), acc[g][e]);
      }
      m[g] = mx;
    }
  };

  if constexpr (STAGED) {
    extern __shared__ __align__(16) unsigned char stage_raw[];
    T* ks = reinterpret_cast<T*>(stage_raw) + sub * VEC;  // [chunk][D]: K rows, then V rows
    T* vs = ks + int64_t(a.chunk) * D;
    auto issue = [&](int p) {
#pragma unroll
      for (int u = 0; u < kKpt; ++u) {
        const int jj = (p * kKpt + u) * kpp + grp, j = j0 + jj;
        if (has && jj < n) {
          cp_async16(ks + jj * D, j < a.Sp ? pk + int64_t(j) * D : nk);
          cp_async16(vs + jj * D, j < a.Sp ? pv + int64_t(j) * D : nv);
        }
      }
    };
    issue(0);
    cp_async_commit();
    for (int p = 1; p < a.passes; ++p) issue(p);
    cp_async_commit();
    // The mask bits of every slot, loads issued back to back (unrolled) while the rows stream.
    uint32_t keep = 0;
#pragma unroll
    for (int i = 0; i < kStagedMaxSlots; ++i) {
      const int jj = i * kpp + grp;  // slot i = p · kKpt + u
      if (i < a.passes * kKpt && jj < n && (!a.mask || mask_keep(a.mask, a.mask_dtype, int64_t(b) * a.St + j0 + jj)))
        keep |= 1u << i;
    }
    auto read = [&](Rows<T, VEC>& r, int p) {
#pragma unroll
      for (int u = 0; u < kKpt; ++u) {
        const int jj = (p * kKpt + u) * kpp + grp;
        if (has && jj < n) {
          r.k[u] = *reinterpret_cast<const V*>(ks + jj * D);
          r.v[u] = *reinterpret_cast<const V*>(vs + jj * D);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) r.k[u].v[e] = r.v[u].v[e] = from_f<T>(0.f);
        }
        r.keep[u] = (keep >> (p * kKpt + u)) & 1u;
        r.mraw[u] = 1;  // the staged form has its bits already
      }
    };
    Rows<T, VEC> r;
    cp_async_wait<1>();  // pass 0 (this thread's own copies)
    read(r, 0);
    consume(r, 0);
    cp_async_wait<0>();
    for (int p = 1; p < a.passes; ++p) {
      read(r, p);
      consume(r, p);
    }
  } else {
    // Two register buffers: the loads of pass p + 1 are in flight while pass p is consumed.
    Rows<T, VEC> ra, rb;
    load(ra, 0);
    for (int p = 0; p < a.passes; p += 2) {
      if (p + 1 < a.passes) load(rb, p + 1);
      consume(ra, p);
      if (p + 1 >= a.passes) break;
      if (p + 2 < a.passes) load(ra, p + 2);
      consume(rb, p + 1);
    }
  }

  // Combine the key groups of each warp (lanes tpk apart hold other keys, the same dims), then
  // the warps: rescale every part to the common max and add, in a fixed order.
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    float M = m[g];
    for (int o = 16; o >= tpk; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    const float f = __expf(m[g] - (M == -INFINITY ? 0.f : M));
    float L = l[g] * f;
    for (int o = 16; o >= tpk; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      float x = acc[g][e] * f;
      for (int o = 16; o >= tpk; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
      if (lane < tpk && has) red[warp][g * D + sub * VEC + e] = x;
    }
    if (lane == 0) {
      wstat[warp][g][0] = M;
      wstat[warp][g][1] = L;
    }
  }
  __syncthreads();
  for (int i = tid; i < GB * D; i += NT) {
    const int g = i / D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wstat[w][g][0]);
    const float base = M == -INFINITY ? 0.f : M;
    float x = 0.f, L = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = __expf(wstat[w][g][0] - base);
      x = fmaf(f, red[w][i], x);
      L = fmaf(f, wstat[w][g][1], L);
    }
    part[i] = x;
    if (i % D == 0) {
      part_ml[g][0] = M;
      part_ml[g][1] = L;
    }
  }
  cluster.sync();  // every split's partial is in its shared memory, visible to the cluster

  // Each rank merges a slice of the GB · D outputs over all ranks, rank 0 first.
  const int outs = GB * D, per = (outs + splits - 1) / splits;
  for (int i = split * per + tid; i < min(outs, (split + 1) * per); i += NT) {
    const int g = i / D;
    float M = -INFINITY;
    for (int r = 0; r < splits; ++r) M = fmaxf(M, cluster.map_shared_rank(&part_ml[g][0], r)[0]);
    const float base = M == -INFINITY ? 0.f : M;
    float x = 0.f, L = 0.f;
    for (int r = 0; r < splits; ++r) {
      const float* ml = cluster.map_shared_rank(&part_ml[g][0], r);
      const float f = __expf(ml[0] - base);
      x = fmaf(f, cluster.map_shared_rank(part, r)[i], x);
      L = fmaf(f, ml[1], L);
    }
    // L == 0 (every score -inf): 0/0 = NaN, as Softmax gives, or 0 with masked_rows_zero.
    const bool zero = a.rows_zero && M == -INFINITY;
    static_cast<T*>(a.y)[(int64_t(b) * a.H + h0) * D + i] = from_f<T>(zero ? 0.f : x / L);
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

struct AppendPlan {
  bool ok = false;
  int gb = 1, tpk = 1, splits = 1, chunk = 0, passes = 0;
  int threads = kMinThreads;
  bool staged = false;
  size_t smem = 0;  // the staged form's dynamic shared memory
};

// The staged form for long chunks only (from kMinStageBytes: fewer rows stream fine from two
// register buffers), where its rows fit (two blocks per SM beside ~21 KB of static shared memory
// each) and its keep bits fit one word. FUSEOPT_DECODE_STAGED=0 forces it off.
constexpr size_t kMinStageBytes = 48 << 10;
constexpr size_t kMaxStageBytes = 92 << 10;

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Query heads per block and splits: as many heads per block as divide the group (each K/V row
// read once per block), fewer where that leaves the grid under one block per SM at 8 splits
// (batch 1: 8 kv heads x 8 splits would be 64 blocks on 132 SMs); then splits to reach ~2
// blocks per SM, each split at least one pass of keys. Then threads: a long cache (more than
// kMaxPassesAlone passes per block) on a grid of at most one block per SM takes 256 or 512
// threads per block, so more keys are in flight per pass and each warp walks fewer passes: such
// a block is issue-latency bound (ncu at 1 x 2048: one warp per scheduler, 6-10 cycles per
// instruction, DRAM at 5 %), and 512 threads took it from 16.0 to 10.4 us (NOTES-perf.md v17).
// Where the grid already has several blocks per SM, larger blocks add no warps (registers bound
// residency: at 8 x 2048, 256 threads with four heads a block ran 71.6 us against 43.8).
// FUSEOPT_DECODE_THREADS=128|256|512 forces a size where GB · D fits.
constexpr int kMaxPassesAlone = 3;

int forced_threads() {
  const char* e = std::getenv("FUSEOPT_DECODE_THREADS");
  if (!e || !*e) return 0;
  const int t = std::atoi(e);
  return t == 128 || t == 256 || t == 512 ? t : 0;
}

AppendPlan make_plan(int B, int H, int Hkv, int St, int D, int vec) {
  AppendPlan p;
  if (D % vec != 0 || D / vec > 32 || St < 1 || H % Hkv != 0) return p;
  const int G = H / Hkv, sms = sm_count();
  int gb = 1;
  for (int c : {4, 2})  // 8 heads per block would spill (registers: q, acc per head)
    if (G % c == 0 && c * D <= kMaxGD) {
      gb = c;
      break;
    }
  while (gb > 1 && 2 * int64_t(B) * (H / gb) * kMaxCluster <= sms) gb /= 2;
  while (p.tpk < D / vec) p.tpk <<= 1;
  int64_t blocks = int64_t(B) * (H / gb);
  // FUSEOPT_DECODE_SPLITS=1..8 forces the splits a head group (A/B runs).
  const char* es = std::getenv("FUSEOPT_DECODE_SPLITS");
  const int forced_splits = es && *es ? std::clamp(std::atoi(es), 1, kMaxCluster) : 0;
  auto fit = [&](int threads) {
    const int per_pass = kKpt * (threads / p.tpk);
    int splits = static_cast<int>(std::min<int64_t>(kMaxCluster, std::max<int64_t>(1, (2 * sms + blocks - 1) / blocks)));
    if (forced_splits) splits = forced_splits;
    splits = std::min(splits, (St + per_pass - 1) / per_pass);
    p.threads = threads;
    p.passes = ((St + splits - 1) / splits + per_pass - 1) / per_pass;
    p.chunk = p.passes * per_pass;
    p.splits = (St + p.chunk - 1) / p.chunk;
  };
  // 512 threads leave 128 registers a thread: four query heads' accumulators spill there.
  auto fits = [&](int threads) {
    return threads <= kMaxThreads && gb * D <= kMaxGD * kMinThreads / threads && !(threads == kMaxThreads && gb > 2);
  };
  fit(kMinThreads);
  // A cache that one pass of each split covers: half the heads a block. Its time is one pass's
  // chain, which is serial in the heads a thread carries, and the K/V rows it reads twice more
  // are few (session 12, bench_kernels "[decode_bench]": 1 x 128 5.18 -> 4.48 us with one head a
  // block, 8 x 128 8.35 -> 7.78 with two; 8 x 2048 and 1 x 2048 keep theirs).
  if (p.passes == 1 && gb > 1) {
    gb /= 2;
    blocks = int64_t(B) * (H / gb);
    fit(kMinThreads);
  }
  // FUSEOPT_DECODE_GB=1|2|4 forces the query heads per block where the group divides (A/B runs).
  if (const char* e = std::getenv("FUSEOPT_DECODE_GB"); e && *e) {
    const int want = std::atoi(e);
    if ((want == 1 || want == 2 || want == 4) && G % want == 0 && want * D <= kMaxGD) {
      gb = want;
      blocks = int64_t(B) * (H / gb);
      fit(kMinThreads);
    }
  }
  p.gb = gb;
  if (const int want = forced_threads()) {
    int t = want;
    while (t > kMinThreads && !fits(t)) t /= 2;
    fit(t);
  } else {
    while (p.passes > kMaxPassesAlone && fits(2 * p.threads) && blocks * p.splits <= sms) fit(2 * p.threads);
  }
  p.ok = B < 65536 && blocks * p.splits < (int64_t(1) << 31) / kMaxCluster;
  const size_t stage = size_t(p.chunk) * D * 2 * (vec == 4 ? 4 : 2);
  const char* e = std::getenv("FUSEOPT_DECODE_STAGED");
  const bool want = !(e && *e && std::string(e) == "0");
  p.staged = want && p.threads == kMinThreads && stage >= kMinStageBytes && stage <= kMaxStageBytes && p.passes * kKpt <= kStagedMaxSlots;
  p.smem = p.staged ? stage : 0;
  return p;
}

template <class T, bool STAGED, int NT>
bool launch_form(const AppendArgs& a, const AppendPlan& p, int B, cudaStream_t stream) {
  const dim3 grid(p.splits, a.H / p.gb, B);
  switch (p.gb) {
    case 4:
      if constexpr (NT < kMaxThreads) return launch_x_cluster(decode_append_kernel<T, 4, STAGED, NT>, grid, NT, p.smem, stream, a);
      return false;  // make_plan never asks for it
    case 2: return launch_x_cluster(decode_append_kernel<T, 2, STAGED, NT>, grid, NT, p.smem, stream, a);
    default: return launch_x_cluster(decode_append_kernel<T, 1, STAGED, NT>, grid, NT, p.smem, stream, a);
  }
}

// The staged form only at kMinThreads (make_plan).
template <class T>
bool launch_t(const AppendArgs& a, const AppendPlan& p, int B, cudaStream_t stream) {
  if (p.staged) return launch_form<T, true, kMinThreads>(a, p, B, stream);
  switch (p.threads) {
    case 512: return launch_form<T, false, 512>(a, p, B, stream);
    case 256: return launch_form<T, false, 256>(a, p, B, stream);
    default: return launch_form<T, false, kMinThreads>(a, p, B, stream);
  }
}

std::atomic<long long> g_launches{0};

// Compute capability 9.0 or newer (thread-block clusters), cached per device.
bool device_has_clusters() {
  static std::atomic<int> cached[64];  // 0 unknown, 1 yes, 2 no
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return false;
  int c = cached[dev].load(std::memory_order_relaxed);
  if (c == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    c = major >= 9 ? 1 : 2;
    cached[dev].store(c, std::memory_order_relaxed);
  }
  return c == 1;
}

}  // namespace

// FUSEOPT_DECODE_MASK_DEFER=1: the unstaged form loads each key's mask element with its K/V
// rows and compares it in the pass that uses it (mask_load_raw / mask_raw_keep), instead of
// comparing where it is loaded, which makes the warp wait for the mask read inside the loads
// of the next pass (session 16's reading of why the model's decode step, which has a mask,
// costs more than the unmasked micro-benchmark). Off until measured on the GPU.
// Read on every launch (launches happen when a graph is captured, not when it is replayed), as
// the other FUSEOPT_DECODE_* switches, so tests can take both forms in one process.
bool decode_defer_mask() {
  const char* e = std::getenv("FUSEOPT_DECODE_MASK_DEFER");
  return e && std::string(e) == "1";
}

int decode_append_mode() {
  const char* e = std::getenv("FUSEOPT_DECODE_APPEND");
  if (e && *e) return std::string(e) == "0" ? 0 : 1;
  return -1;
}

bool launch_decode_append(const DecodeAppend& d, cudaStream_t stream) {
  const int vec = d.dt == DType::Float ? 4 : d.dt == DType::Float16 || d.dt == DType::BFloat16 ? 8 : 0;
  if (vec == 0 || d.Dh != d.Dv || d.Sp < 0 || !device_has_clusters()) return false;
  if (launch_decode_mma(d, stream)) {
    g_launches.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  const int64_t St = d.Sp + 1;
  if (d.B <= 0 || St >= (int64_t(1) << 30) || d.H >= 65536) return false;
  const AppendPlan p = make_plan(int(d.B), int(d.H), int(d.Hkv), int(St), int(d.Dh), vec);
  if (!p.ok) return false;
  // 16-byte rows: every pointer, and the strides of the rows that are not contiguous.
  const void* ptrs[] = {d.q, d.past_k, d.past_v, d.new_k, d.new_v, d.y};
  for (const void* x : ptrs)
    if (!aligned16(x)) return false;
  if ((d.present_k && !aligned16(d.present_k)) || (d.present_v && !aligned16(d.present_v))) return false;
  if (d.q_batch_stride % vec || d.new_k_batch % vec || d.new_v_batch % vec) return false;
  if (d.Sp > 0 && (!d.past_k || !d.past_v)) return false;
  // In place: the present is the past's block, at the same row stride.
  if (d.in_place && (d.present_k != d.past_k || d.present_v != d.past_v || d.present_rows != d.past_rows ||
                     d.past_rows < St))
    return false;
  AppendArgs a{};
  a.q = d.q;
  a.q_batch_stride = d.q_batch_stride;
  a.past_k = d.past_k;
  a.past_v = d.past_v;
  a.new_k = d.new_k;
  a.new_v = d.new_v;
  a.new_k_batch = d.new_k_batch;
  a.new_v_batch = d.new_v_batch;
  a.present_k = d.present_k;
  a.present_v = d.present_v;
  a.mask = d.mask;
  a.mask_dtype = d.mask_dtype;
  a.y = d.y;
  a.H = int(d.H);
  a.Hkv = int(d.Hkv);
  a.Sp = int(d.Sp);
  a.St = int(St);
  a.past_rows = d.past_rows > 0 ? d.past_rows : d.Sp;
  a.present_rows = d.present_rows > 0 ? d.present_rows : St;
  a.in_place = d.in_place;
  a.defer_mask = decode_defer_mask();
  a.D = int(d.Dh);
  a.tpk = p.tpk;
  a.chunk = p.chunk;
  a.passes = p.passes;
  a.scale = d.scale;
  a.fill = d.fill;
  a.rows_zero = d.rows_zero;
  bool launched = false;
  switch (d.dt) {
    case DType::Float16: launched = launch_t<__half>(a, p, int(d.B), stream); break;
    case DType::BFloat16: launched = launch_t<__nv_bfloat16>(a, p, int(d.B), stream); break;
    case DType::Float: launched = launch_t<float>(a, p, int(d.B), stream); break;
    default: return false;
  }
  if (launched) g_launches.fetch_add(1, std::memory_order_relaxed);
  return launched;
}

long long decode_append_launch_count() { return g_launches.load(std::memory_order_relaxed); }

}  // namespace fuseopt::cuda_fused
