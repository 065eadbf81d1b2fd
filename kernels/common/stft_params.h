// STFT (opset 17) and the window generators (HannWindow, HammingWindow,
// BlackmanWindow) shared by the CPU reference (kernels/cpu/stft.cc) and the
// CUDA kernels (kernels/cuda/stft.cu). Plain C++ (compiles under nvcc too).
//  STFT: signal [B, L, 1] (real) or [B, L, 2] (complex), frame_step (scalar),
//  window [W] (optional), frame_length (optional scalar, defaults to W);
//  Y [B, frames, bins, 2] with frames = 1 + (L - frame_length) / frame_step,
//  bins = frame_length / 2 + 1 when onesided (real input only), else
//  frame_length;  Y[b, f, k] = sum_n x[b, f*step + n] * w[n] * exp(-2 pi i k n / frame_length).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct StftParams {
  int64_t B = 0, L = 0, frame_length = 0, step = 0, frames = 0, bins = 0;
  bool complex_in = false;
  std::vector<int64_t> out_shape;
};

inline StftParams resolve_stft(KernelContext& ctx, const RtTensor& signal, const RtTensor* window) {
  StftParams p;
  DM_CHECK(ctx, signal.rank() == 3 && (signal.shape[2] == 1 || signal.shape[2] == 2),
           "signal must be [batch, length, 1 or 2], got " << shape_str(signal.shape));
  p.B = signal.shape[0];
  p.L = signal.shape[1];
  p.complex_in = signal.shape[2] == 2;
  const RtTensor* step_t = opt_host_input(ctx, 1);
  DM_CHECK(ctx, step_t && step_t->numel() == 1, "frame_step must be a scalar");
  p.step = int_at(ctx, *step_t, 0);
  DM_CHECK(ctx, p.step > 0, "frame_step must be positive, got " << p.step);
  if (window) DM_CHECK(ctx, window->rank() == 1, "window must be 1-D, got " << shape_str(window->shape));
  const RtTensor* len_t = opt_host_input(ctx, 3);
  if (len_t) {
    DM_CHECK(ctx, len_t->numel() == 1, "frame_length must be a scalar");
    p.frame_length = int_at(ctx, *len_t, 0);
    DM_CHECK(ctx, !window || window->shape[0] == p.frame_length,
             "window length " << window->shape[0] << " differs from frame_length " << p.frame_length);
  } else {
    DM_CHECK(ctx, window, "needs a window or frame_length");
    p.frame_length = window->shape[0];
  }
  DM_CHECK(ctx, p.frame_length > 0 && p.frame_length <= p.L,
           "frame_length " << p.frame_length << " must be in [1, signal length " << p.L << "]");
  const bool onesided = ctx.node().attr_int("onesided", 1) != 0;
  DM_CHECK(ctx, !(onesided && p.complex_in), "onesided = 1 needs a real signal");
  p.frames = 1 + (p.L - p.frame_length) / p.step;
  p.bins = onesided ? p.frame_length / 2 + 1 : p.frame_length;
  p.out_shape = {p.B, p.frames, p.bins, 2};
  return p;
}

// DFT (opset 17: axis attribute, default 1; opset 20: axis input 2, default
// -2): X [..., n, ..., 1|2] along `axis` (never the last, complex dim),
// dft_length (input 1) zero-pads or truncates the signal, onesided keeps
// bins 0..N/2, inverse uses exp(+2 pi i k n / N) / N.
// Y[o, k, i] = sum_n X[o, n, i] * exp(-+2 pi i k n / N).
struct DftParams {
  int64_t outer = 0, n_in = 0, N = 0, bins = 0, inner = 0;
  bool complex_in = false, inverse = false;
  std::vector<int64_t> out_shape;
};

inline DftParams resolve_dft(KernelContext& ctx, const RtTensor& x) {
  DftParams p;
  const int64_t rank = static_cast<int64_t>(x.rank());
  DM_CHECK(ctx, rank >= 2 && (x.shape.back() == 1 || x.shape.back() == 2),
           "input must be [..., 1 or 2] (real or complex), got " << shape_str(x.shape));
  int64_t axis;
  const RtTensor* axis_t = opt_host_input(ctx, 2);
  if (ctx.node().has_attr("axis")) {
    axis = ctx.node().attr_int("axis", 1);
  } else if (axis_t) {
    DM_CHECK(ctx, axis_t->numel() == 1, "axis must be a scalar");
    axis = int_at(ctx, *axis_t, 0);
  } else {
    // Opset 17 defaults to 1 and opset 20 to -2: the same axis for rank 2 and 3.
    DM_CHECK(ctx, rank <= 3, "no axis given and the default differs between opsets 17 and 20 for rank " << rank);
    axis = rank - 2;
  }
  DM_CHECK(ctx, axis >= -rank && axis < rank, "axis " << axis << " is out of range for rank " << rank);
  if (axis < 0) axis += rank;
  DM_CHECK(ctx, axis != rank - 1, "axis must not be the last (real/imaginary) dim");
  p.complex_in = x.shape.back() == 2;
  p.inverse = ctx.node().attr_int("inverse", 0) != 0;
  const bool onesided = ctx.node().attr_int("onesided", 0) != 0;
  DM_CHECK(ctx, !(onesided && p.inverse), "onesided with inverse is not supported");
  p.outer = prod(x.shape, 0, static_cast<size_t>(axis));
  p.n_in = x.shape[axis];
  p.inner = prod(x.shape, static_cast<size_t>(axis) + 1, static_cast<size_t>(rank - 1));
  p.N = p.n_in;
  if (const RtTensor* len_t = opt_host_input(ctx, 1)) {
    DM_CHECK(ctx, len_t->numel() == 1, "dft_length must be a scalar");
    p.N = int_at(ctx, *len_t, 0);
  }
  DM_CHECK(ctx, p.N > 0, "dft_length must be positive, got " << p.N);
  p.bins = onesided ? p.N / 2 + 1 : p.N;
  p.out_shape = x.shape;
  p.out_shape[axis] = p.bins;
  p.out_shape.back() = 2;
  return p;
}

// Window generators: size (scalar), periodic (default 1), output_datatype.
enum class WindowKind { Hann, Hamming, Blackman };

struct WindowParams {
  int64_t size = 0;
  double denom = 1;  // N' = size when periodic, size - 1 otherwise
  DType dtype = DType::Float;
};

inline WindowParams resolve_window(KernelContext& ctx) {
  WindowParams p;
  const RtTensor* size_t_ = opt_host_input(ctx, 0);
  DM_CHECK(ctx, size_t_ && size_t_->numel() == 1, "size must be a scalar");
  p.size = int_at(ctx, *size_t_, 0);
  DM_CHECK(ctx, p.size >= 0, "size must be >= 0, got " << p.size);
  const bool periodic = ctx.node().attr_int("periodic", 1) != 0;
  p.denom = static_cast<double>(periodic ? p.size : p.size - 1);
  p.dtype = static_cast<DType>(ctx.node().attr_int("output_datatype", static_cast<int64_t>(DType::Float)));
  return p;
}

// Value n of the window (a window of size 1 that is not periodic is [1]).
inline double window_value(WindowKind k, int64_t n, double denom) {
  if (denom <= 0) return 1.0;
  const double a = 2.0 * M_PI * static_cast<double>(n) / denom;
  switch (k) {
    case WindowKind::Hann: return 0.5 - 0.5 * std::cos(a);
    case WindowKind::Hamming: return 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(a);
    case WindowKind::Blackman: return 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  return 0;
}

}  // namespace fuseopt::dm
