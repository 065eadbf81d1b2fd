// Host entry points of fuseopt.Attention's KV-cache paths (host side:
// fused_attention_kernel.cc; tests call the counters):
//   fused_attention_kv_cache.cu: present = past ++ new rows, one launch per tensor;
//   fused_attention_decode.cu:   split-KV (flash-decoding) attention for S_q = 1 that reads
//                                the present [B, Hkv, S_kv, D] in place.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ir/tensor.h"

namespace fuseopt::cuda_fused {

// present_rows: rows per (b, h) in the present's memory (its head stride / D); 0 means St. A
// session-held KV cache (Session::hold_kv_cache) appends in place: Sp = 0, St = the new rows,
// present = the cache's row Sp_old, present_rows = its capacity.
void launch_kv_append(size_t elem_size, const void* past, const void* now, int64_t now_seq, int64_t now_batch,
                      void* present, int64_t B, int64_t Hkv, int64_t Sp, int64_t St, int64_t D, cudaStream_t stream,
                      int64_t present_rows = 0);

// One tensor's append for launch_kv_append_pair: past [B, Hkv, Sp, D], the new rows read at
// now + b·now_batch + s·now_seq + h·D (elements), present [B, Hkv, St, D].
struct KvAppend {
  const void* past;
  const void* now;
  int64_t now_seq, now_batch;
  void* present;
  int64_t D;
  int64_t present_rows = 0;  // rows per (b, h) in the present's memory; 0: St (dense)
};
// K's and V's appends in one launch where both move as 16-byte words (a decode step's
// case), else as two launch_kv_append calls.
// zero / zero_bytes: a region the same launch sets to 0 (the decode kernel's arrival
// counters, flash_decode_counter_bytes at the start of its scratch), or nullptr / 0.
void launch_kv_append_pair(size_t elem_size, const KvAppend& k, const KvAppend& v, int64_t B, int64_t Hkv, int64_t Sp,
                           int64_t St, cudaStream_t stream, void* zero = nullptr, size_t zero_bytes = 0);

// Whether the split-KV decode kernel is taken for S_q = 1 over a cache (no attn_bias, no
// softcap): FUSEOPT_FLASH_DECODE "1" on, "0" off; unset: from this many keys (past + new) on.
// Measured on the H200 (Llama-1B decode shapes, 32/8 heads, D 64, per layer): 9.3 us split
// vs 5.4 us prefill kernel at 128 keys, 14.9 vs 26.6 at 2048; the two cross near 600.
constexpr int64_t kFlashDecodeMinKeys = 768;

bool flash_decode_supported(int Dh, int Dv, int H, int Hkv);
// Scratch: the one-launch kernel's arrival counters (the first flash_decode_counter_bytes,
// which must be zero at launch), then the per-split partials (acc[Dv], max, sum per query
// head and split).
size_t flash_decode_scratch_bytes(DType dt, int B, int H, int Hkv, int St, int Dh, int Dv);
size_t flash_decode_counter_bytes(int B, int H);
// q: [B, 1, H·Dh] rows at q_batch_stride; k/v: the present [B, Hkv, St, D], kv_rows rows per
// (b, h) in memory (a session-held cache's capacity; 0: St); y: [B, 1, H·Dv].
// counters_zeroed: the caller has zeroed the counters (launch_kv_append_pair's zero region);
// else this memsets them first.
void launch_flash_decode(DType dt, const void* q, int64_t q_batch_stride, const void* k, const void* v,
                         const void* mask, DType mask_dtype, void* y, void* scratch, int B, int H, int Hkv, int St,
                         int Dh, int Dv, float scale, float fill, bool rows_zero, cudaStream_t stream,
                         bool counters_zeroed = false, int kv_rows = 0);
// For tests: launches so far in this process (all, and those of the one-launch kernel), and
// whether (dt, Dh, Dv) takes the 16-byte vector path (given aligned rows) rather than the
// scalar fallback.
long long flash_decode_launch_count();
long long flash_decode_fused_launch_count();
bool flash_decode_vector_path(DType dt, int Dh, int Dv);

// fused_attention_decode_append.cu: a decode step (S_q = 1, one new K/V row, no attn_bias, no
// softcap, Dh == Dv) as ONE launch: present = past ++ the new row written while the same bytes
// feed split-KV attention, the splits merged through a thread-block cluster (sm_90+).
struct DecodeAppend {
  DType dt = DType::Float16;
  const void* q = nullptr;  // [B, 1, H·Dh] rows at q_batch_stride (elements)
  int64_t q_batch_stride = 0;
  const void* past_k = nullptr;  // [B, Hkv, Sp, D]
  const void* past_v = nullptr;
  const void* new_k = nullptr;  // the new row of batch b, kv head h at new_k + b·new_k_batch + h·D
  const void* new_v = nullptr;
  int64_t new_k_batch = 0, new_v_batch = 0;
  void* present_k = nullptr;  // [B, Hkv, Sp + 1, D], or nullptr where the present is not wanted
  void* present_v = nullptr;
  // Rows per (b, h) in the past's / present's memory (0: Sp / Sp + 1, dense). in_place: the present
  // IS the past's block (a session-held KV cache, Session::hold_kv_cache): only row Sp is written.
  // It also promises that no kernel of this run writes rows 0..Sp-1 (earlier steps did), so the
  // tensor-core kernel requests them before its programmatic-launch wait (FUSEOPT_DECODE_PREFETCH).
  int64_t past_rows = 0, present_rows = 0;
  bool in_place = false;
  const void* mask = nullptr;  // [B, Sp + 1] key padding, or nullptr
  DType mask_dtype = DType::Bool;
  // No kernel of this run writes the mask (a graph input copied in, KernelContext::
  // input_is_run_stable): the tensor-core kernel reads it before its programmatic-launch wait.
  bool mask_stable = false;
  void* y = nullptr;  // [B, 1, H·Dv]
  int64_t B = 0, H = 0, Hkv = 0, Sp = 0, Dh = 0, Dv = 0;
  float scale = 1.f, fill = 0.f;
  bool rows_zero = false;
};
// False (nothing launched) where the kernel does not apply: the caller takes the two-launch path.
bool launch_decode_append(const DecodeAppend& d, cudaStream_t stream);
// FUSEOPT_DECODE_APPEND: 0 off, 1 on, -1 unset (on: the default).
int decode_append_mode();
long long decode_append_launch_count();  // for tests

// The same step on tensor cores (fused_attention_decode_mma.cu): fp16/bf16, head dim 64 or 128,
// up to 16 query heads a kv head, in place or not; up to 16 splits a (batch, kv head) in one
// non-portable cluster where the device takes it (FUSEOPT_DECODE_CLUSTER=8: the portable 8). launch_decode_append tries it first where
// FUSEOPT_DECODE_MMA allows ("0" off, "1" on, unset: kDecodeMmaDefault); false: not launched
// (the register kernel takes the step).
constexpr bool kDecodeMmaDefault = true;
bool decode_mma_enabled();
bool launch_decode_mma(const DecodeAppend& d, cudaStream_t stream);
long long decode_mma_launch_count();  // for tests

}  // namespace fuseopt::cuda_fused
