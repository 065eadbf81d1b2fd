// LayerNormalization (statistics in fp32, two passes: mean, then centred
// variance, as the CPU reference), BatchNormalization (inference), pooling
// (Max/Average 1-D and 2-D, Global*), and Conv (1-D/2-D, groups, pads,
// strides, dilations, auto_pad) as im2col + one batched cuBLASLt GEMM per
// group (fp32 accumulation; the bias is written first and the GEMM adds to
// it), or, for thin groups (depthwise), a direct kernel with one thread per
// output element. cuDNN is not used: it is not on the GPU machine's library
// path and too large to carry.
#include <cmath>

#include "kernels/common/op_params.h"
#include "kernels/cuda/block_row_stats.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemm_cublaslt.h"

namespace fuseopt {
namespace cuda {
namespace {

// ---- LayerNormalization --------------------------------------------------------
// One block per row of D elements. Scale/B are dense [D] (DENSE) or read
// through broadcast strides over the normalised shape.
template <class T, class P, bool DENSE>
__global__ void layer_norm_kernel(const T* __restrict__ x, const P* __restrict__ g, const P* __restrict__ b,
                                  T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ inv_out, int64_t rows,
                                  int64_t D, float eps, BcastIndex<2> pix) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    const float2 st = block_row_stats(xr, D, eps, shm);
    const float mean = st.x, inv = st.y;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      int64_t gi = i, bi = i;
      if constexpr (!DENSE) {
        int64_t off[2];
        pix.offsets(i, off);
        gi = off[0];
        bi = off[1];
      }
      float v = (float(load_c(xr[i])) - mean) * inv * float(load_c(g[gi]));
      if (b) v += float(load_c(b[bi]));
      yr[i] = store_c<T>(static_cast<compute_t<T>>(v));
    }
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[r] = store_c<T>(static_cast<compute_t<T>>(mean));
      if (inv_out) inv_out[r] = store_c<T>(static_cast<compute_t<T>>(inv));
    }
    __syncthreads();
  }
}

FUSEOPT_KERNEL(CudaLayerNormalization, "", "LayerNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, scale, "needs X and Scale");
  DM_CHECK(ctx, x.rank() >= 1, "X must have rank >= 1");
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  const int64_t rows = dm::prod(x.shape, 0, axis), D = dm::prod(x.shape, axis, rank);
  const std::vector<int64_t> norm_shape(x.shape.begin() + axis, x.shape.end());
  for (const RtTensor* t : {scale, bias}) {
    if (!t) continue;
    DM_CHECK(ctx, broadcast_shape({t->shape, norm_shape}, ctx.node()) == norm_shape,
             "Scale/B " << shape_str(t->shape) << " does not broadcast to " << shape_str(norm_shape));
    DM_CHECK(ctx, t->dtype == scale->dtype, "Scale and B dtypes differ");
  }
  const bool dense = scale->numel() == D && (!bias || bias->numel() == D);
  BcastIndex<2> pix{};
  if (!dense)
    pix = make_index<2>(ctx, norm_shape,
                        {broadcast_strides(scale->shape, norm_shape), broadcast_strides(bias ? bias->shape : scale->shape, norm_shape)});
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  std::vector<int64_t> stat_shape = x.shape;
  for (int64_t i = axis; i < rank; ++i) stat_shape[i] = 1;
  // Statistics are float in the model; on a fp16/bf16 run float tensors are
  // stored in the compute dtype, which is x's.
  RtTensor* mean_out = wants_output(ctx, 1) ? ctx.output(1, x.dtype, stat_shape) : nullptr;
  RtTensor* inv_out = wants_output(ctx, 2) ? ctx.output(2, x.dtype, stat_shape) : nullptr;
  if (!rows) return;
  const int threads = D >= 4096 ? 512 : D >= 512 ? 256 : D >= 128 ? 128 : 32;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, scale->dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      auto launch = [&](auto dense_tag) {
        constexpr bool kDense = decltype(dense_tag)::value;
        layer_norm_kernel<T, P, kDense><<<static_cast<unsigned>(std::min<int64_t>(rows, 65535)), threads, 0,
                                          stream_of(ctx)>>>(
            x.ptr<T>(), scale->ptr<P>(), bias ? bias->ptr<P>() : nullptr, y->ptr<T>(),
            mean_out ? mean_out->ptr<T>() : nullptr, inv_out ? inv_out->ptr<T>() : nullptr, rows, D, eps, pix);
      };
      if (dense) launch(std::true_type{});
      else launch(std::false_type{});
    });
  });
  check_launch(ctx);
}

