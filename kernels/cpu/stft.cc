// STFT (opset 17, the export of torch.stft) and DFT (opset 17/20) as direct
// DFTs in double (reference accuracy), and the window generators HannWindow,
// HammingWindow, BlackmanWindow. Parameters: kernels/common/stft_params.h,
// shared with the CUDA kernels.
#include <cmath>

#include "kernels/common/stft_params.h"
#include "kernels/cpu/math_util.h"

namespace fuseopt {
namespace {

FUSEOPT_KERNEL(cpu_STFT, "", "STFT", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "needs the signal");
  const RtTensor* window = dm::opt_input(ctx, 2);
  MATH_CHECK(ctx, !window || window->dtype == DType::Float, "window must be float");
  const dm::StftParams p = dm::resolve_stft(ctx, *x, window);
  float* y = ctx.output(0, x->dtype, p.out_shape)->ptr<float>();
  const float* px = x->ptr<float>();
  const float* w = window ? window->ptr<float>() : nullptr;
  const int64_t ch = p.complex_in ? 2 : 1, N = p.frame_length;
  parallel_for(p.B * p.frames, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / p.frames, f = r % p.frames;
      const float* frame = px + (b * p.L + f * p.step) * ch;
      for (int64_t k = 0; k < p.bins; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < N; ++n) {
          // The angle from (k * n) mod N keeps it exact for long frames.
          const double a = 2.0 * M_PI * static_cast<double>((k * n) % N) / static_cast<double>(N);
          const double c = std::cos(a), s = std::sin(a), wn = w ? w[n] : 1.0;
          const double xr = frame[n * ch] * wn, xi = p.complex_in ? frame[n * ch + 1] * wn : 0.0;
          re += xr * c + xi * s;
          im += xi * c - xr * s;
        }
        float* out = y + ((r * p.bins) + k) * 2;
        out[0] = static_cast<float>(re);
        out[1] = static_cast<float>(im);
      }
    }
  });
}

FUSEOPT_KERNEL(cpu_DFT, "", "DFT", Backend::CPU, {DType::Float}) {
  const RtTensor* x = ctx.input(0);
  MATH_CHECK(ctx, x, "needs the input");
  const dm::DftParams p = dm::resolve_dft(ctx, *x);
  float* y = ctx.output(0, x->dtype, p.out_shape)->ptr<float>();
  const float* px = x->ptr<float>();
  const int64_t ch = p.complex_in ? 2 : 1, n_used = std::min(p.N, p.n_in);
  const double sign = p.inverse ? 1.0 : -1.0, norm = p.inverse ? 1.0 / static_cast<double>(p.N) : 1.0;
  parallel_for(p.outer * p.inner, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / p.inner, i = r % p.inner;
      for (int64_t k = 0; k < p.bins; ++k) {
        double re = 0, im = 0;
        for (int64_t n = 0; n < n_used; ++n) {
          const double a = 2.0 * M_PI * static_cast<double>((k * n) % p.N) / static_cast<double>(p.N);
          const double c = std::cos(a), s = sign * std::sin(a);
          const float* e = px + ((o * p.n_in + n) * p.inner + i) * ch;
          const double xr = e[0], xi = p.complex_in ? e[1] : 0.0;
          re += xr * c - xi * s;
          im += xr * s + xi * c;
        }
        float* out = y + ((o * p.bins + k) * p.inner + i) * 2;
        out[0] = static_cast<float>(re * norm);
        out[1] = static_cast<float>(im * norm);
      }
    }
  });
}

void make_window(KernelContext& ctx, dm::WindowKind kind) {
  const dm::WindowParams p = dm::resolve_window(ctx);
  MATH_CHECK(ctx, p.dtype == DType::Float || p.dtype == DType::Double,
             "output_datatype " << dtype_name(p.dtype) << " is not supported on the CPU backend (float, double)");
  RtTensor* y = ctx.output(0, p.dtype, {p.size});
  for (int64_t n = 0; n < p.size; ++n) {
    const double v = dm::window_value(kind, n, p.denom);
    if (p.dtype == DType::Float) y->ptr<float>()[n] = static_cast<float>(v);
    else y->ptr<double>()[n] = v;
  }
}

FUSEOPT_KERNEL(cpu_HannWindow, "", "HannWindow", Backend::CPU, {}) { make_window(ctx, dm::WindowKind::Hann); }
FUSEOPT_KERNEL(cpu_HammingWindow, "", "HammingWindow", Backend::CPU, {}) { make_window(ctx, dm::WindowKind::Hamming); }
FUSEOPT_KERNEL(cpu_BlackmanWindow, "", "BlackmanWindow", Backend::CPU, {}) {
  make_window(ctx, dm::WindowKind::Blackman);
}

}  // namespace
}  // namespace fuseopt
