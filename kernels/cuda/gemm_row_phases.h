// A GEMM whose output rows are not 16-byte multiples (an odd vocabulary: BERT's
// 30522 words, GPT-2's 50257) written straight into Y: no padded scratch rows,
// no pack kernel, and a float Y (a 16-bit run's logits handed out as float)
// written by the GEMM itself. Host code only.
//
// Row r of Y [M, N] starts at byte r·N·e (e: Y's element size). Modulo 16 that
// offset repeats every P rows, P = L / gcd(N mod L, L), L = 16 / e elements.
// So the rows of one phase c (r ≡ c mod P) all start the same `skip` elements
// short of a 16-byte boundary, and their columns [skip, N) form a matrix with
// 16-byte aligned base and rows (ld P·N): one GEMM that reads every P-th row of
// A (lda P·K) and B from row `skip` on runs cuBLASLt's Hopper kernels on it. A
// second, tiny GEMM writes columns [0, skip). The bias from column `skip` on is
// copied to an aligned buffer in Y's dtype.
//
// BERT-MLM's decoder at 32 × 128 (4096 × 30522, float logits): P = 2, two
// 2048-row GEMMs and one 2048 × 2 one, against a padded GEMM, a pack that
// reads 250 MB and writes 500 MB, and the two GEMMs of the split. Opt-in
// (row_phases_wanted): it only pays where cuBLASLt gives every phase a Hopper
// kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/gemm_cublaslt.h"

namespace fuseopt::cuda_fused {

struct RowPhase {
  int64_t first_row = 0;  // c: the phase's rows are c, c + P, c + 2P, ...
  int64_t rows = 0;       // how many of them are below M
  int64_t skip = 0;       // columns before the rows' first 16-byte boundary
};

// P for rows of N elements of out_esz bytes (1 when they are 16-byte multiples).
int64_t row_phase_period(int64_t N, size_t out_esz);

// The P phases of Y [M, N] (rows 0 where M < P).
std::vector<RowPhase> row_phases(int64_t M, int64_t N, size_t out_esz);

// Whether a GEMM the odd-N split applies to (gemm_host.h aligned_columns) takes
// the row phases instead of padded rows + pack: FUSEOPT_GEMM_ROW_PHASES unset or
// 0 never, 1 always (tests), 2 where every phase has at least 256 rows. Off by
// default: on the H100 the padded rows + the vector-store pack measured faster
// (BERT-MLM 32 × 128 2.214 against 2.293 ms, GPT-2-LM 2.590 against 3.748):
// cuBLASLt's float-output kernels for most phases were generic ones even after
// timing its candidates (NOTES-perf.md v32).
bool row_phases_wanted(int64_t M, int64_t N, size_t out_esz);

// Y [M, N] (y_dtype: g.dtype, or Float for a 16-bit product) = A [M, K] · B^T
// (B stored [N, K], g.trans_b) with g's epilogue and bias, phase by phase. g
// has one batch item, no trans_a, packed A and D (lda = ldd = 0).
void gemm_row_phases(const GemmDesc& g, DType y_dtype, const void* A, const void* B, void* Y, cudaStream_t stream,
                     const ScratchFn& scratch);

}  // namespace fuseopt::cuda_fused
