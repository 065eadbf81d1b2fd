// ConvTranspose (1-D/2-D/3-D, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad) as a direct gather: each output
// element sums x[n, c, i] * w[c, m, k] over the input positions i and taps k
// with i * stride + k * dilation - pad_begin == o. fp32 accumulation, in
// (c, kd, kh, kw) order. Geometry: kernels/common/conv_transpose_params.h,
// shared with the CUDA kernel.
#include "kernels/common/conv_transpose_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

// Input index along one axis for output o and tap k, or -1 when no input
// element lands there.
inline int64_t source_index(const dm::ConvAxis& a, int64_t o, int64_t k) {
  const int64_t t = o + a.pad_begin - k * a.dil;
  if (t < 0 || t % a.stride) return -1;
  const int64_t i = t / a.stride;
  return i < a.in ? i : -1;
}

FUSEOPT_KERNEL(cpu_ConvTranspose, "", "ConvTranspose", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  const RtTensor* w = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* b = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  MATH_CHECK(ctx, x && w, "needs X and W");
  MATH_CHECK(ctx, w->dtype == DType::Float && (!b || b->dtype == DType::Float), "W and B must be float");
  const dm::ConvTransposeParams p = dm::resolve_conv_transpose(ctx, x->shape, w->shape, b ? &b->shape : nullptr);
  RtTensor* y = ctx.output(0, x->dtype, p.out_shape);
  const dm::ConvAxis& ad = p.axes[0];
  const dm::ConvAxis& ah = p.axes[1];
  const dm::ConvAxis& aw = p.axes[2];
  const int64_t Cg = p.C / p.group, Mg = p.M / p.group;
  const int64_t in_sp = ad.in * ah.in * aw.in, out_sp = ad.out * ah.out * aw.out, k_sp = ad.k * ah.k * aw.k;
  const float* px = x->ptr<float>();
  const float* pw = w->ptr<float>();
  const float* pb = b ? b->ptr<float>() : nullptr;
  float* py = y->ptr<float>();
  const int64_t planes = p.N * p.M;
  parallel_for(planes, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.M, m = r % p.M, g = m / Mg, mm = m % Mg;
      float* yp = py + r * out_sp;
      for (int64_t od = 0; od < ad.out; ++od)
        for (int64_t oh = 0; oh < ah.out; ++oh)
          for (int64_t ow = 0; ow < aw.out; ++ow) {
            float acc = pb ? pb[m] : 0.f;
            for (int64_t c = 0; c < Cg; ++c) {
              const int64_t ci = g * Cg + c;
              const float* xc = px + (n * p.C + ci) * in_sp;
              const float* wc = pw + (ci * Mg + mm) * k_sp;
              for (int64_t kd = 0; kd < ad.k; ++kd) {
                const int64_t id = source_index(ad, od, kd);
                if (id < 0) continue;
                for (int64_t kh = 0; kh < ah.k; ++kh) {
                  const int64_t ih = source_index(ah, oh, kh);
                  if (ih < 0) continue;
                  for (int64_t kw = 0; kw < aw.k; ++kw) {
                    const int64_t iw = source_index(aw, ow, kw);
                    if (iw < 0) continue;
                    acc += xc[(id * ah.in + ih) * aw.in + iw] * wc[(kd * ah.k + kh) * aw.k + kw];
                  }
                }
              }
            }
            yp[(od * ah.out + oh) * aw.out + ow] = acc;
          }
    }
  });
}

}  // namespace
}  // namespace fuseopt
