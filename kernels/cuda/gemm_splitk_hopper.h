// A Hopper (sm_90a) GEMM for few rows (M <= 128: batch-1 prefill, BERT / GPT-2 / Llama at
// 1 x 128): Y = act(A · B + bias) + residual with K split across the blocks of a thread-block
// cluster and the partial sums added through distributed shared memory, in one launch.
//
// Why: at 128 rows a GEMM reads its weights once (BERT's QKV 3.5 MB, FFN2 4.7 MB) and computes
// little, so its time is how fast the weights arrive. cuBLASLt's kernels at these shapes run a
// few output tiles a launch (18 for BERT's QKV, 6 for its FFN2), each block streaming the whole
// K, and take ~13 us for what 132 SMs read in ~2 (NOTES-perf.md v6, v8). Here every output tile
// of 128 columns is S blocks (S up to 16), each block reading 1/S of K — every SM streams — and
// the blocks of a tile add their fp32 partials in a fixed order (bit-identical reruns) through
// their peers' shared memory: no workspace, no second launch. A constant B (a weight) is
// requested before the programmatic-launch wait, so its bytes arrive while the previous kernel
// still runs.
// Host-only header; the kernel is in gemm_splitk_hopper.cu.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm_hopper.h"

namespace fuseopt::cuda_fused {

// The kernel's row limit: one tile of 128 rows (two m64 MMAs a k-step).
constexpr int64_t kSplitKMaxM = 128;

struct SplitKGemm {
  HopperGemm g;                   // dt, a, b, b_nk, gated, bias, y, M, N, K, act (not y_fp32)
  const void* residual = nullptr;  // Y's shape, row-major, added after the activation; or null
  bool b_const = false;            // B is a constant no kernel of the run writes (loaded before the wait)
};

// Whether the kernel can run these arguments: fp16/bf16; 1 <= M <= kSplitKMaxM; K a multiple of 8,
// N a multiple of 8; A, B, Y, residual 16-byte aligned, bias 4-byte; act None / Relu / GeluErf /
// GeluTanh / Relu2, or gated (GatedMatMul: B [K, 2N] or [2N, K], gate then up; act Silu /
// GeluErfExact / GeluTanh / Relu on the gate; no residual); a device whose loaded image is the
// sm_90a one.
bool splitk_gemm_fits(const SplitKGemm& s, cudaStream_t stream);

// Whether the runtime should take it (switch FUSEOPT_SPLITK_GEMM: 0 never, 1 every GEMM it fits;
// unset: the default, off until measured against cuBLASLt end to end).
bool splitk_gemm_wanted(const SplitKGemm& s);

// Launches and returns true, or returns false having launched nothing.
bool launch_gemm_splitk(const SplitKGemm& s, cudaStream_t stream);

// Tests and A/B runs: set_splitk_gemm(0 | 1) forces the switch, (-1) returns to the environment;
// set_splitk_gemm_splits(n) forces n blocks a tile (clamped to the k-tiles and 16), 0 by shape.
void set_splitk_gemm(int mode);
void set_splitk_gemm_splits(int n);
long long splitk_gemm_launch_count();
// The blocks a tile the last launch used (tests: the reduction across 1, several and 16 blocks).
int splitk_gemm_last_splits();

}  // namespace fuseopt::cuda_fused
