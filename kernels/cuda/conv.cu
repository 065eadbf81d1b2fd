// Conv (1-D/2-D, groups, pads, strides, dilations, auto_pad) as im2col + one
// batched cuBLASLt GEMM per group (fp32 accumulation; the bias is written
// first and the GEMM adds to it), or, for thin groups (depthwise), a direct
// kernel with one thread per output element. cuDNN is not used: it is not on
// the GPU machine's library path and too large to carry.
#include <cmath>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/spatial_geometry.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// ---- Conv --------------------------------------------------------------------------
template <class T, class W>
__global__ void conv2d_direct(const T* __restrict__ x, const W* __restrict__ w, const W* __restrict__ bias,
                              T* __restrict__ y, int64_t total, int64_t C, int64_t OC, int64_t group, Axis ah, Axis aw) {
  const int64_t Cg = C / group, OCg = OC / group;
  CUDA_GRID_STRIDE(i, total) {
    const int64_t ow = i % aw.out;
    int64_t t = i / aw.out;
    const int64_t oh = t % ah.out;
    t /= ah.out;
    const int64_t oc = t % OC, n = t / OC;
    const int64_t g = oc / OCg;
    float acc = bias ? float(load_c(bias[oc])) : 0.f;
    const T* xb = x + (n * C + g * Cg) * ah.in * aw.in;
    const W* wb = w + oc * Cg * ah.k * aw.k;
    for (int64_t c = 0; c < Cg; ++c) {
      const T* xc = xb + c * ah.in * aw.in;
      const W* wc = wb + c * ah.k * aw.k;
      for (int64_t kh = 0; kh < ah.k; ++kh) {
        const int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil;
        if (ih < 0 || ih >= ah.in) continue;
        for (int64_t kw = 0; kw < aw.k; ++kw) {
          const int64_t iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
          if (iw < 0 || iw >= aw.in) continue;
          acc += float(load_c(xc[ih * aw.in + iw])) * float(load_c(wc[kh * aw.k + kw]));
        }
      }
    }
    y[i] = store_c<T>(static_cast<compute_t<T>>(acc));
  }
}

// col[n][r][p] for images [n0, n0 + nb) of group g: r = (c, kh, kw), p = (oh, ow);
// zeros where the window reads padding.
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, int64_t total, int64_t n0, int64_t C,
                              int64_t c0, int64_t KK, int64_t P, Axis ah, Axis aw) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t p = i % P, r = (i / P) % KK, nb = i / (P * KK);
    const int64_t kw = r % aw.k, kh = (r / aw.k) % ah.k, c = r / (aw.k * ah.k);
    const int64_t ow = p % aw.out, oh = p / aw.out;
    const int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil, iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
    const bool inside = ih >= 0 && ih < ah.in && iw >= 0 && iw < aw.in;
    col[i] = inside ? x[((n0 + nb) * C + c0 + c) * ah.in * aw.in + ih * aw.in + iw] : T(0.f);
  }
}

// y[n][oc][p] = bias[oc] (the GEMM then accumulates into it).
template <class T>
__global__ void channel_fill_kernel(T* __restrict__ y, const T* __restrict__ bias, int64_t total, int64_t OC, int64_t P) {
  CUDA_GRID_STRIDE(i, total) { y[i] = bias[(i / P) % OC]; }
}

