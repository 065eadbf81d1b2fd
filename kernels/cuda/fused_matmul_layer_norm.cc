// fuseopt.FusedMatMulLayerNorm on CUDA. Without skip: one cuBLASLt GEMM h = alpha · A·op(W)
// (+ bias, in its epilogue) into scratch [rows, N] in the compute dtype, then one row kernel
// Y = LayerNorm(gelu(h)) · gamma (+ beta) that reads h once, GELU and statistics in fp32
// (fused_matmul_layer_norm.cu). Two launches where the unfused FusedMatMul + LayerNorm take
// three for the erf GELU (the GEMM's bias epilogue, the erf-GELU pass, the norm: cuBLASLt has
// only the tanh GELU epilogue) and two for the tanh GELU; either way h crosses memory once.
// fp16/bf16: h is rounded to the storage type once, after the GEMM (the unfused graph rounds it
// again after the GELU).
// With skip (activation none: a post-norm transformer's out-projection or FFN2 and its residual
// LayerNorm): the GEMM into scratch and the SkipLayerNorm kernel (launch_norm), the kernels the
// unfused graph runs; with FUSEOPT_GEMM_LN_HOPPER=1 on Hopper one kernel instead, the GEMM's row
// of tiles split over a cluster that exchanges row statistics (fused_matmul_layer_norm_hopper.cu:
// h never reaches memory, but it measured slower, NOTES-perf.md v39).
// Attribute and shape handling mirror kernels/cpu/fused_matmul_layer_norm.cc.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/fused_matmul_layer_norm.h"
#include "kernels/cuda/gemm_cublaslt.h"

namespace fuseopt {
namespace {

const RtTensor* opt_input(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

cuda_fused::LnGelu parse_gelu(const Node& n) {
  const std::string a = n.attr_string("activation", "none");
  if (a == "gelu") return cuda_fused::LnGelu::Erf;
  if (a == "gelu_tanh") return cuda_fused::LnGelu::Tanh;
  throw Error(n.label() + ": FusedMatMulLayerNorm activation must be gelu or gelu_tanh, got '" + a + "'");
}

// Y's dtype: fp32 where Y is a float graph output of a 16-bit run that nothing else reads (the
// norm kernel writes it as delivered, as SkipLayerNorm does), else A's.
DType y_dtype(KernelContext& ctx, DType dt) {
  return dt != DType::Float && ctx.output_delivered_dtype(0, dt) == DType::Float ? DType::Float : dt;
}

}  // namespace

FUSEOPT_KERNEL(CudaFusedMatMulLayerNorm, "fuseopt", "FusedMatMulLayerNorm", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* w = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  const RtTensor* gamma = opt_input(ctx, 3);
  const RtTensor* beta = opt_input(ctx, 4);
  FUSE_CHECK(a && w && gamma, n.label() << ": FusedMatMulLayerNorm needs A, W and gamma");
  const DType dt = a->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt),
             n.label() << ": CUDA FusedMatMulLayerNorm supports float/float16/bfloat16, got " << dtype_name(dt));
  cuda_fused::check_same_dtype(ctx, w, dt, "W");
  cuda_fused::check_same_dtype(ctx, bias, dt, "bias");
  cuda_fused::check_same_dtype(ctx, gamma, dt, "gamma");
  cuda_fused::check_same_dtype(ctx, beta, dt, "beta");
  FUSE_CHECK(a->rank() >= 1 && w->rank() == 2, n.label() << ": FusedMatMulLayerNorm needs A [..., K] and a 2-D W, got "
                                                          << shape_str(a->shape) << " and " << shape_str(w->shape));
  const bool trans_b = n.attr_int("transB", 0) != 0;
  const int64_t K = a->shape.back();
  const int64_t N = trans_b ? w->shape[0] : w->shape[1];
  FUSE_CHECK((trans_b ? w->shape[1] : w->shape[0]) == K,
             n.label() << ": FusedMatMulLayerNorm inner dims differ: A " << shape_str(a->shape) << ", W "
                       << shape_str(w->shape) << (trans_b ? " (transB)" : ""));
  cuda_fused::check_vector(ctx, bias, N, "bias");
  cuda_fused::check_vector(ctx, gamma, N, "gamma");
  cuda_fused::check_vector(ctx, beta, N, "beta");
  const RtTensor* skip = opt_input(ctx, 5);
  const std::string act = n.attr_string("activation", "none");
  if (skip) {
    FUSE_CHECK(act == "none" || act.empty(),
               n.label() << ": FusedMatMulLayerNorm with skip takes activation none, got '" << act << "'");
    cuda_fused::check_same_dtype(ctx, skip, dt, "skip");
  }
  const cuda_fused::LnGelu gelu = skip ? cuda_fused::LnGelu::Erf : parse_gelu(n);

