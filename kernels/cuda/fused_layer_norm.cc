// CUDA host code of fuseopt.LayerNorm, RMSNorm and SkipLayerNorm (the kernel:
// launch_norm, kernels/cuda/fused_norm.cu). Attribute handling and defaults
// mirror kernels/cpu/fused_layer_norm.cc (LayerNorm eps 1e-5, RMSNorm eps 1e-6).
#include <algorithm>
#include <vector>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt {
namespace {

const RtTensor* opt_input(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

// Y's dtype: fp32 where Y is a float graph output of a 16-bit run that nothing else reads (the
// kernel writes it as delivered: no conversion after the run), else the input's.
DType y_dtype(KernelContext& ctx, DType dt) {
  return dt != DType::Float && ctx.output_delivered_dtype(0, dt) == DType::Float ? DType::Float : dt;
}

void run_norm(KernelContext& ctx, const RtTensor* x, const RtTensor* gamma, const RtTensor* beta, float eps,
              bool rms) {
  const Node& n = ctx.node();
  FUSE_CHECK(x && gamma, n.label() << ": " << n.op_type << " needs X and gamma");
  FUSE_CHECK(x->rank() >= 1, n.label() << ": " << n.op_type << " needs an input of rank >= 1");
  const DType dt = x->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA " << n.op_type << " supports float/float16/bfloat16");
  cuda_fused::check_same_dtype(ctx, gamma, dt, "gamma");
  cuda_fused::check_same_dtype(ctx, beta, dt, "beta");
  const int64_t d = x->shape.back();
  cuda_fused::check_vector(ctx, gamma, d, "gamma");
  cuda_fused::check_vector(ctx, beta, d, "beta");
  RtTensor* y = ctx.output(0, y_dtype(ctx, dt), x->shape);
  if (d == 0 || x->numel() == 0) return;
  cuda_fused::NormArgs a;
  a.dtype = dt;
  a.rows = x->numel() / d;
  a.D = d;
  a.x = x->data;
  a.gamma = gamma->data;
  a.beta = beta ? beta->data : nullptr;
  a.y = y->data;
  a.y_fp32 = y->dtype != dt;
  a.eps = eps;
  a.rms = rms;
  cuda_fused::launch_norm(a, cuda_fused::stream_of(ctx));
}

}  // namespace

FUSEOPT_KERNEL(CudaFusedLayerNorm, "fuseopt", "LayerNorm", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  run_norm(ctx, ctx.input(0), opt_input(ctx, 1), opt_input(ctx, 2), ctx.node().attr_float("epsilon", 1e-5f), false);
}

FUSEOPT_KERNEL(CudaFusedRMSNorm, "fuseopt", "RMSNorm", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  run_norm(ctx, ctx.input(0), opt_input(ctx, 1), nullptr, ctx.node().attr_float("epsilon", 1e-6f), true);
}

// Sum = (X + bias) + skip; Y = norm(Sum); Sum written when declared.
FUSEOPT_KERNEL(CudaFusedSkipLayerNorm, "fuseopt", "SkipLayerNorm", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* x = ctx.input(0);
  const RtTensor* skip = opt_input(ctx, 1);
  const RtTensor* gamma = opt_input(ctx, 2);
  const RtTensor* beta = opt_input(ctx, 3);
  const RtTensor* bias = opt_input(ctx, 4);
  FUSE_CHECK(x && skip && gamma, n.label() << ": SkipLayerNorm needs X, skip and gamma");
  const DType dt = x->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA SkipLayerNorm supports float/float16/bfloat16");
  for (const RtTensor* t : {skip, gamma, beta, bias}) cuda_fused::check_same_dtype(ctx, t, dt, "input");
  FUSE_CHECK(x->rank() >= 1 && skip->rank() >= 1, n.label() << ": SkipLayerNorm inputs need rank >= 1");
  const std::vector<int64_t> shape = dm::broadcast_shape({x->shape, skip->shape}, n);
  FUSE_CHECK(x->shape.back() == shape.back() && skip->shape.back() == shape.back(),
             n.label() << ": SkipLayerNorm X " << shape_str(x->shape) << " and skip " << shape_str(skip->shape)
                       << " must share the last dim");
  const int64_t d = shape.back();
  cuda_fused::check_vector(ctx, gamma, d, "gamma");
  cuda_fused::check_vector(ctx, beta, d, "beta");
  cuda_fused::check_vector(ctx, bias, d, "bias");
  // The kernel reads the full-shape operand row by row and the other one with
  // a row period; the sum is commutative, so either may be the full one.
  const RtTensor* full = x;
  const RtTensor* other = skip;
  if (x->shape != shape) std::swap(full, other);
  FUSE_CHECK(full->shape == shape && cuda_fused::is_suffix_of(other->shape, shape),
             n.label() << ": CUDA SkipLayerNorm cannot broadcast X " << shape_str(x->shape) << " with skip "
                       << shape_str(skip->shape));
  RtTensor* y = ctx.output(0, y_dtype(ctx, dt), shape);
  RtTensor* sum = ctx.num_outputs() > 1 && n.output(1) ? ctx.output(1, dt, shape) : nullptr;
  if (d == 0 || y->numel() == 0) return;
  cuda_fused::NormArgs a;
  a.dtype = dt;
  a.rows = y->numel() / d;
  a.D = d;
  a.x = full->data;
  a.skip = other->data;
  a.skip_rows = other->numel() / d;
  a.bias = bias ? bias->data : nullptr;
  a.gamma = gamma->data;
  a.beta = beta ? beta->data : nullptr;
  a.y = y->data;
  a.y_fp32 = y->dtype != dt;
  a.sum = sum ? sum->data : nullptr;
  a.eps = n.attr_float("epsilon", 1e-5f);
  a.rms = n.attr_int("rms", 0) != 0;
  cuda_fused::launch_norm(a, cuda_fused::stream_of(ctx));
}

}  // namespace fuseopt
