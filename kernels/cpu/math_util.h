// Helpers shared by the CPU math kernels (elementwise, reductions, matmul,
// conv, pooling, normalisation): axis normalisation, reading small integer
// inputs on the host, and a row-major GEMM micro-kernel with fp32
// accumulation used by MatMul, Gemm and Conv.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

// Throws fuseopt::Error "<op 'name'>: <msg>" when cond is false.
#define MATH_CHECK(ctx, cond, msg) FUSE_CHECK(cond, (ctx).node().label() << ": " << msg)

namespace fuseopt::cpumath {

// Maps a possibly negative axis into [0, rank); throws naming the node.
inline int64_t norm_axis(const KernelContext& ctx, int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  MATH_CHECK(ctx, axis >= -r && axis < r, "axis " << axis << " is out of range for rank " << rank);
  return axis < 0 ? axis + r : axis;
}

// Integer values of a small host tensor (axes, shapes, scalars).
inline std::vector<int64_t> read_ints(const RtTensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype) {
      case DType::Int64: v[i] = t.ptr<int64_t>()[i]; break;
      case DType::Int32: v[i] = t.ptr<int32_t>()[i]; break;
      case DType::Float: v[i] = static_cast<int64_t>(t.ptr<float>()[i]); break;
      default: throw Error(std::string("expected an integer tensor, got ") + dtype_name(t.dtype));
    }
  }
  return v;
}

inline int64_t prod(const std::vector<int64_t>& v, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < v.size(); ++i) p *= v[i];
  return p;
}

// C[M,N] (+)= A[M,K] * B[K,N], all row-major with leading dims lda/ldb/ldc.
// `accumulate` false overwrites C. Four rows of A share each streamed row of
// B, and N is tiled so the B panel stays in cache; the inner j loop is a
// plain multiply-add the compiler vectorises. Sums are in fp32, in k order.
inline void gemm_rows(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* C, int64_t ldc, bool accumulate) {
  constexpr int64_t kTileN = 512;
  for (int64_t j0 = 0; j0 < N; j0 += kTileN) {
    const int64_t nj = std::min(kTileN, N - j0);
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) {
      float* __restrict c0 = C + i * ldc + j0;
      float* __restrict c1 = c0 + ldc;
      float* __restrict c2 = c1 + ldc;
      float* __restrict c3 = c2 + ldc;
      if (!accumulate)
        for (int64_t j = 0; j < nj; ++j) c0[j] = c1[j] = c2[j] = c3[j] = 0.f;
      const float* a0 = A + i * lda;
      for (int64_t k = 0; k < K; ++k) {
        const float v0 = a0[k], v1 = a0[lda + k], v2 = a0[2 * lda + k], v3 = a0[3 * lda + k];
        const float* b = B + k * ldb + j0;
        for (int64_t j = 0; j < nj; ++j) {
          const float bj = b[j];
          c0[j] += v0 * bj;
          c1[j] += v1 * bj;
          c2[j] += v2 * bj;
          c3[j] += v3 * bj;
        }
      }
    }
    for (; i < M; ++i) {
      float* c = C + i * ldc + j0;
      if (!accumulate)
        for (int64_t j = 0; j < nj; ++j) c[j] = 0.f;
      const float* a = A + i * lda;
      for (int64_t k = 0; k < K; ++k) {
        const float av = a[k];
        const float* b = B + k * ldb + j0;
        for (int64_t j = 0; j < nj; ++j) c[j] += av * b[j];
      }
    }
  }
}

// The same, with the M rows split across threads.
inline void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                 int64_t ldc, bool accumulate) {
  int64_t work_per_row = std::max<int64_t>(1, N * K);
  int64_t min_rows = std::max<int64_t>(1, (1 << 16) / work_per_row);
  parallel_for(M, min_rows, [&](int64_t b, int64_t e) {
    gemm_rows(e - b, N, K, A + b * lda, lda, B, ldb, C + b * ldc, ldc, accumulate);
  });
}

}  // namespace fuseopt::cpumath
