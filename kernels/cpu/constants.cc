// Ops that make tensors from attributes or scalars: Constant,
// ConstantOfShape, Range.
#include <algorithm>
#include <cmath>

#include "kernels/common/op_params.h"
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

void emit_tensor(KernelContext& ctx, const Tensor& t) {
  DM_CHECK(ctx, t.dtype != DType::String, "string constants are not supported");
  RtTensor* y = ctx.output(0, t.dtype, t.dims);
  copy_bytes(y->data, t.bytes.data(), y->nbytes());
}

}  // namespace

FUSEOPT_KERNEL(CpuConstant, "", "Constant", Backend::CPU, {}) {
  const Node& n = ctx.node();
  if (const Attribute* a = n.attr("value")) {
    DM_CHECK(ctx, a->t, "attribute 'value' holds no tensor");
    emit_tensor(ctx, *a->t);
  } else if (const Attribute* a = n.attr("value_float")) {
    emit_tensor(ctx, Tensor::scalar_float(a->f));
  } else if (const Attribute* a = n.attr("value_floats")) {
    emit_tensor(ctx, Tensor::from_floats(a->floats, {static_cast<int64_t>(a->floats.size())}));
  } else if (const Attribute* a = n.attr("value_int")) {
    emit_tensor(ctx, Tensor::from_ints({a->i}, {}));
  } else if (const Attribute* a = n.attr("value_ints")) {
    emit_tensor(ctx, Tensor::from_ints(a->ints, {static_cast<int64_t>(a->ints.size())}));
  } else {
    DM_CHECK(ctx, false, "needs one of value, value_float(s), value_int(s) "
                         "(sparse_value and string values are not supported)");
  }
}

FUSEOPT_KERNEL(CpuConstantOfShape, "", "ConstantOfShape", Backend::CPU, {}) {
  const ConstantOfShapeParams p = resolve_constant_of_shape(ctx);  // shared with the CUDA kernel
  const std::vector<int64_t>& shape = p.shape;
  const Tensor& value = p.value;
  RtTensor* y = ctx.output(0, value.dtype, shape);
  const size_t es = dtype_size(value.dtype);
  auto* dst = static_cast<uint8_t*>(y->data);
  for (int64_t i = 0; i < y->numel(); ++i) std::memcpy(dst + i * es, value.bytes.data(), es);
}

// Range: start + i*delta for i < max(ceil((limit - start) / delta), 0). float16/bfloat16 (opset
// 27) are computed in float and rounded once, as its default stash_type 1 asks; other stash_type
// values (the 16-bit type itself) are computed the same way, no less exactly.
FUSEOPT_KERNEL(CpuRange, "", "Range", Backend::CPU, {}) {
  const RtTensor& start_t = req_input(ctx, 0);
  const RtTensor& limit_t = req_input(ctx, 1);
  const RtTensor& delta_t = req_input(ctx, 2);
  DM_CHECK(ctx, start_t.numel() == 1 && limit_t.numel() == 1 && delta_t.numel() == 1,
           "start, limit and delta must be scalars, got " << shape_str(start_t.shape) << ", "
                                                          << shape_str(limit_t.shape) << ", "
                                                          << shape_str(delta_t.shape));
  DM_CHECK(ctx, start_t.dtype == limit_t.dtype && start_t.dtype == delta_t.dtype,
           "start, limit and delta must share a dtype");
  const DType dt = start_t.dtype;
  DM_CHECK(ctx, dt != DType::Bool, "bool Range is not defined");
  visit_dtype(dt, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto start = value_of(*ctx.host_input(0)->template ptr<T>());
    const auto limit = value_of(*ctx.host_input(1)->template ptr<T>());
    const auto delta = value_of(*ctx.host_input(2)->template ptr<T>());
    using V = std::remove_const_t<decltype(start)>;
    const int64_t n = range_length<V>(ctx, start, limit, delta);  // shared with the CUDA kernel
    RtTensor* y = ctx.output(0, dt, {n});
    T* out = y->template ptr<T>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = convert<T>(static_cast<V>(start + static_cast<V>(i) * delta));
  });
}

}  // namespace fuseopt
