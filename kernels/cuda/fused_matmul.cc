// CUDA host code of fuseopt.FusedMatMul: Y = act(alpha·A·op(B) + bias) (+ residual) as one
// cuBLASLt GEMM with its epilogue (gemm_host.h: the activations it lacks get
// one in-place pass; small M may take our own kernel). Attribute handling
// mirrors kernels/cpu/fused_matmul.cc.
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/gemm_host.h"

namespace fuseopt {

using cuda_gemm::opt_input;

FUSEOPT_KERNEL(CudaFusedMatMul, "fuseopt", "FusedMatMul", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  const RtTensor* residual = opt_input(ctx, 3);  // added after the activation (the residual stream)
  FUSE_CHECK(a && b, n.label() << ": FusedMatMul needs inputs A and B");
  FUSE_CHECK(b->rank() >= 2, n.label() << ": FusedMatMul needs B of rank >= 2, got " << shape_str(b->shape));
  cuda_gemm::run_matmul(ctx, a, b, n.attr_int("transB", 0) != 0, n.attr_float("alpha", 1.f), cuda_gemm::parse_act(n),
                        bias, residual);
}

}  // namespace fuseopt
