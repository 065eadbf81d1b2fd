// ConvTranspose parameter resolution shared by the CPU reference
// (kernels/cpu/conv_transpose.cc) and the CUDA kernel
// (kernels/cuda/conv_transpose.cu): strides, dilations, pads, output_padding,
// output_shape and auto_pad -> per spatial axis sizes and the leading pad.
// Plain C++ (compiles under nvcc too).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/op_params.h"

namespace fuseopt::dm {

// X [N, C, spatial...], W [C, M / group, kernel...], B [M] -> Y [N, M, out...].
// Spatial axes are returned padded in front to exactly 3 (size-1 axes), so
// one kernel covers 1-D, 2-D and 3-D.
struct ConvTransposeParams {
  int64_t N = 0, C = 0, M = 0, group = 1;
  ConvAxis axes[3];
  std::vector<int64_t> out_shape;
};

inline ConvTransposeParams resolve_conv_transpose(KernelContext& ctx, const std::vector<int64_t>& x,
                                                  const std::vector<int64_t>& w, const std::vector<int64_t>* bias) {
  const Node& n = ctx.node();
  DM_CHECK(ctx, x.size() >= 3 && x.size() <= 5, "X must be [N, C, d1[, d2[, d3]]], got " << shape_str(x));
  DM_CHECK(ctx, w.size() == x.size(), "W " << shape_str(w) << " and X " << shape_str(x) << " differ in rank");
  const size_t nd = x.size() - 2;
  ConvTransposeParams p;
  p.N = x[0];
  p.C = x[1];
  p.group = n.attr_int("group", 1);
  DM_CHECK(ctx, p.group >= 1 && p.C % p.group == 0, "group " << p.group << " does not divide the channels " << p.C);
  DM_CHECK(ctx, w[0] == p.C, "W " << shape_str(w) << " must have " << p.C << " (input channels) as its first dim");
  p.M = w[1] * p.group;
  if (bias) DM_CHECK(ctx, bias->size() == 1 && (*bias)[0] == p.M, "B " << shape_str(*bias) << " must be [" << p.M << "]");
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  const std::vector<int64_t> ks = n.attr_ints("kernel_shape", kernel);
  DM_CHECK(ctx, ks == kernel, "kernel_shape " << shape_str(ks) << " differs from W's " << shape_str(kernel));
  const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> dil = n.attr_ints("dilations", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> out_pad = n.attr_ints("output_padding", std::vector<int64_t>(nd, 0));
  std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> out_shape = n.attr_ints("output_shape");
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  DM_CHECK(ctx, strides.size() == nd && dil.size() == nd && out_pad.size() == nd && pads.size() == 2 * nd,
           "strides/dilations/output_padding/pads do not match " << nd << " spatial dims");
  if (out_shape.size() == nd + 2) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);  // [N, M, spatial...]
  DM_CHECK(ctx, out_shape.empty() || out_shape.size() == nd, "output_shape must have " << nd << " entries");
  DM_CHECK(ctx, auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER",
           "unknown auto_pad '" << auto_pad << "'");
  p.out_shape = {p.N, p.M};
  for (size_t i = 0; i < nd; ++i) {
    ConvAxis& a = p.axes[3 - nd + i];
    a.in = x[i + 2];
    a.k = kernel[i];
    a.stride = strides[i];
    a.dil = dil[i];
    DM_CHECK(ctx, a.k >= 1 && a.stride >= 1 && a.dil >= 1, "kernel, strides and dilations must be >= 1");
    DM_CHECK(ctx, out_pad[i] >= 0 && out_pad[i] < std::max(a.stride, a.dil),
             "output_padding " << out_pad[i] << " must be smaller than the stride or the dilation");
    const int64_t full = a.stride * (a.in - 1) + out_pad[i] + (a.k - 1) * a.dil + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // ONNX: total_padding = full - output_shape, split evenly, the odd one
      // at the end for SAME_UPPER and at the start otherwise.
      const int64_t want = !out_shape.empty() ? out_shape[i] : a.in * a.stride;
      const int64_t total = full - want;
      DM_CHECK(ctx, total >= 0, "output_shape " << want << " is larger than the full output " << full);
      if (auto_pad == "SAME_UPPER") {
        a.pad_begin = total / 2;
        a.pad_end = total - total / 2;
      } else {
        a.pad_begin = total - total / 2;
        a.pad_end = total / 2;
      }
    } else if (auto_pad == "NOTSET") {
      a.pad_begin = pads[i];
      a.pad_end = pads[i + nd];
    }
    a.out = full - a.pad_begin - a.pad_end;
    DM_CHECK(ctx, a.out >= 0, "pads leave a negative output size on spatial axis " << i);
    p.out_shape.push_back(a.out);
  }
  return p;
}

}  // namespace fuseopt::dm
