// Cast and CastLike between every numeric dtype and bool. fp16/bf16 go
// through float with the conversions of src/ir/tensor.h (round to nearest
// even); to bool means "!= 0"; float NaN to an integer gives 0.
#include "kernels/cpu/dm_util.h"

namespace fuseopt {
namespace {

using namespace dm;

void cast_to(KernelContext& ctx, DType to) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.dtype != DType::String && to != DType::String,
           "string casts are not supported (" << dtype_name(x.dtype) << " to " << dtype_name(to) << ")");
  RtTensor* y = ctx.output(0, to, x.shape);
  const int64_t n = x.numel();
  if (to == x.dtype) {
    copy_bytes(y->data, x.data, x.nbytes());
    return;
  }
  visit_dtype(x.dtype, ctx.node(), [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    visit_dtype(to, ctx.node(), [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      const S* in = x.template ptr<S>();
      D* out = y->template ptr<D>();
      for (int64_t i = 0; i < n; ++i) out[i] = convert<D>(in[i]);
    });
  });
}

}  // namespace

FUSEOPT_KERNEL(CpuCast, "", "Cast", Backend::CPU, {}) {
  DM_CHECK(ctx, ctx.node().has_attr("to"), "needs the 'to' attribute");
  cast_to(ctx, static_cast<DType>(ctx.node().attr_int("to", 0)));
}

FUSEOPT_KERNEL(CpuCastLike, "", "CastLike", Backend::CPU, {}) {
  cast_to(ctx, req_input(ctx, 1).dtype);
}

}  // namespace fuseopt
