// MatMul (numpy semantics: batched, broadcast batch dims, 1-D operands) and
// Gemm (transA/transB, alpha, beta, unidirectionally broadcast C). fp32 with
// fp32 accumulation through cpumath::gemm.
#include <array>
#include <cstring>

#include "kernels/cpu/broadcast.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_MatMul, "", "MatMul", Backend::CPU, {DType::Float}) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  MATH_CHECK(ctx, a && b, "needs two inputs");
  MATH_CHECK(ctx, a->dtype == DType::Float && b->dtype == DType::Float, "expects float32 inputs");
  MATH_CHECK(ctx, a->rank() >= 1 && b->rank() >= 1, "operands must have rank >= 1, got " << shape_str(a->shape)
                                                                                       << " and " << shape_str(b->shape));
  // Promote 1-D operands: A [K] -> [1, K], B [K] -> [K, 1]; the added dim is dropped from the result.
  std::vector<int64_t> sa = a->shape, sb = b->shape;
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  MATH_CHECK(ctx, sb[sb.size() - 2] == K, "inner dims differ: " << shape_str(a->shape) << " x " << shape_str(b->shape));
  std::vector<int64_t> batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  std::vector<int64_t> batch = cpu::broadcast_shape({batch_a, batch_b}, ctx.node());
  std::vector<int64_t> out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  RtTensor* y = ctx.output(0, DType::Float, out_shape);
  const int64_t nb = shape_numel(batch);
  if (y->numel() == 0) return;
  // Batch offsets (in matrices) of A and B for each output batch.
  std::vector<int64_t> off_a(nb), off_b(nb);
  if (nb == 1) {
    off_a[0] = off_b[0] = 0;
  } else {
    std::array<std::vector<int64_t>, 2> strides = {cpu::broadcast_strides(batch_a, batch),
                                                   cpu::broadcast_strides(batch_b, batch)};
    cpu::for_each_broadcast<2>(batch, strides, [&](int64_t o, const std::array<int64_t, 2>& off) {
      off_a[o] = off[0];
      off_b[o] = off[1];
    });
  }
  const float* pa = a->ptr<float>();
  const float* pb = b->ptr<float>();
  float* py = y->ptr<float>();
  // Parallelise over batch x rows so small-M batched products (attention) use all threads.
  const int64_t rows = nb * M;
  int64_t min_rows = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, N * K));
  parallel_for(rows, min_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      int64_t bi = r / M, i = r % M;
      int64_t cnt = std::min(r1 - r, M - i);
      cpumath::gemm_rows(cnt, N, K, pa + off_a[bi] * M * K + i * K, K, pb + off_b[bi] * K * N, N,
                         py + bi * M * N + i * N, N, false);
      r += cnt;
    }
  });
}

// Row-major copy of the transpose of a [R, C] matrix.
void transpose_into(const float* src, int64_t R, int64_t C, float* dst) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) dst[c * R + r] = src[r * C + c];
}

FUSEOPT_KERNEL(cpu_Gemm, "", "Gemm", Backend::CPU, {DType::Float}) {
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  const RtTensor* c = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, a && b, "needs A and B");
  MATH_CHECK(ctx, a->rank() == 2 && b->rank() == 2, "A and B must be 2-D, got " << shape_str(a->shape) << " and "
                                                                                << shape_str(b->shape));
  const Node& n = ctx.node();
  bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  float alpha = n.attr_float("alpha", 1.f), beta = n.attr_float("beta", 1.f);
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  MATH_CHECK(ctx, K == Kb, "inner dims differ: A " << shape_str(a->shape) << (ta ? "ᵀ" : "") << " x B "
                                                   << shape_str(b->shape) << (tb ? "ᵀ" : ""));
  RtTensor* y = ctx.output(0, DType::Float, {M, N});
  float* py = y->ptr<float>();
  const float* pa = a->ptr<float>();
  const float* pb = b->ptr<float>();
  if (ta) {
    float* t = static_cast<float*>(ctx.scratch(static_cast<size_t>(M * K) * 4));
    transpose_into(pa, K, M, t);
    pa = t;
  }
  if (tb) {
    float* t = static_cast<float*>(ctx.scratch(static_cast<size_t>(K * N) * 4));
    transpose_into(pb, N, K, t);
    pb = t;
  }
  cpumath::gemm(M, N, K, pa, K, pb, N, py, N, false);
  if (alpha != 1.f)
    for (int64_t i = 0; i < M * N; ++i) py[i] *= alpha;
  if (c && beta != 0.f) {
    MATH_CHECK(ctx, c->dtype == DType::Float, "C must be float32");
    std::vector<int64_t> out{M, N};
    std::vector<int64_t> bs = cpu::broadcast_shape({c->shape, out}, ctx.node());
    MATH_CHECK(ctx, bs == out, "C " << shape_str(c->shape) << " does not broadcast to [" << M << "," << N << "]");
    std::array<std::vector<int64_t>, 1> strides = {cpu::broadcast_strides(c->shape, out)};
    const float* pc = c->ptr<float>();
    cpu::for_each_broadcast<1>(out, strides, [&](int64_t o, const std::array<int64_t, 1>& off) {
      py[o] += beta * pc[off[0]];
    });
  }
}

}  // namespace
}  // namespace fuseopt