template <class T>
void conv_gemm(KernelContext& ctx, const RtTensor& x, const RtTensor& w, const RtTensor* bias, RtTensor* y, int64_t N,
               int64_t C, int64_t OC, int64_t group, const Axis& ah, const Axis& aw) {
  const int64_t Cg = C / group, OCg = OC / group, KK = Cg * ah.k * aw.k, P = ah.out * aw.out, HW = ah.in * aw.in;
  cudaStream_t stream = stream_of(ctx);
  if (bias) {
    channel_fill_kernel<T><<<grid_for(y->numel()), kThreads, 0, stream>>>(y->ptr<T>(), bias->ptr<T>(), y->numel(), OC, P);
    check_launch(ctx);
  }
  const bool direct = ah.k == 1 && aw.k == 1 && ah.stride == 1 && aw.stride == 1 && ah.pad_begin == 0 &&
                      aw.pad_begin == 0 && ah.pad_end == 0 && aw.pad_end == 0;  // 1x1: X is already the column matrix
  // Images per im2col chunk: keep the column buffer under 256 MiB.
  const int64_t per_image = KK * P * static_cast<int64_t>(sizeof(T));
  const int64_t chunk = direct ? N : std::max<int64_t>(1, std::min<int64_t>(N, (int64_t{256} << 20) / std::max<int64_t>(per_image, 1)));
  T* col = direct ? nullptr : static_cast<T*>(ctx.scratch(static_cast<size_t>(chunk * per_image)));
  cuda_fused::ScratchFn scratch = [&ctx](size_t bytes) { return ctx.scratch(bytes); };
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nb = std::min(chunk, N - n0);
    for (int64_t g = 0; g < group; ++g) {
      const T* B;
      int64_t stride_b;
      if (direct) {
        B = x.ptr<T>() + (n0 * C + g * Cg) * HW;
        stride_b = C * HW;
      } else {
        const int64_t total = nb * KK * P;
        im2col_kernel<T><<<grid_for(total), kThreads, 0, stream>>>(x.ptr<T>(), col, total, n0, C, g * Cg, KK, P, ah, aw);
        check_launch(ctx);
        B = col;
        stride_b = KK * P;
      }
      cuda_fused::GemmDesc d;
      d.dtype = x.dtype;
      d.tf32 = ctx.precision() == Precision::TF32;
      d.M = OCg;
      d.N = P;
      d.K = KK;
      d.batch = nb;
      d.stride_a = 0;  // the group's filters serve every image
      d.stride_b = stride_b;
      d.stride_d = OC * P;
      d.beta = bias ? 1.f : 0.f;
      cuda_fused::gemm(d, w.ptr<T>() + g * OCg * KK, B, y->ptr<T>() + (n0 * OC + g * OCg) * P, stream, scratch);
    }
  }
}

FUSEOPT_KERNEL(CudaConv, "", "Conv", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& w = req_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, x.rank() == 3 || x.rank() == 4, "only 1-D and 2-D convolutions are supported, got X " << shape_str(x.shape));
  DM_CHECK(ctx, w.rank() == x.rank(), "W " << shape_str(w.shape) << " does not match X " << shape_str(x.shape));
  const int64_t group = ctx.node().attr_int("group", 1);
  const int64_t N = x.shape[0], C = x.shape[1], OC = w.shape[0], Cg = w.shape[1];
  DM_CHECK(ctx, group >= 1 && C == Cg * group && OC % group == 0,
           "channels do not match: X " << shape_str(x.shape) << ", W " << shape_str(w.shape) << ", group " << group);
  const std::vector<int64_t> in_sp(x.shape.begin() + 2, x.shape.end()), k_sp(w.shape.begin() + 2, w.shape.end());
  const std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape", k_sp);
  DM_CHECK(ctx, ks == k_sp, "kernel_shape " << shape_str(ks) << " differs from W " << shape_str(w.shape));
  if (bias) DM_CHECK(ctx, bias->numel() == OC && bias->dtype == w.dtype, "bias " << shape_str(bias->shape) << " must have " << OC << " elements of W's dtype");
  const std::vector<Axis> axes = spatial_geometry_2d(ctx, in_sp, k_sp, false);
  std::vector<int64_t> out_shape{N, OC};
  for (size_t i = x.rank() == 3 ? 1 : 0; i < axes.size(); ++i) out_shape.push_back(axes[i].out);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  const int64_t OCg = OC / group, KK = Cg * axes[0].k * axes[1].k;
  if (x.dtype == w.dtype && OCg >= 8 && KK >= 8) {
    dispatch_float(ctx, x.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      conv_gemm<T>(ctx, x, w, bias, y, N, C, OC, group, axes[0], axes[1]);
    });
    return;
  }
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, w.dtype, [&](auto wtag) {
      using W = typename decltype(wtag)::type;
      conv2d_direct<T, W><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), w.ptr<W>(), bias ? bias->ptr<W>() : nullptr, y->ptr<T>(), total, C, OC, group, axes[0], axes[1]);
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
