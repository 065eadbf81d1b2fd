// fuseopt.FusedMatMul: Y = act(alpha * A·op(B) + bias) (+ residual), fp32 accumulation.
// A [..., M, K] (or [K]); B [K, N] or [..., K, N] ([..., N, K] with transB=1);
// batch dims broadcast like MatMul; bias [N] (or [1, ..., 1, N]); residual?
// of Y's element count, read row-major as Y's shape, added after the activation.
#include <algorithm>
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/cpu/fused_activation.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {
namespace {

// Shared with the CUDA kernels.
using dm::batch_strides;

}  // namespace

FUSEOPT_KERNEL(CpuFusedMatMul, "fuseopt", "FusedMatMul", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  const RtTensor* residual = ctx.num_inputs() > 3 ? ctx.input(3) : nullptr;
  FUSE_CHECK(a && b, n.label() << ": FusedMatMul needs inputs A and B");
  FUSE_CHECK(a->dtype == DType::Float && b->dtype == DType::Float && (!bias || bias->dtype == DType::Float),
             n.label() << ": FusedMatMul CPU kernel supports float tensors only");
  FUSE_CHECK(!residual || residual->dtype == a->dtype,
             n.label() << ": FusedMatMul residual is " << dtype_name(residual->dtype) << ", A is "
                       << dtype_name(a->dtype));
  FUSE_CHECK(a->rank() >= 1 && b->rank() >= 2,
             n.label() << ": FusedMatMul needs A of rank >= 1 and B of rank >= 2, got " << shape_str(a->shape)
                       << " and " << shape_str(b->shape));
  const bool trans_b = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.0f);
  const cpu::Activation act = cpu::parse_activation(n);

  const bool a_vector = a->rank() == 1;
  std::vector<int64_t> ashape = a_vector ? std::vector<int64_t>{1, a->shape[0]} : a->shape;
  const int64_t M = ashape[ashape.size() - 2], K = ashape.back();
  const int64_t bK = trans_b ? b->shape.back() : b->shape[b->rank() - 2];
  const int64_t N = trans_b ? b->shape[b->rank() - 2] : b->shape.back();
  FUSE_CHECK(K == bK, n.label() << ": FusedMatMul inner dims differ: A " << shape_str(a->shape) << ", B "
                                << shape_str(b->shape) << (trans_b ? " (transB)" : ""));
  if (bias) {
    FUSE_CHECK(bias->numel() == N && (bias->rank() == 0 || bias->shape.back() == N),
               n.label() << ": FusedMatMul bias " << shape_str(bias->shape) << " is not [" << N << "]");
  }

  // Broadcast the batch dims.
  std::vector<int64_t> abatch(ashape.begin(), ashape.end() - 2), bbatch(b->shape.begin(), b->shape.end() - 2);
  const std::vector<int64_t> out_batch =
      dm::matmul_batch_shape(n, abatch, bbatch, a->shape, b->shape, "FusedMatMul ");  // shared with CUDA
  const std::vector<int64_t> sa = batch_strides(abatch, out_batch, M * K);
  const std::vector<int64_t> sb = batch_strides(bbatch, out_batch, K * N);

  std::vector<int64_t> yshape = out_batch;
  if (!a_vector) yshape.push_back(M);
  yshape.push_back(N);
  if (residual) {
    FUSE_CHECK(residual->numel() == shape_numel(yshape),
               n.label() << ": FusedMatMul residual " << shape_str(residual->shape) << " has " << residual->numel()
                         << " elements, Y " << shape_str(yshape) << " has " << shape_numel(yshape));
  }
  RtTensor* y = ctx.output(0, DType::Float, yshape);
  const int64_t batches = shape_numel(out_batch);
  const float* pa = a->ptr<float>();
  const float* pb = b->ptr<float>();
  const float* pbias = bias ? bias->ptr<float>() : nullptr;
  const float* pres = residual ? residual->ptr<float>() : nullptr;
  float* py = y->ptr<float>();
  if (M == 0 || N == 0) return;

  parallel_for(batches * M, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, N * K)), [&](int64_t lo, int64_t hi) {
    std::vector<float> acc(static_cast<size_t>(N));
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t bi = r / M, i = r % M;
      const auto [oa, ob] = dm::batch_item_offsets(bi, out_batch, sa, sb);  // shared with CUDA
      const float* arow = pa + oa + i * K;
      const float* bm = pb + ob;
      if (trans_b) {
        for (int64_t j = 0; j < N; ++j) {
          const float* brow = bm + j * K;
          float s = 0.0f;
          for (int64_t k = 0; k < K; ++k) s += arow[k] * brow[k];
          acc[j] = s;
        }
      } else {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t k = 0; k < K; ++k) {
          const float av = arow[k];
          const float* brow = bm + k * N;
          for (int64_t j = 0; j < N; ++j) acc[j] += av * brow[j];
        }
      }
      float* yrow = py + r * N;
      for (int64_t j = 0; j < N; ++j) {
        float v = alpha == 1.0f ? acc[j] : alpha * acc[j];
        if (pbias) v += pbias[j];
        yrow[j] = cpu::apply_activation(act, v);
      }
      if (pres) {
        const float* rrow = pres + r * N;  // Y's row r, read row-major whatever residual's shape
        for (int64_t j = 0; j < N; ++j) yrow[j] += rrow[j];
      }
    }
  });
}

}  // namespace fuseopt
