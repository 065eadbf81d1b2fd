// ONNX LayerNormalization and BatchNormalization (inference) on CUDA.
// LayerNormalization runs on the one CUDA LayerNorm, the fused ops' launch_norm
// (kernels/cuda/fused_norm.cu); this file adds what ONNX allows beyond it: any
// axis (X as [rows, prod(dims from axis)]), Scale/B that broadcast to the
// normalised shape or have another float dtype (made dense first), and the
// Mean/InvStdDev outputs in X's dtype.
#include <utility>

#include "kernels/common/norm_rows.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/float_convert.h"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// ---- LayerNormalization ----------------------------------------------------------
// dst[i] = src[i] read through broadcast strides over the normalised shape, in T.
template <class T, class P>
__global__ void dense_param_kernel(const P* __restrict__ src, BcastIndex<1> ix, T* __restrict__ dst, int64_t D) {
  CUDA_GRID_STRIDE(i, D) {
    int64_t off[1];
    ix.offsets(i, off);
    dst[i] = store_c<T>(static_cast<compute_t<T>>(float(load_c(src[off[0]]))));
  }
}

// Scale or B as a dense [D] vector in dtype `dt`: the tensor itself when it is
// one already (the usual case), else a copy in scratch (as the CPU reference).
const void* dense_param(KernelContext& ctx, const RtTensor* t, DType dt, const std::vector<int64_t>& norm_shape,
                        int64_t D) {
  if (!t) return nullptr;
  if (t->numel() == D && t->dtype == dt) return t->data;
  void* dense = ctx.scratch(static_cast<size_t>(D) * dtype_size(dt));
  const BcastIndex<1> ix = make_index<1>(ctx, norm_shape, {broadcast_strides(t->shape, norm_shape)});
  dispatch_float(ctx, dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, t->dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      dense_param_kernel<T, P><<<grid_for(D), kThreads, 0, stream_of(ctx)>>>(t->ptr<P>(), ix, static_cast<T*>(dense), D);
    });
  });
  check_launch(ctx);
  return dense;
}

// X viewed as [rows, D] (D = prod(dims from axis)); statistics in fp32, two
// passes (the mean, then the centred variance) as the CPU reference.
FUSEOPT_KERNEL(CudaLayerNormalization, "", "LayerNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, scale, "needs X and Scale");
  const dm::NormRows nr = dm::resolve_norm_rows(ctx, x);  // shared with RMSNormalization
  const int64_t rank = static_cast<int64_t>(x.rank()), axis = nr.axis, rows = nr.rows, D = nr.D;
  const std::vector<int64_t>& norm_shape = nr.norm_shape;
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  for (const RtTensor* t : {scale, bias}) {
    if (!t) continue;
    dm::check_broadcasts_to_norm(ctx, *t, norm_shape, "Scale/B");
    DM_CHECK(ctx, t->dtype == scale->dtype, "Scale and B dtypes differ");
  }
  // Y as delivered when it is a float graph output of a 16-bit run nothing else reads.
  const bool y_fp32 = x.dtype != DType::Float && ctx.output_delivered_dtype(0, x.dtype) == DType::Float;
  RtTensor* y = ctx.output(0, y_fp32 ? DType::Float : x.dtype, x.shape);
  std::vector<int64_t> stat_shape = x.shape;
  for (int64_t i = axis; i < rank; ++i) stat_shape[i] = 1;
  // Statistics are float in the model; on a fp16/bf16 run float tensors are
  // stored in the compute dtype, which is x's.
  RtTensor* mean_out = wants_output(ctx, 1) ? ctx.output(1, x.dtype, stat_shape) : nullptr;
  RtTensor* inv_out = wants_output(ctx, 2) ? ctx.output(2, x.dtype, stat_shape) : nullptr;
  if (!rows) return;
  cudaStream_t stream = stream_of(ctx);
  if (D == 0) {  // nothing to normalise: the statistics are 0/0, NaN
    for (RtTensor* t : {mean_out, inv_out})
      if (t) check_cuda(ctx, cudaMemsetAsync(t->data, 0xff, t->nbytes(), stream), "LayerNormalization statistics");
    return;
  }
  cuda_fused::NormArgs a;
  a.dtype = x.dtype;
  a.rows = rows;
  a.D = D;
  a.x = x.data;
  a.gamma = dense_param(ctx, scale, x.dtype, norm_shape, D);
  a.beta = dense_param(ctx, bias, x.dtype, norm_shape, D);
  a.y = y->data;
  a.y_fp32 = y_fp32;
  a.eps = eps;
  // launch_norm writes fp32 statistics: straight into float outputs, else
  // into scratch and then converted to x's dtype.
  const bool f32 = x.dtype == DType::Float;
  auto stat = [&](RtTensor* t) -> float* {
    if (!t) return nullptr;
    return f32 ? t->ptr<float>() : static_cast<float*>(ctx.scratch(static_cast<size_t>(rows) * sizeof(float)));
  };
  a.mean = stat(mean_out);
  a.inv_std = stat(inv_out);
  cuda_fused::launch_norm(a, stream);
  if (!f32) {
    const std::pair<RtTensor*, const float*> stats[2] = {{mean_out, a.mean}, {inv_out, a.inv_std}};
    for (const auto& [t, f] : stats)
      if (t)
        DM_CHECK(ctx, launch_float_convert(t->data, x.dtype, f, DType::Float, rows, stream),
                 "cannot store the statistics as " << dtype_name(x.dtype));
    check_launch(ctx);
  }
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