  std::vector<int64_t> yshape = a->shape;
  yshape.back() = N;
  if (skip)
    FUSE_CHECK(skip->shape == yshape, n.label() << ": FusedMatMulLayerNorm skip " << shape_str(skip->shape)
                                                << " must have Y's shape " << shape_str(yshape));
  RtTensor* y = ctx.output(0, skip ? y_dtype(ctx, dt) : dt, yshape);
  int64_t rows = 1;  // A's leading dims, folded into the GEMM's rows (W is 2-D)
  for (size_t i = 0; i + 1 < a->shape.size(); ++i) rows *= a->shape[i];
  if (rows == 0 || N == 0) return;
  cudaStream_t stream = cuda_fused::stream_of(ctx);
  const float eps = n.attr_float("epsilon", 1e-5f);

  if (skip && y->dtype == dt && K > 0) {
    cuda_fused::HopperGemmLayerNorm hg;
    hg.dt = dt;
    hg.a = a->data;
    hg.b = w->data;
    hg.b_nk = trans_b;
    hg.bias = bias ? bias->data : nullptr;
    hg.skip = skip->data;
    hg.gamma = gamma->data;
    hg.beta = beta ? beta->data : nullptr;
    hg.y = y->data;
    hg.M = rows;
    hg.N = N;
    hg.K = K;
    hg.alpha = n.attr_float("alpha", 1.0f);
    hg.eps = eps;
    if (cuda_fused::gemm_layer_norm_hopper_wanted(hg) && cuda_fused::launch_gemm_layer_norm_hopper(hg, stream)) return;
  }

  const size_t h_bytes = static_cast<size_t>(rows * N) * dtype_size(dt);
  void* h = ctx.scratch(h_bytes);
  if (K == 0) {
    // No product: h = bias (or 0) on every row.
    if (bias)
      cuda_fused::launch_broadcast_2d(dt, bias->data, 1, N, h, rows, N, stream);
    else
      FUSED_CUDA_CHECK(cudaMemsetAsync(h, 0, h_bytes, stream), n.label());
  } else {
    cuda_fused::GemmDesc g;
    g.dtype = dt;
    g.tf32 = ctx.precision() == Precision::TF32;
    g.M = rows;
    g.N = N;
    g.K = K;
    g.trans_b = trans_b;
    g.alpha = n.attr_float("alpha", 1.0f);
    g.epilogue = bias ? cuda_fused::GemmEpilogue::Bias : cuda_fused::GemmEpilogue::None;
    g.bias = bias ? bias->data : nullptr;
    cuda_fused::gemm(g, a->data, w->data, h, stream, [&ctx](size_t bytes) { return ctx.scratch(bytes); });
  }
  if (skip) {
    // The SkipLayerNorm kernel on h and the residual: Sum = h + skip, Y = LayerNorm(Sum).
    cuda_fused::NormArgs na;
    na.dtype = dt;
    na.rows = rows;
    na.D = N;
    na.x = h;
    na.skip = skip->data;
    na.skip_rows = rows;
    na.gamma = gamma->data;
    na.beta = beta ? beta->data : nullptr;
    na.y = y->data;
    na.y_fp32 = y->dtype != dt;
    na.eps = eps;
    na.rms = false;
    cuda_fused::launch_norm(na, stream);
    return;
  }
  cuda_fused::GeluLayerNormArgs la;
  la.dtype = dt;
  la.rows = rows;
  la.D = N;
  la.h = h;
  la.gamma = gamma->data;
  la.beta = beta ? beta->data : nullptr;
  la.y = y->data;
  la.eps = eps;
  la.gelu = gelu;
  cuda_fused::launch_gelu_layer_norm(la, stream);
}

}  // namespace fuseopt