// ---- BatchNormalization (inference) ---------------------------------------------
template <class T, class P>
__global__ void batch_norm_kernel(const T* __restrict__ x, T* __restrict__ y, const P* __restrict__ scale,
                                  const P* __restrict__ b, const P* __restrict__ mean, const P* __restrict__ var,
                                  int64_t n, int64_t C, int64_t S, float eps) {
  CUDA_GRID_STRIDE(i, n) {
    const int64_t c = (i / S) % C;
    const float inv = float(load_c(scale[c])) / sqrtf(float(load_c(var[c])) + eps);
    const float shift = float(load_c(b[c])) - float(load_c(mean[c])) * inv;
    y[i] = store_c<T>(static_cast<compute_t<T>>(float(load_c(x[i])) * inv + shift));
  }
}

FUSEOPT_KERNEL(CudaBatchNormalization, "", "BatchNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* p[4] = {opt_input(ctx, 1), opt_input(ctx, 2), opt_input(ctx, 3), opt_input(ctx, 4)};
  DM_CHECK(ctx, p[0] && p[1] && p[2] && p[3], "needs X, scale, B, input_mean, input_var");
  DM_CHECK(ctx, ctx.node().attr_int("training_mode", 0) == 0, "training_mode=1 is not supported");
  DM_CHECK(ctx, x.rank() >= 2, "X must have rank >= 2, got " << shape_str(x.shape));
  const int64_t C = x.shape[1], S = dm::prod(x.shape, 2, x.rank());
  for (const RtTensor* t : p)
    DM_CHECK(ctx, t->numel() == C && t->dtype == p[0]->dtype,
             "per-channel inputs must share a dtype and have " << C << " elements, got " << shape_str(t->shape));
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t n = x.numel();
  if (!n) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, p[0]->dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      batch_norm_kernel<T, P><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(
          x.ptr<T>(), y->ptr<T>(), p[0]->ptr<P>(), p[1]->ptr<P>(), p[2]->ptr<P>(), p[3]->ptr<P>(), n, C, S, eps);
    });
  });
  check_launch(ctx);
}

// ---- geometry shared by Conv and pooling ------------------------------------------
using Axis = dm::ConvAxis;

// dm::spatial_geometry (shared with the CPU reference kernels), with 1-D
// run as 2-D.
std::vector<Axis> spatial_geometry(KernelContext& ctx, const std::vector<int64_t>& in_sp,
                                   const std::vector<int64_t>& kernel, bool pool) {
  std::vector<Axis> axes = dm::spatial_geometry(ctx, in_sp, kernel, pool);
  const size_t nd = in_sp.size();
  if (nd == 1) axes.insert(axes.begin(), Axis{});  // 1-D runs as 2-D with height 1
  return axes;
}

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
  const std::vector<Axis> axes = spatial_geometry(ctx, in_sp, k_sp, false);
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

// ---- MaxPool / AveragePool ---------------------------------------------------------
template <class T, bool MAX>
__global__ void pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, Axis ah, Axis aw, bool include_pad) {
  CUDA_GRID_STRIDE(i, total) {
    const int64_t ow = i % aw.out;
    const int64_t oh = (i / aw.out) % ah.out;
    const int64_t plane = i / (aw.out * ah.out);
    const T* xp = x + plane * ah.in * aw.in;
    float best = -INFINITY, sum = 0.f;
    int64_t count = 0, padded = 0;
    bool nan = false;
    for (int64_t kh = 0; kh < ah.k; ++kh) {
      const int64_t ih = oh * ah.stride - ah.pad_begin + kh * ah.dil;
      for (int64_t kw = 0; kw < aw.k; ++kw) {
        const int64_t iw = ow * aw.stride - aw.pad_begin + kw * aw.dil;
        if (ih >= -ah.pad_begin && ih < ah.in + ah.pad_end && iw >= -aw.pad_begin && iw < aw.in + aw.pad_end) ++padded;
        if (ih < 0 || ih >= ah.in || iw < 0 || iw >= aw.in) continue;
        const float v = float(load_c(xp[ih * aw.in + iw]));
        nan = nan || v != v;
        best = v > best ? v : best;
        sum += v;
        ++count;
      }
    }
    float r;
    if (MAX) r = nan ? NAN : best;
    else r = sum / float(include_pad ? padded : (count > 0 ? count : 1));
    y[i] = store_c<T>(static_cast<compute_t<T>>(r));
  }
}

