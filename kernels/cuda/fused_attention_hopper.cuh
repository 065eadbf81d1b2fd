// Hopper (sm_90a) attention kernel for fuseopt.Attention: wgmma tensor-core
// MMAs, K/V tiles by TMA through an mbarrier pipeline, one producer warp and
// two consumer warpgroups (fused_attention_hopper.cu). Host-only header.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt::cuda_fused {

// Whether the Hopper kernel takes these arguments: fp16/bf16, head dim 64 or
// 128 (Dv = Dh), no attn_bias, scale > 0, 16-byte aligned rows, a device of
// compute capability 9.0 whose loaded kernel image is the sm_90a one, and
// the switch (below): by default where it measured faster than the mma.sync
// kernel (all but short causal sequences with a padding mask).
bool hopper_attention_applies(const AttentionArgs& a);

// Launches the Hopper kernel and returns true, or returns false (nothing
// launched) when it does not apply; the caller then runs another kernel.
bool launch_hopper_attention(const AttentionArgs& a, cudaStream_t stream);

// Switch: -1 = default (environment FUSEOPT_HOPPER_ATTENTION: "0" off, "1"
// on wherever it is correct; unset = the built-in choice), 0 = off, 1 = on
// wherever it is correct. For tests and benchmarks; not thread-safe.
void attention_set_hopper(int mode);

// Variant of the Hopper kernel for benchmarks and tests (default on): the
// two consumer warpgroups issue their MMAs in turn ("ping-pong").
void attention_hopper_set_pingpong(bool on);
// Query rows per block of the head-dim-64 kernel: 64 (one consumer
// warpgroup, two blocks per SM), 128 (two consumer warpgroups), 192 (three)
// or 0 = by shape (the default, default_rows_d64).
void attention_hopper_set_blocks(int rows);
// Persistent grid (one or two blocks per SM walking the work items; default
// on) or one block per item; max_blocks > 0 caps the persistent grid (tests).
void attention_hopper_set_persistent(bool on, int max_blocks = 0);
// Head dim 128: P·V as one m64n128 MMA per 16 keys (default on) or two m64n64.
void attention_hopper_set_wide_pv(bool on);
// Causal calls on the persistent grid (snake order of the heaviest-first items; the default)
// or one block per item (heaviest first).
void attention_hopper_set_causal_persistent(bool on);
// Head dim 128: keys per K/V tile, 128, 160 or 176, or 0 = by shape (the default: 160 without a
// mask, its O written by a TMA store; 128 with one). 160 and 176 need no mask and the wide P·V;
// elsewhere (and at head dim 64) the kernel keeps 128.
void attention_hopper_set_key_tile(int keys);
// O through a shared-memory staging buffer and one TMA store a warpgroup (the default) or
// 4-byte stores from the registers, where the buffer fits: head dim 64, and head dim 128 with
// 160-key tiles (the 128- and 176-key variants always store from the registers).
void attention_hopper_set_tma_store(bool on);
// The varlen path for batches whose key-padding mask is a prefix of kept keys
// (AttentionArgs::mask_prefix): 1 on, 0 off (every masked batch reads the mask through the
// producer's key flags), -1 = default (environment FUSEOPT_ATTENTION_MASK_PREFIX: "0" off; on).
void attention_hopper_set_mask_prefix(int mode);
// How many times the Hopper kernel has been launched in this process: tests check that
// a case they mean for it (e.g. K/V read from a KV cache's present layout through TMA
// maps with a head stride) really ran it rather than the mma.sync fallback.
long long attention_hopper_launch_count();

}  // namespace fuseopt::cuda_fused
