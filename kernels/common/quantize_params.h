// QuantizeLinear / DequantizeLinear (opset 10/13/19/21, per-tensor and
// per-axis; blocked quantization and 4-bit/float8 types are not supported)
// parameter resolution shared by the CPU reference (kernels/cpu/quantize.cc)
// and the CUDA kernels (kernels/cuda/quantize.cu).
//   DequantizeLinear: y = (x - zero_point) * scale, y has scale's dtype;
//   QuantizeLinear:   y = saturate(round_half_to_even(x / scale) + zero_point),
//                     y has zero_point's dtype (default uint8, or output_dtype).
// scale / zero_point are scalars (per tensor) or 1-D of x.shape[axis].
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct QuantParams {
  int64_t n = 0, channels = 1, inner = 1;  // x viewed as [outer, channels, inner]; channels = 1 per tensor
  DType qtype = DType::UInt8;              // the integer type
};

inline bool is_quant_int(DType t) {
  return t == DType::Int8 || t == DType::UInt8 || t == DType::Int16 || t == DType::UInt16 || t == DType::Int32;
}

inline QuantParams resolve_quant(KernelContext& ctx, const RtTensor& x, const RtTensor& scale, const RtTensor* zp,
                                 bool quantize) {
  QuantParams p;
  p.n = x.numel();
  DM_CHECK(ctx, ctx.node().attr_int("block_size", 0) == 0, "blocked quantization (block_size > 0) is not supported");
  DM_CHECK(ctx, scale.rank() <= 1, "scale must be a scalar or 1-D, got " << shape_str(scale.shape));
  if (zp) DM_CHECK(ctx, zp->shape == scale.shape || (zp->numel() == 1 && scale.numel() == 1),
                   "zero_point " << shape_str(zp->shape) << " and scale " << shape_str(scale.shape) << " differ in shape");
  if (scale.rank() == 1 && scale.numel() != 1) {
    const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 1), static_cast<int64_t>(x.rank()));
    DM_CHECK(ctx, scale.shape[0] == x.shape[axis],
             "per-axis scale " << shape_str(scale.shape) << " must have x.shape[" << axis << "] = " << x.shape[axis]
                               << " entries");
    p.channels = x.shape[axis];
    p.inner = prod(x.shape, static_cast<size_t>(axis) + 1, x.rank());
  }
  if (quantize) {
    p.qtype = zp ? zp->dtype
                 : static_cast<DType>(ctx.node().attr_int("output_dtype", static_cast<int64_t>(DType::UInt8)));
    if (p.qtype == DType::Undefined) p.qtype = DType::UInt8;
  } else {
    p.qtype = x.dtype;
    DM_CHECK(ctx, !zp || zp->dtype == x.dtype, "zero_point dtype " << dtype_name(zp->dtype) << " differs from x's "
                                                                   << dtype_name(x.dtype));
  }
  DM_CHECK(ctx, is_quant_int(p.qtype),
           "quantized type " << dtype_name(p.qtype) << " is not supported (int8, uint8, int16, uint16, int32)");
  return p;
}

// Saturation bounds of the quantized type.
inline void quant_range(DType t, double* lo, double* hi) {
  switch (t) {
    case DType::Int8: *lo = -128; *hi = 127; break;
    case DType::UInt8: *lo = 0; *hi = 255; break;
    case DType::Int16: *lo = -32768; *hi = 32767; break;
    case DType::UInt16: *lo = 0; *hi = 65535; break;
    default: *lo = -2147483648.0; *hi = 2147483647.0; break;
  }
}

}  // namespace fuseopt::dm