template <bool MAX> void run_pool(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() == 3 || x.rank() == 4, "only 1-D and 2-D pooling is supported, got " << shape_str(x.shape));
  if (MAX) DM_CHECK(ctx, !wants_output(ctx, 1), "the Indices output of MaxPool is not supported");
  const std::vector<int64_t> ks = ctx.node().attr_ints("kernel_shape");
  const std::vector<int64_t> in_sp(x.shape.begin() + 2, x.shape.end());
  DM_CHECK(ctx, ks.size() == in_sp.size(), "kernel_shape " << shape_str(ks) << " does not match input " << shape_str(x.shape));
  const std::vector<Axis> axes = spatial_geometry(ctx, in_sp, ks, true);
  const bool include_pad = ctx.node().attr_int("count_include_pad", 0) != 0;
  std::vector<int64_t> out_shape{x.shape[0], x.shape[1]};
  for (size_t i = x.rank() == 3 ? 1 : 0; i < axes.size(); ++i) out_shape.push_back(axes[i].out);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    pool2d_kernel<T, MAX><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), total, axes[0],
                                                                           axes[1], include_pad);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaMaxPool, "", "MaxPool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_pool<true>(ctx);
}
FUSEOPT_KERNEL(CudaAveragePool, "", "AveragePool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_pool<false>(ctx);
}

// One warp per plane.
template <class T, bool MAX>
__global__ void global_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t S) {
  const int64_t warps_total = (int64_t)gridDim.x * (blockDim.x >> 5);
  const int lane = threadIdx.x & 31;
  for (int64_t p = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5); p < planes; p += warps_total) {
    const T* xp = x + p * S;
    float acc = MAX ? -INFINITY : 0.f;
    bool nan = false;
    for (int64_t i = lane; i < S; i += 32) {
      const float v = float(load_c(xp[i]));
      nan = nan || v != v;
      acc = MAX ? (v > acc ? v : acc) : acc + v;
    }
    acc = MAX ? warp_max(acc) : warp_sum(acc);
    nan = __any_sync(0xffffffffu, nan);
    if (lane == 0) {
      float r = MAX ? (nan ? NAN : acc) : (S ? acc / float(S) : NAN);
      y[p] = store_c<T>(static_cast<compute_t<T>>(r));
    }
  }
}

template <bool MAX> void run_global_pool(KernelContext& ctx) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 2, "expects an input [N, C, ...], got " << shape_str(x.shape));
  std::vector<int64_t> out_shape{x.shape[0], x.shape[1]};
  for (size_t i = 2; i < x.rank(); ++i) out_shape.push_back(1);
  RtTensor* y = ctx.output(0, x.dtype, out_shape);
  const int64_t planes = x.shape[0] * x.shape[1], S = dm::prod(x.shape, 2, x.rank());
  if (!planes) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    global_pool_kernel<T, MAX><<<static_cast<unsigned>(std::min<int64_t>((planes + 7) / 8, 65535)), 256, 0,
                                 stream_of(ctx)>>>(x.ptr<T>(), y->ptr<T>(), planes, S);
  });
  check_launch(ctx);
}

FUSEOPT_KERNEL(CudaGlobalAveragePool, "", "GlobalAveragePool", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  run_global_pool<false>(ctx);
}
FUSEOPT_KERNEL(CudaGlobalMaxPool, "", "GlobalMaxPool", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_global_pool<true>(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
