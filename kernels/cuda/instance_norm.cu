// InstanceNormalization and GroupNormalization on CUDA: one block per
// (n, group) of D = Cg * S contiguous elements (InstanceNormalization is the
// case Cg = 1). Statistics in fp32 whatever the storage type, two passes like
// the CPU reference (mean, then the centred variance: no E[x^2] - E[x]^2
// cancellation), then y = (x - mean) * (scale * inv) + B. The group is
// re-read from global memory (L2 holds it for the sizes audio/vision
// exports produce).
#include "kernels/cuda/block_row_stats.cuh"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// Parameters are per channel (index group * Cg + i / S) or, with
// per_group_params, per group.
template <class T, class P>
__global__ void group_norm_kernel(const T* __restrict__ x, const P* __restrict__ g, const P* __restrict__ b,
                                  T* __restrict__ y, int64_t rows, int64_t G, int64_t Cg, int64_t S,
                                  bool per_group_params, float eps) {
  __shared__ float shm[32];
  const int64_t D = Cg * S;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    const float2 st = block_row_stats(xr, D, eps, shm);
    const float mean = st.x, inv = st.y;
    const int64_t grp = r % G;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const int64_t p = per_group_params ? grp : grp * Cg + (Cg == 1 ? 0 : i / S);
      const float a = inv * float(load_c(g[p])), shift = float(load_c(b[p]));
      yr[i] = store_c<T>(static_cast<compute_t<T>>((float(load_c(xr[i])) - mean) * a + shift));
    }
    __syncthreads();  // shm is reused by the next group's reductions
  }
}

void run_group_norm(KernelContext& ctx, const RtTensor& x, const RtTensor& scale, const RtTensor& bias, int64_t G,
                    bool per_group_params, float eps) {
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t N = x.shape[0], C = x.shape[1], S = dm::prod(x.shape, 2, x.rank());
  const int64_t rows = N * G, Cg = C / G, D = Cg * S;
  if (!rows || !D) return;
  const int threads = D >= 4096 ? 512 : D >= 512 ? 256 : D >= 128 ? 128 : 32;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, scale.dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      group_norm_kernel<T, P><<<blocks, threads, 0, stream_of(ctx)>>>(x.ptr<T>(), scale.ptr<P>(), bias.ptr<P>(),
                                                                     y->ptr<T>(), rows, G, Cg, S, per_group_params, eps);
    });
  });
  check_launch(ctx);
}

void check_param(KernelContext& ctx, const RtTensor* t, const char* what, int64_t want, const char* dim) {
  DM_CHECK(ctx, t->numel() == want && t->rank() == 1,
           what << " " << shape_str(t->shape) << " must have shape [" << want << "] (" << dim << ")");
}

FUSEOPT_KERNEL(CudaInstanceNormalization, "", "InstanceNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, scale && bias, "needs input, scale and B");
  DM_CHECK(ctx, x.rank() >= 2, "input must have rank >= 2 (N, C, ...), got " << shape_str(x.shape));
  const int64_t C = x.shape[1];
  check_param(ctx, scale, "scale", C, "the channel dim");
  check_param(ctx, bias, "B", C, "the channel dim");
  DM_CHECK(ctx, scale->dtype == bias->dtype, "scale and B dtypes differ");
  run_group_norm(ctx, x, *scale, *bias, C, false, ctx.node().attr_float("epsilon", 1e-5f));
}

// Per-channel scale/bias [C] (opset 21) or per-group [num_groups] (opset 18),
// told apart by length as in the CPU reference.
FUSEOPT_KERNEL(CudaGroupNormalization, "", "GroupNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, scale && bias, "needs X, scale and bias");
  DM_CHECK(ctx, x.rank() >= 2, "X must have rank >= 2 (N, C, ...), got " << shape_str(x.shape));
  DM_CHECK(ctx, ctx.node().has_attr("num_groups"), "missing attribute num_groups");
  const int64_t G = ctx.node().attr_int("num_groups", 0), C = x.shape[1];
  DM_CHECK(ctx, G > 0 && C % G == 0, "num_groups " << G << " must be positive and divide the channels " << C);
  const bool per_group = scale->numel() != C;
  const char* dim = per_group ? "num_groups (opset 18) or channels (opset 21)" : "the channel dim";
  check_param(ctx, scale, "scale", per_group ? G : C, dim);
  check_param(ctx, bias, "bias", per_group ? G : C, dim);
  DM_CHECK(ctx, scale->dtype == bias->dtype, "scale and bias dtypes differ");
  run_group_norm(ctx, x, *scale, *bias, G, per_group, ctx.node().attr_float("epsilon", 1e-5f));
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
