// CUDA host code of fuseopt.EmbedLayerNorm (the kernels: embed_layer_norm.cu).
// Inputs: gamma, beta?, then (table [V, D], ids) pairs, 2 or 3 of them (1 is
// accepted too: the kernel does not care). The ids broadcast (numpy) to the
// output's leading dims; each lookup gets its strides over them. Attribute
// handling mirrors kernels/cpu/fused_layer_norm.cc (epsilon 1e-5).
#include <vector>

#include "kernels/cuda/embed_layer_norm.h"
#include "kernels/cuda/fused_common.h"

namespace fuseopt {
namespace {

const RtTensor* opt_input(KernelContext& ctx, size_t i) { return i < ctx.num_inputs() ? ctx.input(i) : nullptr; }

}  // namespace

FUSEOPT_KERNEL(CudaFusedEmbedLayerNorm, "fuseopt", "EmbedLayerNorm", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& n = ctx.node();
  const RtTensor* gamma = ctx.input(0);
  const RtTensor* beta = opt_input(ctx, 1);
  FUSE_CHECK(gamma, n.label() << ": EmbedLayerNorm needs gamma");
  const DType dt = gamma->dtype;
  FUSE_CHECK(cuda_fused::is_gpu_float(dt), n.label() << ": CUDA EmbedLayerNorm supports float/float16/bfloat16");
  cuda_fused::check_same_dtype(ctx, beta, dt, "beta");
  const int64_t d = gamma->numel();
  cuda_fused::check_vector(ctx, beta, d, "beta");

  cuda_fused::EmbedLayerNormArgs a;
  std::vector<std::vector<int64_t>> id_shapes;
  std::vector<const RtTensor*> ids;
  for (size_t i = 2; i + 1 < ctx.num_inputs(); i += 2) {
    const RtTensor* t = opt_input(ctx, i);
    const RtTensor* k = opt_input(ctx, i + 1);
    if (!t && !k) continue;
    FUSE_CHECK(t && k, n.label() << ": EmbedLayerNorm lookup " << i / 2 - 1 << " needs a table and ids");
    FUSE_CHECK(a.num_lookups < cuda_fused::kEmbedMaxLookups,
               n.label() << ": CUDA EmbedLayerNorm takes at most " << cuda_fused::kEmbedMaxLookups << " lookups");
    cuda_fused::check_same_dtype(ctx, t, dt, "table");
    FUSE_CHECK(t->rank() == 2 && t->shape[1] == d,
               n.label() << ": EmbedLayerNorm table " << shape_str(t->shape) << " is not [V, " << d << "]");
    FUSE_CHECK(k->dtype == DType::Int64 || k->dtype == DType::Int32,
               n.label() << ": EmbedLayerNorm ids must be int64 or int32, got " << dtype_name(k->dtype));
    cuda_fused::EmbedLookup& l = a.lookups[a.num_lookups++];
    l.table = t->data;
    l.rows = t->shape[0];
    l.ids = k->data;
    l.ids32 = k->dtype == DType::Int32;
    id_shapes.push_back(k->shape);
    ids.push_back(k);
  }
  FUSE_CHECK(a.num_lookups > 0, n.label() << ": EmbedLayerNorm has no lookups");
  const std::vector<int64_t> lead = dm::broadcast_shape(id_shapes, n);
  FUSE_CHECK(lead.size() <= static_cast<size_t>(cuda_fused::kEmbedMaxRank),
             n.label() << ": CUDA EmbedLayerNorm broadcasts ids over at most " << cuda_fused::kEmbedMaxRank
                       << " dims, got " << shape_str(lead));
  std::vector<int64_t> shape = lead;
  shape.push_back(d);
  RtTensor* y = ctx.output(0, dt, shape);
  a.rows = shape_numel(lead);
  if (a.rows == 0 || d == 0) return;
  a.dtype = dt;
  a.D = d;
  a.rank = static_cast<int>(lead.size());
  for (size_t k = 0; k < lead.size(); ++k) a.dims[k] = lead[k];
  for (int j = 0; j < a.num_lookups; ++j) {
    const std::vector<int64_t> st = dm::broadcast_strides(ids[j]->shape, lead);
    for (size_t k = 0; k < st.size(); ++k) a.lookups[j].strides[k] = st[k];
  }
  a.gamma = gamma->data;
  a.beta = beta ? beta->data : nullptr;
  a.y = y->data;
  a.eps = n.attr_float("epsilon", 1e-5f);
  a.err = cuda::index_error_sink(ctx);
  cuda_fused::launch_embed_layer_norm(a, cuda_fused::stream_of(ctx));
}

}  // namespace fuseopt
