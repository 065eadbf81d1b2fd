// ONNX RotaryEmbedding (opset 23) on CUDA: one thread per element; semantics
// in kernels/common/rotary_params.h, shared with the CPU reference. An
// out-of-range position id is reported through the backend's index-error
// slot (the Session raises it naming the node) and its row is written as 0.
#include "kernels/common/rotary_params.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/index_errors.h"

namespace fuseopt {
namespace cuda {
namespace {

template <class T, class C>
__global__ void rotary_kernel(const T* __restrict__ x, const C* __restrict__ cos_c, const C* __restrict__ sin_c,
                              const int64_t* __restrict__ pos, T* __restrict__ y, int64_t total, int64_t S, int64_t H,
                              int64_t D, int64_t R, int64_t max_pos, bool four_d, bool interleaved,
                              bool cache_bcast, IndexErrorSink errors) {
  const int64_t half = R / 2;
  CUDA_GRID_STRIDE(e, total) {
    const int64_t d = e % D;
    int64_t b, s, h;
    if (four_d) {
      s = (e / D) % S;
      h = (e / (D * S)) % H;
      b = e / (D * S * H);
    } else {
      h = (e / D) % H;
      s = (e / (D * H)) % S;
      b = e / (D * H * S);
    }
    const float v = float(load_c(x[e]));
    if (d >= R) {
      y[e] = x[e];
      continue;
    }
    int64_t row = (cache_bcast ? 0 : b) * S + s;
    if (pos) {
      row = pos[b * S + s];
      if (row < 0 || row >= max_pos) {
        report_bad_index(errors, row, max_pos);
        y[e] = store_c<T>(static_cast<compute_t<T>>(0.f));
        continue;
      }
    }
    // This element's partner in its (x1, x2) pair and which of the two it is.
    int64_t i, partner;
    bool first;
    if (interleaved) {
      i = d / 2;
      first = (d % 2) == 0;
      partner = first ? d + 1 : d - 1;
    } else {
      first = d < half;
      i = first ? d : d - half;
      partner = first ? d + half : d - half;
    }
    const float c = float(load_c(cos_c[row * half + i])), sn = float(load_c(sin_c[row * half + i]));
    const float w = float(load_c(x[e - d + partner]));
    const float r = first ? c * v - sn * w : sn * w + c * v;
    y[e] = store_c<T>(static_cast<compute_t<T>>(r));
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
      rotary_kernel<T, C><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), cos_c.ptr<C>(), sin_c.ptr<C>(), pos ? pos->ptr<int64_t>() : nullptr, y->ptr<T>(), total, p.S, p.H,
          p.D, p.R, p.max_pos, p.four_d, p.interleaved, !pos && p.cache_batch == 1, errors);
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
