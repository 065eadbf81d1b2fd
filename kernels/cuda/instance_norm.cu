// InstanceNormalization on CUDA: one block per (n, c) instance of S spatial
// elements. Statistics in fp32 whatever the storage type, two passes like
// the CPU reference (mean, then the centred variance: no E[x^2] - E[x]^2
// cancellation), then y = (x - mean) * (scale * inv) + B. The instance is
// re-read from global memory (L2 holds it for the sizes audio/vision
// exports produce).
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T, class P>
__global__ void instance_norm_kernel(const T* __restrict__ x, const P* __restrict__ g, const P* __restrict__ b,
                                     T* __restrict__ y, int64_t instances, int64_t C, int64_t S, float eps) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < instances; r += gridDim.x) {
    const T* xr = x + r * S;
    T* yr = y + r * S;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < S; i += blockDim.x) s += float(load_c(xr[i]));
    const float mean = block_sum(s, shm) / float(S);
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < S; i += blockDim.x) {
      const float d = float(load_c(xr[i])) - mean;
      sq += d * d;
    }
    const float inv = rsqrtf(block_sum(sq, shm) / float(S) + eps);
    const int64_t c = r % C;
    const float a = inv * float(load_c(g[c])), shift = float(load_c(b[c]));
    for (int64_t i = threadIdx.x; i < S; i += blockDim.x)
      yr[i] = store_c<T>(static_cast<compute_t<T>>((float(load_c(xr[i])) - mean) * a + shift));
    __syncthreads();  // shm is reused by the next instance's reductions
  }
}

FUSEOPT_KERNEL(CudaInstanceNormalization, "", "InstanceNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  const RtTensor* bias = opt_input(ctx, 2);
  DM_CHECK(ctx, scale && bias, "needs input, scale and B");
  DM_CHECK(ctx, x.rank() >= 2, "input must have rank >= 2 (N, C, ...), got " << shape_str(x.shape));
  const int64_t N = x.shape[0], C = x.shape[1], S = dm::prod(x.shape, 2, x.rank());
  DM_CHECK(ctx, scale->numel() == C && scale->rank() == 1,
           "scale " << shape_str(scale->shape) << " must have shape [" << C << "] (the channel dim)");
  DM_CHECK(ctx, bias->numel() == C && bias->rank() == 1,
           "B " << shape_str(bias->shape) << " must have shape [" << C << "] (the channel dim)");
  DM_CHECK(ctx, scale->dtype == bias->dtype, "scale and B dtypes differ");
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t instances = N * C;
  if (!instances || !S) return;
  const int threads = S >= 4096 ? 512 : S >= 512 ? 256 : S >= 128 ? 128 : 32;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(instances, 65535));
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, scale->dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      instance_norm_kernel<T, P><<<blocks, threads, 0, stream_of(ctx)>>>(x.ptr<T>(), scale->ptr<P>(), bias->ptr<P>(),
                                                                        y->ptr<T>(), instances, C, S, eps);
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
