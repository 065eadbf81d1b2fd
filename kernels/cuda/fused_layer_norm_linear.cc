// CUDA host code of fuseopt.LayerNormLinear: the norm kernel (launch_norm,
// fused_norm.cu) writes the normalised rows to scratch (and Sum when
// declared), then one cuBLASLt GEMM with the epilogue (gemm_host.h); at a
// decode step's rows with W stored [N, K], one GEMV that normalises itself. Attribute
// handling mirrors kernels/cpu/fused_layer_norm_linear.cc.
#include <utility>
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gemm_host.h"
#include "kernels/cuda/gemv_nk_fused.h"

namespace fuseopt {

using cuda_gemm::Act;
using cuda_gemm::apply_pass_activation;
using cuda_gemm::opt_input;
using cuda_gemm::parse_act;
using cuda_gemm::scratch_of;
using cuda_gemm::try_small_gemm;

FUSEOPT_KERNEL(CudaLayerNormLinear, "fuseopt", "LayerNormLinear", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* x = ctx.input(0);
  const RtTensor* gamma = opt_input(ctx, 1);
  const RtTensor* beta = opt_input(ctx, 2);
  const RtTensor* w = opt_input(ctx, 3);
  const RtTensor* bias = opt_input(ctx, 4);
  const RtTensor* skip = opt_input(ctx, 5);
  FUSE_CHECK(x && gamma && w, n.label() << ": X, gamma and W are required");
  FUSE_CHECK(x->rank() >= 1, n.label() << ": X must have rank >= 1");
  const DType dt = x->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA LayerNormLinear supports float/float16/bfloat16");
  for (const RtTensor* t : {gamma, beta, w, bias, skip}) cuda_fused::check_same_dtype(ctx, t, dt, "input");
  const int64_t K = x->shape.back();
  const bool trans_b = n.attr_int("transB", 0) != 0;
  const Act act = parse_act(n);
  FUSE_CHECK(w->rank() == 2, n.label() << ": W must be 2-D, got rank " << w->rank());
  const int64_t N = trans_b ? w->shape[0] : w->shape[1];
  FUSE_CHECK((trans_b ? w->shape[1] : w->shape[0]) == K,
             n.label() << ": W " << shape_str(w->shape) << " does not match K=" << K);
  cuda_fused::check_vector(ctx, gamma, K, "gamma");
  cuda_fused::check_vector(ctx, beta, K, "beta");
  cuda_fused::check_vector(ctx, bias, N, "bias");
  // Z = X + skip broadcasts like numpy (a [1, S, K] position table, a [S, K]
  // skip); the sum is commutative, so the full-shape operand is read row by
  // row and the other with a row period.
  std::vector<int64_t> zshape = x->shape;
  const RtTensor* full = x;
  const RtTensor* other = skip;
  if (skip) {
    zshape = dm::broadcast_shape({x->shape, skip->shape}, n);
    FUSE_CHECK(zshape.back() == K && skip->shape.back() == K, n.label() << ": skip must have the last dim K=" << K);
    if (x->shape != zshape) std::swap(full, other);
    FUSE_CHECK(full->shape == zshape && cuda_fused::is_suffix_of(other->shape, zshape),
               n.label() << ": CUDA LayerNormLinear cannot broadcast X " << shape_str(x->shape) << " with skip "
                         << shape_str(skip->shape));
  }
  const int64_t rows = K == 0 ? 0 : shape_numel(zshape) / K;
  std::vector<int64_t> yshape = zshape;
  yshape.back() = N;
  RtTensor* y = ctx.output(0, dt, yshape);
  RtTensor* sum = ctx.num_outputs() > 1 && n.output(1) ? ctx.output(1, dt, zshape) : nullptr;
  if (rows == 0 || N == 0) return;
  FUSE_CHECK(K > 0, n.label() << ": empty normalisation axis");
  cudaStream_t stream = cuda_fused::stream_of(ctx);

  cuda_fused::NormArgs na;
  na.dtype = dt;
  na.rows = rows;
  na.D = K;
  na.x = full->data;
  na.skip = other ? other->data : nullptr;
  na.skip_rows = other ? other->numel() / K : 0;
  na.gamma = gamma->data;
  na.beta = beta ? beta->data : nullptr;
  na.sum = sum ? sum->data : nullptr;
  na.eps = n.attr_float("epsilon", 1e-5f);
  na.rms = n.attr_int("rms", 0) != 0;

  // Decode rows with W stored [N, K] (the runtime's weight layout): one launch, the same norm
  // computed by the GEMV's blocks (gemv_nk_fused.h); Z never stored.
  const bool w_const = ctx.input_is_constant(3);
  if (trans_b && !cuda_gemm::pass_only(act) && cuda_fused::launch_norm_gemv_nk({na, w->data, bias ? bias->data : nullptr, y->data, N,
                                                  cuda_gemm::gemv_act(act), w_const},
                                                 stream))
    return;

  na.y = ctx.scratch(static_cast<size_t>(rows * K) * dtype_size(dt));
  void* z = na.y;
  cuda_fused::launch_norm(na, stream);

  if (cuda_gemm::try_gemv(dt, act, z, w->data, bias ? bias->data : nullptr, y->data, rows, N, K, trans_b, 1.f, stream,
                          w_const))
    return;  // M <= 8 (decode): the weight-streaming kernel
  if (!trans_b && try_small_gemm(ctx, dt, act, z, w->data, bias ? bias->data : nullptr, y->data, rows, N, K, stream))
    return;  // the small-M kernel of ours (for erf-GELU one launch fewer)
  if (cuda_gemm::try_hopper_gemm(dt, act, z, w->data, trans_b, bias ? bias->data : nullptr, y->data, rows, N, K, stream))
    return;  // Hopper, large M, erf-GELU / relu2, where switched on: the activation in the epilogue
  const cuda_fused::GemmDesc g = cuda_gemm::gemm_desc(ctx, dt, rows, N, K, trans_b, act, bias ? bias->data : nullptr);
  cuda_fused::gemm(g, z, w->data, y->data, stream, scratch_of(ctx));
  apply_pass_activation(act, dt, y->data, rows, N, stream);
}

}  // namespace fuseopt
