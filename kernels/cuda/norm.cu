// ONNX LayerNormalization (statistics in fp32, two passes: mean, then
// centred variance, as the CPU reference) and BatchNormalization (inference)
// on CUDA.
#include <cmath>

#include "kernels/cuda/block_row_stats.cuh"
#include "kernels/cuda/cuda_common.cuh"

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

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
