// ONNX RotaryEmbedding (opset 23) on CUDA: one warp per head row; semantics
// in kernels/common/rotary_params.h, shared with the CPU reference. An
// out-of-range position id is reported through the backend's index-error
// slot (the Session raises it naming the node) and its row is written as 0.
#include "kernels/common/rotary_params.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/index_errors.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// One warp per head row ([rows, D] view of X: 4-D rows are (b·H + h)·S + s, 3-D
// rows (b·S + s)·H + h), lanes over the (x1, x2) pairs and the pass-through
// tail: the row's batch and position are found once per row, with 32 pairs per
// warp step (the element-per-thread form spent most of its time in 64-bit
// index division).
constexpr int kRowsPerBlock = 8;

template <class T, class C>
__global__ void rotary_rows_kernel(const T* __restrict__ x, const C* __restrict__ cos_c, const C* __restrict__ sin_c,
                                   const int64_t* __restrict__ pos, T* __restrict__ y, int64_t rows, int S, int H,
                                   int D, int R, int rotated_heads, int64_t max_pos, bool four_d, bool interleaved,
                                   bool cache_bcast, IndexErrorSink errors, bool trigger_first) {
  // Programmatic dependent launch (pdl.cuh): x is the QKV GEMV's output. A few blocks: the
  // attention after it may start first (pdl_begin_trigger_first).
  cuda_pdl::pdl_begin_trigger_first(trigger_first);
  const int half = R / 2;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.y; r < rows; r += (int64_t)gridDim.x * kRowsPerBlock) {
    int64_t b, s;
    if (four_d) {
      s = r % S;
      b = r / ((int64_t)H * S);
    } else {
      s = (r / H) % S;
      b = r / ((int64_t)S * H);
    }
    const T* xv = x + r * D;
    T* yv = y + r * D;
    if (!four_d && static_cast<int>(r % H) >= rotated_heads) {  // packed form: this head passes through
      for (int d = lane; d < D; d += 32) yv[d] = xv[d];
      continue;
    }
    for (int d = R + lane; d < D; d += 32) yv[d] = xv[d];
    int64_t row = (cache_bcast ? 0 : b) * S + s;
    if (pos) {
      row = pos[b * S + s];
      if (row < 0 || row >= max_pos) {
        if (lane == 0) report_bad_index(errors, row, max_pos);
        for (int d = lane; d < R; d += 32) yv[d] = store_c<T>(static_cast<compute_t<T>>(0.f));
        continue;
      }
    }
    const C* cr = cos_c + row * half;
    const C* sr = sin_c + row * half;
    for (int i = lane; i < half; i += 32) {
      const int i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
      const float x1 = float(load_c(xv[i1])), x2 = float(load_c(xv[i2]));
      const float c = float(load_c(cr[i])), sn = float(load_c(sr[i]));
      yv[i1] = store_c<T>(static_cast<compute_t<T>>(c * x1 - sn * x2));
      yv[i2] = store_c<T>(static_cast<compute_t<T>>(sn * x1 + c * x2));
    }
  }
}

FUSEOPT_KERNEL(CudaRotaryEmbedding, "", "RotaryEmbedding", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& cos_c = req_input(ctx, 1);
  const RtTensor& sin_c = req_input(ctx, 2);
  const RtTensor* pos = opt_input(ctx, 3);
  DM_CHECK(ctx, cos_c.dtype == sin_c.dtype, "cos_cache and sin_cache dtypes differ");
  const dm::RotaryParams p = dm::resolve_rotary(ctx, x, cos_c, sin_c, pos);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t total = x.numel();
  if (!total) return;
  const IndexErrorSink errors = pos ? index_error_sink(ctx) : IndexErrorSink{nullptr, nullptr, 0};
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, cos_c.dtype, [&](auto ctag) {
      using C = typename decltype(ctag)::type;
      const int64_t rows = total / p.D;
      // With PDL: in a decode step this launch sits between the QKV GEMV and the attention, both
      // PDL-launched; a plain launch would serialise both edges.
      cuda_pdl::pdl_launch(
          rotary_rows_kernel<T, C>, grid_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream_of(ctx),
          x.ptr<T>(), cos_c.ptr<C>(), sin_c.ptr<C>(), pos ? pos->ptr<int64_t>() : nullptr, y->ptr<T>(), rows,
          static_cast<int>(p.S), static_cast<int>(p.H), static_cast<int>(p.D), static_cast<int>(p.R),
          static_cast<int>(p.rotated_heads), p.max_pos,
          p.four_d, p.interleaved, !pos && p.cache_batch == 1, errors, cuda_pdl::trigger_first_enabled());
    });
  });
  check_launch(ctx);
}

// fuseopt.RotaryEmbedding (the rotary fusion's op): the same kernel, whose
// caches may also broadcast over the batch (kernels/common/rotary_params.h).
KernelRegistrar cuda_fuseopt_rotary_registrar(KernelInfo{"fuseopt", "RotaryEmbedding", Backend::CUDA,
                                                         {DType::Float, DType::Float16, DType::BFloat16},
                                                         CudaRotaryEmbedding});

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
