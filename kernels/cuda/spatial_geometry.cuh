// Conv and pooling geometry on CUDA (kernels/cuda/conv.cu, pool.cu): the
// CPU reference's dm::spatial_geometry (strides, dilations, pads, auto_pad,
// ceil_mode), with 1-D run as 2-D so that one kernel serves both.
#pragma once
#include <vector>

#include "kernels/common/op_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt::cuda {

using Axis = dm::ConvAxis;

// One Axis per spatial dim, two for a 1-D input (a height of 1 first).
inline std::vector<Axis> spatial_geometry_2d(KernelContext& ctx, const std::vector<int64_t>& in_sp,
                                             const std::vector<int64_t>& kernel, bool pool) {
  std::vector<Axis> axes = dm::spatial_geometry(ctx, in_sp, kernel, pool);
  if (in_sp.size() == 1) axes.insert(axes.begin(), Axis{});  // 1-D runs as 2-D with height 1
  return axes;
}

}  // namespace fuseopt::cuda
