// fuseopt.AddRelu: Y = max(A + B, 0) with numpy broadcasting, in one pass
// (the residual Add+Relu of ResNets without materialising the sum).
#include <algorithm>
#include <array>

#include "kernels/cpu/broadcast.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "util/error.h"

namespace fuseopt {

FUSEOPT_KERNEL(CpuFusedAddRelu, "fuseopt", "AddRelu", Backend::CPU, {DType::Float}) {
  const Node& n = ctx.node();
  const RtTensor* a = ctx.input(0);
  const RtTensor* b = ctx.input(1);
  FUSE_CHECK(a && b, n.label() << ": AddRelu needs inputs A and B");
  FUSE_CHECK(a->dtype == DType::Float && b->dtype == DType::Float,
             n.label() << ": AddRelu CPU kernel supports float inputs only");
  const std::vector<int64_t> shape = cpu::broadcast_shape({a->shape, b->shape}, n);
  RtTensor* y = ctx.output(0, DType::Float, shape);
  const float* pa = a->ptr<float>();
  const float* pb = b->ptr<float>();
  float* py = y->ptr<float>();
  if (a->shape == shape && b->shape == shape) {  // the residual case: same shapes
    parallel_for(y->numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) py[i] = std::max(pa[i] + pb[i], 0.0f);
    });
    return;
  }
  const std::array<std::vector<int64_t>, 2> strides{cpu::broadcast_strides(a->shape, shape),
                                                    cpu::broadcast_strides(b->shape, shape)};
  cpu::for_each_broadcast<2>(shape, strides, [&](int64_t o, const std::array<int64_t, 2>& off) {
    py[o] = std::max(pa[off[0]] + pb[off[1]], 0.0f);
  });
}

}  // namespace fuseopt
