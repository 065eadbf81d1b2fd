// CUDA host code of fuseopt.AddRelu (the kernels: launch_add_relu,
// kernels/cuda/fused_elementwise.cu): Y = max(A + B, 0) with numpy
// broadcasting, as kernels/cpu/fused_add_relu.cc.
#include <vector>

#include "kernels/common/broadcast.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt {

FUSEOPT_KERNEL(CudaFusedAddRelu, "fuseopt", "AddRelu", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.num_inputs() > 1 ? ctx.input(1) : nullptr;
  FUSE_CHECK(a && b, n.label() << ": AddRelu needs inputs A and B");
  const DType dt = a->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA AddRelu supports float/float16/bfloat16");
  cuda_fused::check_same_dtype(ctx, b, dt, "B");
  const std::vector<int64_t> shape = dm::broadcast_shape({a->shape, b->shape}, n);
  RtTensor* y = ctx.output(0, dt, shape);
  const int64_t total = y->numel();
  if (total == 0) return;
  cudaStream_t stream = cuda_fused::stream_of(ctx);
  if (a->shape == shape && b->shape == shape) {
    cuda_fused::launch_add_relu(dt, a->data, b->data, y->data, total, nullptr, stream);
    return;
  }
  FUSE_CHECK(shape.size() <= static_cast<size_t>(cuda_fused::kMaxBroadcastRank),
             n.label() << ": CUDA AddRelu supports rank <= " << cuda_fused::kMaxBroadcastRank);
  cuda_fused::BroadcastShape bs;
  bs.rank = static_cast<int>(shape.size());
  const std::vector<int64_t> sa = dm::broadcast_strides(a->shape, shape), sb = dm::broadcast_strides(b->shape, shape);
  for (int k = 0; k < bs.rank; ++k) {
    bs.out_dims[k] = shape[k];
    bs.a_strides[k] = sa[k];
    bs.b_strides[k] = sb[k];
  }
  cuda_fused::launch_add_relu(dt, a->data, b->data, y->data, total, &bs, stream);
}

}  // namespace fuseopt
