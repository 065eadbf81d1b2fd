// fuseopt.GatedMatMul on CUDA: on Hopper from 128 rows (hopper_gemm_wanted, gemm_hopper.h), one
// GEMM with the gate in its epilogue (and, where the session handed this step the RMSNorm before
// it, kPreRmsNormAttr, with gamma folded into W, the norm's row scale in that GEMM too; elsewhere
// the norm kernel, without gamma, runs first into scratch); otherwise one GEMM P = A·W (+ bias, in its epilogue;
// cuBLASLt, or gemm_small_m.h's kernel for rows <= 8) into scratch [rows, 2N]
// in the compute dtype, then one elementwise kernel Y = act(P[:, :N]) *
// P[:, N:] with fp32 math. For rows <= 8, launch_gated_small_m does both in
// one kernel first. Attribute and shape
// handling mirror kernels/cpu/fused_gated_matmul.cc.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "kernels/cpu/dm_util.h"  // dm::prod
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"
#include "kernels/cuda/gated_matmul.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/gemm_hopper.h"
#include "kernels/cuda/gemm_small_m.h"
#include "kernels/cuda/gemv_nk_fused.h"

namespace fuseopt {
namespace {

using cuda_fused::GateActivation;

GateActivation parse_gate_act(const Node& n) {
  const std::string a = n.attr_string("activation", "silu");
  if (a == "silu") return GateActivation::Silu;
  if (a == "gelu") return GateActivation::Gelu;
  if (a == "gelu_tanh") return GateActivation::GeluTanh;
  if (a == "relu") return GateActivation::Relu;
  throw Error(n.label() + ": unknown GatedMatMul activation '" + a + "' (silu, gelu, gelu_tanh, relu)");
}

// The gated Hopper GEMM's arguments (W [2N, K] where nk, else [K, 2N]).
cuda_fused::HopperGemm hopper_gated(DType dt, GateActivation act, const void* a, const void* w, bool nk,
                                    const RtTensor* bias, void* y, int64_t rows, int64_t N, int64_t K) {
  cuda_fused::HopperGemm g;
  g.dt = dt;
  g.a = a;
  g.b = w;
  g.b_nk = nk;
  g.gated = true;
  g.bias = bias ? bias->data : nullptr;
  g.y = y;
  g.M = rows;
  g.N = N;
  g.K = K;
  g.act = act == GateActivation::Silu       ? cuda_fused::HopperGemmAct::Silu
          : act == GateActivation::Gelu     ? cuda_fused::HopperGemmAct::GeluErfExact
          : act == GateActivation::GeluTanh ? cuda_fused::HopperGemmAct::GeluTanh
                                            : cuda_fused::HopperGemmAct::Relu;
  return g;
}

}  // namespace

FUSEOPT_KERNEL(CudaGatedMatMul, "fuseopt", "GatedMatMul", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* w = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  const RtTensor* bias = ctx.num_inputs() > 2 ? ctx.input(2) : nullptr;
  // The RMSNorm the session folded into this step: A is the norm's input, W holds its gamma.
  const bool pre_norm = n.attr(kPreRmsNormAttr) != nullptr;
  FUSE_CHECK(a && w, n.label() << ": GatedMatMul needs inputs A and W");
  const DType dt = a->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA GatedMatMul supports float/float16/bfloat16");
  cuda_fused::check_same_dtype(ctx, w, dt, "W");
  cuda_fused::check_same_dtype(ctx, bias, dt, "bias");
  FUSE_CHECK(a->rank() >= 1 && w->rank() == 2, n.label() << ": GatedMatMul needs A [..., K] and W [K, 2N], got "
                                                          << shape_str(a->shape) << " and " << shape_str(w->shape));
  // W stored [2N, K] where the Session transposed the constant weight (kWeightNkAttr).
  const bool nk = n.attr_int(kWeightNkAttr, 0) != 0;
  const int64_t K = a->shape.back(), two_n = nk ? w->shape[0] : w->shape[1];
  FUSE_CHECK((nk ? w->shape[1] : w->shape[0]) == K && two_n % 2 == 0,
             n.label() << ": GatedMatMul W " << shape_str(w->shape) << " is not " << (nk ? "[2N, " : "[")
                       << K << (nk ? "]" : ", 2N]") << " for A " << shape_str(a->shape));
  cuda_fused::check_vector(ctx, bias, two_n, "bias");
  const float norm_eps = pre_norm ? n.attr_float(kPreRmsNormAttr, 1e-6f) : 0.f;
  const GateActivation act = parse_gate_act(n);
  const int64_t N = two_n / 2;
  std::vector<int64_t> yshape = a->shape;
  yshape.back() = N;
  RtTensor* y = ctx.output(0, dt, yshape);
  const int64_t rows = dm::prod(a->shape, 0, a->rank() - 1);
  if (rows == 0 || N == 0) return;
  const void* a_data = a->data;  // the norm's output where the norm runs as its own kernel
  cudaStream_t stream = cuda_fused::stream_of(ctx);
  const bool w_const = ctx.input_is_constant(1);  // the GEMV may request it early

  // Hopper with the norm inside (from 128 rows): one launch for RMSNorm, GEMM and gate.
  if (pre_norm && K > 0 && nk) {
    cuda_fused::HopperGemm g = hopper_gated(dt, act, a->data, w->data, nk, bias, y->data, rows, N, K);
    g.rms_norm = true;
    g.norm_eps = norm_eps;
    if (cuda_fused::hopper_gemm_wanted(g) && cuda_fused::launch_gemm_hopper(g, stream)) return;
  }
  // Elsewhere the norm runs first, as its own step did (fused_norm.cu) but without gamma (W holds
  // it), and A is its output.
  if (pre_norm) {
    cuda_fused::NormArgs na;
    na.dtype = dt;
    na.rows = rows;
    na.D = K;
    na.x = a->data;
    na.eps = norm_eps;
    na.rms = true;
    na.y = ctx.scratch(static_cast<size_t>(rows * K) * dtype_size(dt));
    cuda_fused::launch_norm(na, stream);
    a_data = na.y;
  }

  // rows <= 8 (a decode step): one kernel for the product and the gate, P never stored
  // (W [2N, K]: gemv_nk_fused.cu, on by default at the decode rows; W [K, 2N]: only where asked for).
  if (K > 0 && nk &&
      cuda_fused::launch_gated_gemv_nk(dt, act, a_data, w->data, bias ? bias->data : nullptr, y->data, rows, N, K,
                                       stream, w_const))
    return;
  if (K > 0 && !nk &&
      cuda_fused::launch_gated_small_m(dt, act, a_data, w->data, bias ? bias->data : nullptr, y->data, rows, N, K,
                                       stream, w_const))
    return;
  // Hopper from 128 rows (or as FUSEOPT_HOPPER_GEMM says): one GEMM whose tiles hold matching gate
  // and up columns and whose epilogue applies the gate, so the [rows, 2N] product is never written.
  if (K > 0) {
    cuda_fused::HopperGemm g = hopper_gated(dt, act, a_data, w->data, nk, bias, y->data, rows, N, K);
    if (cuda_fused::hopper_gemm_wanted(g) && cuda_fused::launch_gemm_hopper(g, stream)) return;
  }
  void* p = ctx.scratch(static_cast<size_t>(rows * two_n) * dtype_size(dt));
  if (K == 0) {
    // No product: P = bias (or 0) on every row.
    if (bias)
      cuda_fused::launch_broadcast_2d(dt, bias->data, 1, two_n, p, rows, two_n, stream);
    else
      FUSED_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(rows * two_n) * dtype_size(dt), stream), n.label());
  } else if (!cuda_fused::launch_gemm_small_m(dt, cuda_fused::GemvAct::None, a_data, w->data,
                                              bias ? bias->data : nullptr, p, rows, two_n, K, nk, stream, 1.f,
                                              w_const)) {
    // cuBLASLt where the weight-streaming kernel (rows <= 8, a decode step) does not apply.
    cuda_fused::GemmDesc g;
    g.dtype = dt;
    g.tf32 = ctx.precision() == Precision::TF32;
    g.M = rows;
    g.N = two_n;
    g.K = K;
    g.trans_b = nk;
    g.epilogue = bias ? cuda_fused::GemmEpilogue::Bias : cuda_fused::GemmEpilogue::None;
    g.bias = bias ? bias->data : nullptr;
    cuda_fused::gemm(g, a_data, w->data, p, stream, [&ctx](size_t bytes) { return ctx.scratch(bytes); });
  }
  cuda_fused::launch_gated_activation(dt, act, p, y->data, rows, N, stream);
}

}  // namespace fuseopt
