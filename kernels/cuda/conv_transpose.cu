// ConvTranspose on CUDA: one thread per output element, gathering the
// input positions and taps that land on it (the CPU reference's order:
// c, kd, kh, kw; fp32 accumulation). Geometry from
// kernels/common/conv_transpose_params.h, shared with the CPU kernel. A
// direct kernel: exporters' ConvTranspose layers (decoder upsampling,
// vocoders) are small next to the GEMMs around them.
#include "kernels/common/conv_transpose_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

using Axis = dm::ConvAxis;

__device__ __forceinline__ int64_t source_index(const Axis& a, int64_t o, int64_t k) {
  const int64_t t = o + a.pad_begin - k * a.dil;
  if (t < 0 || t % a.stride) return -1;
  const int64_t i = t / a.stride;
  return i < a.in ? i : -1;
}

template <class T, class W>
__global__ void conv_transpose_kernel(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ bias,
                                      T* __restrict__ y, int64_t total, int64_t C, int64_t M, int64_t group, Axis ad,
                                      Axis ah, Axis aw) {
  const int64_t Cg = C / group, Mg = M / group;
  const int64_t in_sp = ad.in * ah.in * aw.in, k_sp = ad.k * ah.k * aw.k;
  CUDA_GRID_STRIDE(i, total) {
    const int64_t ow = i % aw.out;
    int64_t t = i / aw.out;
    const int64_t oh = t % ah.out;
    t /= ah.out;
    const int64_t od = t % ad.out;
    t /= ad.out;
    const int64_t m = t % M, n = t / M;
    const int64_t g = m / Mg, mm = m % Mg;
    float acc = bias ? float(load_c(bias[m])) : 0.f;
    for (int64_t c = 0; c < Cg; ++c) {
      const int64_t ci = g * Cg + c;
      const T* xc = x + (n * C + ci) * in_sp;
      const W* wc = w + (ci * Mg + mm) * k_sp;
      for (int64_t kd = 0; kd < ad.k; ++kd) {
        const int64_t id = source_index(ad, od, kd);
        if (id < 0) continue;
        for (int64_t kh = 0; kh < ah.k; ++kh) {
          const int64_t ih = source_index(ah, oh, kh);
          if (ih < 0) continue;
          for (int64_t kw = 0; kw < aw.k; ++kw) {
            const int64_t iw = source_index(aw, ow, kw);
            if (iw < 0) continue;
            acc += float(load_c(xc[(id * ah.in + ih) * aw.in + iw])) * float(load_c(wc[(kd * ah.k + kh) * aw.k + kw]));
          }
        }
      }
    }
    y[i] = store_c<T>(static_cast<compute_t<T>>(acc));
  }
}

FUSEOPT_KERNEL(CudaConvTranspose, "", "ConvTranspose", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* w = opt_input(ctx, 1);
  const RtTensor* b = opt_input(ctx, 2);
  DM_CHECK(ctx, w, "needs X and W");
  DM_CHECK(ctx, !b || b->dtype == w->dtype, "B and W dtypes differ");
  const dm::ConvTransposeParams p = dm::resolve_conv_transpose(ctx, x.shape, w->shape, b ? &b->shape : nullptr);
  RtTensor* y = ctx.output(0, x.dtype, p.out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, w->dtype, [&](auto wtag) {
      using W = typename decltype(wtag)::type;
      conv_transpose_kernel<T, W><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), w->ptr<W>(), b ? b->ptr<W>() : nullptr, y->ptr<T>(), total, p.C, p.M, p.group, p.axes[0],
          p.axes[1], p.axes[2]);
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
