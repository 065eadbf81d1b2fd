// BitCast (opset 26): the input's bytes reinterpreted as the element type `to`, same shape.
// Shared by the CPU (kernels/cpu/bitcast.cc) and CUDA (kernels/cuda/bitcast.cu) kernels.
// The widths must match. A session that stores float values in another type than the model
// declares (a float16 model on the CPU backend computes in float; --precision fp16 stores float
// as float16) would reinterpret other bits than the model means: the width check refuses those
// runs by name rather than returning other numbers.
#pragma once
#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

inline DType resolve_bitcast(KernelContext& ctx, const RtTensor& x) {
  DM_CHECK(ctx, ctx.node().has_attr("to"), "needs the 'to' attribute");
  const DType to = static_cast<DType>(ctx.node().attr_int("to", 0));
  const size_t out_bytes = to == DType::String || to == DType::Undefined ? 0 : dtype_size(to);
  DM_CHECK(ctx, out_bytes > 0, "'to' = " << static_cast<int>(to) << " is not an element type fuseopt stores");
  DM_CHECK(ctx, x.dtype != DType::String, "a string tensor has no bits to reinterpret");
  DM_CHECK(ctx, dtype_size(x.dtype) == out_bytes,
           "reinterprets " << dtype_name(x.dtype) << " (" << 8 * dtype_size(x.dtype) << " bits here) as " << dtype_name(to)
                           << " (" << 8 * out_bytes
                           << " bits): the widths differ (a model whose float type this session stores in another "
                              "width: run it at the model's own precision)");
  return to;
}

}  // namespace fuseopt::dm
