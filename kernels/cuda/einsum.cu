// Einsum on the GPU (up to 3 operands; explicit or implicit output,
// ellipsis, repeated letters, size-1 broadcasting), planned by the same
// host-side helper as the CPU reference (kernels/common/einsum_equation.h).
// One thread per output element walks the summed letters with fp32
// accumulation: correct for every form, meant for the small
// einsums exporters emit (MatMul-shaped ones belong to the GEMM path).
#include "kernels/common/einsum_equation.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

constexpr int kMaxOps = 3;

struct EinsumGeom {
  int nops = 0, out_rank = 0, sum_rank = 0;
  int64_t out_shape[kMaxDims], sum_shape[kMaxDims];
  int64_t out_st[kMaxOps][kMaxDims], sum_st[kMaxOps][kMaxDims];
};

struct Operands {
  const void* p[kMaxOps];
};

template <class T>
__global__ void einsum_kernel(Operands ops, T* __restrict__ y, int64_t nout, int64_t nsum, EinsumGeom g) {
  CUDA_GRID_STRIDE(o, nout) {
    int64_t base[kMaxOps] = {0, 0, 0};
    int64_t rem = o;
    for (int d = g.out_rank - 1; d >= 0; --d) {
      const int64_t q = rem / g.out_shape[d], idx = rem - q * g.out_shape[d];
      rem = q;
      for (int t = 0; t < g.nops; ++t) base[t] += idx * g.out_st[t][d];
    }
    float acc = 0.f;
    for (int64_t s = 0; s < nsum; ++s) {
      int64_t off[kMaxOps] = {base[0], base[1], base[2]};
      int64_t r = s;
      for (int d = g.sum_rank - 1; d >= 0; --d) {
        const int64_t q = r / g.sum_shape[d], idx = r - q * g.sum_shape[d];
        r = q;
        for (int t = 0; t < g.nops; ++t) off[t] += idx * g.sum_st[t][d];
      }
      float p = 1.f;
      for (int t = 0; t < g.nops; ++t) p *= float(load_c(static_cast<const T*>(ops.p[t])[off[t]]));
      acc += p;
    }
    y[o] = store_c<T>(static_cast<compute_t<T>>(acc));
  }
}

// The equation (letters, ellipsis, implicit output) and the index strides come
// from kernels/common/einsum_equation.h, shared with the CPU reference kernel.
FUSEOPT_KERNEL(CudaEinsum, "", "Einsum", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  std::vector<const RtTensor*> ops;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    DM_CHECK(ctx, ctx.input(i), "operand " << i << " is missing");
    DM_CHECK(ctx, ctx.input(i)->dtype == ctx.input(0)->dtype, "operands must share a dtype");
    ops.push_back(ctx.input(i));
    shapes.push_back(ctx.input(i)->shape);
  }
  DM_CHECK(ctx, !ops.empty() && ops.size() <= static_cast<size_t>(kMaxOps),
           "the CUDA Einsum takes 1 to " << kMaxOps << " operands, got " << ops.size());
  const einsum::Plan plan = einsum::plan(ctx.node().label(), ctx.node().attr_string("equation", ""), shapes);
  DM_CHECK(ctx, plan.out_shape.size() <= static_cast<size_t>(kMaxDims) && plan.sum_shape.size() <= static_cast<size_t>(kMaxDims),
           "too many letters for the CUDA Einsum");
  EinsumGeom g{};
  g.nops = static_cast<int>(ops.size());
  g.out_rank = static_cast<int>(plan.out_shape.size());
  g.sum_rank = static_cast<int>(plan.sum_shape.size());
  int64_t nsum = 1;
  for (int d = 0; d < g.out_rank; ++d) g.out_shape[d] = plan.out_shape[d];
  for (int d = 0; d < g.sum_rank; ++d) nsum *= (g.sum_shape[d] = plan.sum_shape[d]);
  for (size_t t = 0; t < ops.size(); ++t) {
    for (int d = 0; d < g.out_rank; ++d) g.out_st[t][d] = plan.out_strides[t][d];
    for (int d = 0; d < g.sum_rank; ++d) g.sum_st[t][d] = plan.sum_strides[t][d];
  }
  RtTensor* y = ctx.output(0, ops[0]->dtype, plan.out_shape);
  const int64_t nout = y->numel();
  if (!nout) return;
  Operands p{};
  for (size_t t = 0; t < ops.size(); ++t) p.p[t] = ops[t]->data;
  dispatch_float(ctx, ops[0]->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    einsum_kernel<T><<<grid_for(nout), kThreads, 0, stream_of(ctx)>>>(p, y->ptr<T>(), nout, nsum, g);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
