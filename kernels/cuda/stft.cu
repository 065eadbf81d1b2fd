// STFT (opset 17) and DFT (opset 17/20) on CUDA: one thread per output
// complex value (STFT: per batch, frame, bin), a direct DFT
// over the frame with the angle taken from (k * n) mod N and sums in double
// (the H200 has fast fp64; the result then matches the CPU reference to fp32
// rounding). Window generators (HannWindow, HammingWindow, BlackmanWindow)
// compute on the device. Parameters: kernels/common/stft_params.h.
#include "kernels/common/stft_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T, class W>
__global__ void stft_kernel(const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ y, int64_t total,
                            int64_t L, int64_t N, int64_t step, int64_t frames, int64_t bins, bool complex_in) {
  const int64_t ch = complex_in ? 2 : 1;
  CUDA_GRID_STRIDE(i, total) {
    const int64_t k = i % bins, f = (i / bins) % frames, b = i / (bins * frames);
    const T* frame = x + (b * L + f * step) * ch;
    double re = 0, im = 0;
    for (int64_t n = 0; n < N; ++n) {
      double s, c;
      sincospi(2.0 * static_cast<double>((k * n) % N) / static_cast<double>(N), &s, &c);
      const double wn = w ? static_cast<double>(float(load_c(w[n]))) : 1.0;
      const double xr = static_cast<double>(float(load_c(frame[n * ch]))) * wn;
      const double xi = complex_in ? static_cast<double>(float(load_c(frame[n * ch + 1]))) * wn : 0.0;
      re += xr * c + xi * s;
      im += xi * c - xr * s;
    }
    y[2 * i] = store_c<T>(static_cast<compute_t<T>>(static_cast<float>(re)));
    y[2 * i + 1] = store_c<T>(static_cast<compute_t<T>>(static_cast<float>(im)));
  }
}

FUSEOPT_KERNEL(CudaSTFT, "", "STFT", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* window = opt_input(ctx, 2);
  const dm::StftParams p = dm::resolve_stft(ctx, x, window);
  RtTensor* y = ctx.output(0, x.dtype, p.out_shape);
  const int64_t total = p.B * p.frames * p.bins;
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto launch = [&](auto wtag) {
      using W = typename decltype(wtag)::type;
      stft_kernel<T, W><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), window ? window->ptr<W>() : nullptr, y->ptr<T>(), total, p.L, p.frame_length, p.step, p.frames,
          p.bins, p.complex_in);
    };
    if (window) dispatch_float(ctx, window->dtype, launch);
    else launch(Tag<T>{});
  });
  check_launch(ctx);
}

template <class T>
__global__ void dft_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, int64_t n_in, int64_t N,
                           int64_t bins, int64_t inner, bool complex_in, bool inverse) {
  const int64_t ch = complex_in ? 2 : 1, n_used = N < n_in ? N : n_in;
  const double sign = inverse ? 1.0 : -1.0, norm = inverse ? 1.0 / static_cast<double>(N) : 1.0;
  CUDA_GRID_STRIDE(t, total) {
    const int64_t i = t % inner, k = (t / inner) % bins, o = t / (inner * bins);
    double re = 0, im = 0;
    for (int64_t n = 0; n < n_used; ++n) {
      double s, c;
      sincospi(2.0 * static_cast<double>((k * n) % N) / static_cast<double>(N), &s, &c);
      s *= sign;
      const T* e = x + ((o * n_in + n) * inner + i) * ch;
      const double xr = float(load_c(e[0])), xi = complex_in ? float(load_c(e[1])) : 0.f;
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    y[2 * t] = store_c<T>(static_cast<compute_t<T>>(static_cast<float>(re * norm)));
    y[2 * t + 1] = store_c<T>(static_cast<compute_t<T>>(static_cast<float>(im * norm)));
  }
}

FUSEOPT_KERNEL(CudaDFT, "", "DFT", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::DftParams p = dm::resolve_dft(ctx, x);
  RtTensor* y = ctx.output(0, x.dtype, p.out_shape);
  const int64_t total = p.outer * p.bins * p.inner;
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dft_kernel<T><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), total, p.n_in, p.N, p.bins,
                                                                     p.inner, p.complex_in, p.inverse);
  });
  check_launch(ctx);
}

template <class T>
__global__ void window_kernel(T* __restrict__ y, int64_t size, double denom, int kind) {
  CUDA_GRID_STRIDE(n, size) {
    double v = 1.0;
    if (denom > 0) {
      const double a = 2.0 * static_cast<double>(n) / denom;  // in units of pi
      if (kind == 0) v = 0.5 - 0.5 * cospi(a);
      else if (kind == 1) v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * cospi(a);
      else v = 0.42 - 0.5 * cospi(a) + 0.08 * cospi(2 * a);
    }
    y[n] = store_c<T>(static_cast<compute_t<T>>(static_cast<float>(v)));
  }
}

void make_window(KernelContext& ctx, int kind) {
  const dm::WindowParams p = dm::resolve_window(ctx);
  DType dt = p.dtype;
  // A float output is stored in the run's 16-bit type under --precision fp16/bf16.
  if (dt == DType::Float && ctx.precision() == Precision::FP16) dt = DType::Float16;
  if (dt == DType::Float && ctx.precision() == Precision::BF16) dt = DType::BFloat16;
  RtTensor* y = ctx.output(0, dt, {p.size});
  if (!p.size) return;
  dispatch_float(ctx, dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    window_kernel<T><<<grid_for(p.size), kThreads, 0, stream_of(ctx)>>>(y->ptr<T>(), p.size, p.denom, kind);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaHannWindow, "", "HannWindow", Backend::CUDA, {}) { make_window(ctx, 0); }
FUSEOPT_KERNEL(CudaHammingWindow, "", "HammingWindow", Backend::CUDA, {}) { make_window(ctx, 1); }
FUSEOPT_KERNEL(CudaBlackmanWindow, "", "BlackmanWindow", Backend::CUDA, {}) { make_window(ctx, 2); }

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
