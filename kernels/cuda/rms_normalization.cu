// ONNX RMSNormalization (opset 23) on CUDA: one block per row of D
// elements, mean square in fp32, scale dense [D] or read through broadcast
// strides over the normalised shape. CPU reference:
// kernels/cpu/rms_normalization.cc.
#include "kernels/common/norm_rows.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class T, class P, bool DENSE>
__global__ void rms_normalization_kernel(const T* __restrict__ x, const P* __restrict__ g, T* __restrict__ y,
                                         int64_t rows, int64_t D, float eps, BcastIndex<1> pix) {
  __shared__ float shm[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      const float v = float(load_c(xr[i]));
      sq += v * v;
    }
    const float inv = rsqrtf(block_sum(sq, shm) / float(D) + eps);
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
      int64_t gi = i;
      if constexpr (!DENSE) {
        int64_t off[1];
        pix.offsets(i, off);
        gi = off[0];
      }
      yr[i] = store_c<T>(static_cast<compute_t<T>>(float(load_c(xr[i])) * inv * float(load_c(g[gi]))));
    }
    __syncthreads();  // shm is reused by the next row
  }
}

FUSEOPT_KERNEL(CudaRMSNormalization, "", "RMSNormalization", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* scale = opt_input(ctx, 1);
  DM_CHECK(ctx, scale, "needs X and scale");
  const dm::NormRows nr = dm::resolve_norm_rows(ctx, x);  // shared with LayerNormalization
  const int64_t rows = nr.rows, D = nr.D;
  const std::vector<int64_t>& norm_shape = nr.norm_shape;
  const float eps = ctx.node().attr_float("epsilon", 1e-5f);
  dm::check_broadcasts_to_norm(ctx, *scale, norm_shape, "scale");
  const bool dense = scale->numel() == D;
  BcastIndex<1> pix{};
  if (!dense) pix = make_index<1>(ctx, norm_shape, {broadcast_strides(scale->shape, norm_shape)});
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  if (!rows || !D) return;
  const int threads = D >= 4096 ? 512 : D >= 512 ? 256 : D >= 128 ? 128 : 32;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, scale->dtype, [&](auto ptag) {
      using P = typename decltype(ptag)::type;
      if (dense)
        rms_normalization_kernel<T, P, true><<<blocks, threads, 0, stream_of(ctx)>>>(x.ptr<T>(), scale->ptr<P>(),
                                                                                     y->ptr<T>(), rows, D, eps, pix);
      else
        rms_normalization_kernel<T, P, false><<<blocks, threads, 0, stream_of(ctx)>>>(x.ptr<T>(), scale->ptr<P>(),
                                                                                      y->ptr<T>(), rows, D, eps, pix);
    });
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
