// SwiGLU (opset 28) inputs and attribute, shared by the CPU reference (kernels/cpu/swiglu.cc)
// and the CUDA kernel (kernels/cuda/swiglu.cu): gate A and value B of the same shape and dtype
// (no broadcasting), alpha the Swish coefficient (default 1).
#pragma once
#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct SwiGluParams {
  const RtTensor* a = nullptr;
  const RtTensor* b = nullptr;
  float alpha = 1.f;
};

inline SwiGluParams resolve_swiglu(KernelContext& ctx) {
  SwiGluParams p;
  p.a = &req_input(ctx, 0);
  p.b = &req_input(ctx, 1);
  DM_CHECK(ctx, p.a->shape == p.b->shape,
           "A " << shape_str(p.a->shape) << " and B " << shape_str(p.b->shape) << " must have one shape (no broadcasting)");
  DM_CHECK(ctx, p.a->dtype == p.b->dtype, "A and B must share a dtype");
  p.alpha = ctx.node().attr_float("alpha", 1.0f);
  return p;
}

}  // namespace fuseopt::dm
