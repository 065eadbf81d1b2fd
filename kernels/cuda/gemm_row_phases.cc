// gemm_row_phases.h: the odd-N GEMM written phase by phase into Y's own rows.
#include "kernels/cuda/gemm_row_phases.h"

#include <cstdlib>
#include <map>
#include <numeric>

#include "kernels/cuda/float_convert.h"
#include "kernels/cuda/fused_common.h"

namespace fuseopt::cuda_fused {

int64_t row_phase_period(int64_t N, size_t out_esz) {
  const int64_t lanes = 16 / static_cast<int64_t>(out_esz);
  const int64_t rest = N % lanes;
  return rest == 0 ? 1 : lanes / std::gcd(rest, lanes);
}

std::vector<RowPhase> row_phases(int64_t M, int64_t N, size_t out_esz) {
  const int64_t lanes = 16 / static_cast<int64_t>(out_esz), period = row_phase_period(N, out_esz);
  std::vector<RowPhase> phases;
  for (int64_t c = 0; c < period; ++c) {
    RowPhase ph;
    ph.first_row = c;
    ph.rows = M > c ? (M - 1 - c) / period + 1 : 0;
    ph.skip = (lanes - (c * N) % lanes) % lanes;
    phases.push_back(ph);
  }
  return phases;
}

bool row_phases_wanted(int64_t M, int64_t N, size_t out_esz) {
  const char* v = std::getenv("FUSEOPT_GEMM_ROW_PHASES");
  const int mode = v && *v ? std::atoi(v) : 0;
  if (mode == 1) return true;
  return mode == 2 && M / row_phase_period(N, out_esz) >= 256;
}

void gemm_row_phases(const GemmDesc& g, DType y_dtype, const void* A, const void* B, void* Y, cudaStream_t stream,
                     const ScratchFn& scratch) {
  FUSE_CHECK(g.trans_b && !g.trans_a && g.batch == 1 && g.lda == 0 && g.ldd == 0,
             "row-phase GEMM: needs one batch item, B stored [N, K] and packed A and Y");
  const int64_t in_esz = static_cast<int64_t>(dtype_size(g.dtype)), out_esz = static_cast<int64_t>(dtype_size(y_dtype));
  const int64_t period = row_phase_period(g.N, static_cast<size_t>(out_esz));
  const char* a = static_cast<const char*>(A);
  const char* b = static_cast<const char*>(B);
  char* y = static_cast<char*>(Y);

  // The bias from column `skip` on, 16-byte aligned and in Y's dtype (cuBLASLt's
  // bias has D's type; a shifted 16-bit pointer would be 2- or 4-byte aligned).
  std::map<int64_t, const void*> bias_at;
  auto bias_from = [&](int64_t skip) -> const void* {
    if (!g.bias) return nullptr;
    const char* src = static_cast<const char*>(g.bias) + skip * in_esz;
    if (y_dtype == g.dtype && reinterpret_cast<uintptr_t>(src) % 16 == 0) return src;
    auto it = bias_at.find(skip);
    if (it != bias_at.end()) return it->second;
    void* buf = scratch(static_cast<size_t>((g.N - skip) * out_esz));
    FUSE_CHECK(buf, "row-phase GEMM: no scratch for the bias");
    FUSE_CHECK(cuda::launch_float_convert(buf, y_dtype, src, g.dtype, g.N - skip, stream),
               "row-phase GEMM: bias from " << dtype_name(g.dtype) << " to " << dtype_name(y_dtype));
    return bias_at[skip] = buf;
  };

  for (const RowPhase& ph : row_phases(g.M, g.N, static_cast<size_t>(out_esz))) {
    if (ph.rows == 0) continue;
    const char* a_rows = a + ph.first_row * g.K * in_esz;
    char* y_rows = y + ph.first_row * g.N * out_esz;
    GemmDesc body = g;
    body.d_dtype = y_dtype;
    body.M = ph.rows;
    body.lda = period * g.K;
    body.ldd = period * g.N;
    body.N = g.N - ph.skip;
    body.bias = bias_from(ph.skip);
    body.tune = true;
    gemm(body, a_rows, b + ph.skip * g.K * in_esz, y_rows + ph.skip * out_esz, stream, scratch);
    if (ph.skip == 0) continue;
    GemmDesc head = body;  // columns [0, skip): a few columns, any kernel
    head.N = ph.skip;
    head.bias = bias_from(0);
    gemm(head, a_rows, b, y_rows, stream, scratch);
  }
}

}  // namespace fuseopt::cuda_fused
