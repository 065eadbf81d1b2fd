// Resize (opsets 10 to 19) and Upsample on the GPU. Parameters are resolved
// on the host by kernels/common/resize_params.h (shared with the CPU reference kernel)
// and reach the kernels by value, as do the per-axis coordinate functions,
// so nothing is copied host-to-device inside a run.
//  - nearest: one gather over the output (any dtype, moved as raw bytes;
//    tf_crop_and_resize's extrapolation value pre-converted on the host);
//  - linear / cubic: one separable 1-D pass per resized axis, fp32
//    accumulation, intermediates in fp32 scratch, fp16/bf16 read and written
//    only at the ends.
#include <cstring>

#include "kernels/common/resize_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

struct NearestGeometry {
  int rank = 0;
  int64_t out_shape[kMaxDims];
  int64_t in_strides[kMaxDims];
  dm::ResizeAxis axes[kMaxDims];
};

template <class E>
__global__ void resize_nearest_kernel(const E* __restrict__ x, E* __restrict__ y, int64_t n, NearestGeometry g,
                                      E fill) {
  CUDA_GRID_STRIDE(i, n) {
    int64_t rest = i, off = 0;
    bool outside = false;
    for (int d = g.rank - 1; d >= 0; --d) {
      const int64_t o = rest % g.out_shape[d];
      rest /= g.out_shape[d];
      bool out_d = false;
      const int64_t src = dm::resize_nearest_index(g.axes[d], o, &out_d);
      outside = outside || out_d;
      off += src * g.in_strides[d];
    }
    y[i] = outside ? fill : x[off];
  }
}

// One 1-D pass over axis a: x is [outer, in_len, inner], y [outer, a.out, inner].
template <class TI, class TO>
__global__ void resize_pass_kernel(const TI* __restrict__ x, TO* __restrict__ y, int64_t n, int64_t inner,
                                   dm::ResizeAxis a, float extrapolation) {
  CUDA_GRID_STRIDE(i, n) {
    const int64_t c = i % inner;
    const int64_t t = i / inner;
    const int64_t o = t % a.out;
    const int64_t b = t / a.out;
    const TI* line = x + b * a.in * inner + c;
    const float v = dm::resize_interp_1d(a, o, extrapolation,
                                         [&](int64_t q) { return static_cast<float>(load_c<TI>(line[q * inner])); });
    y[i] = store_c<TO, float>(v);
  }
}

// The extrapolation value in the element type of `dt`, as raw bytes.
template <class E>
E fill_bytes(KernelContext& ctx, DType dt, float value) {
  E e{};
  dm::visit_dtype(dt, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = dm::convert<T>(value);
    static_assert(sizeof(T) <= sizeof(uint64_t), "element too large");
    if (sizeof(T) == sizeof(E)) std::memcpy(&e, &v, sizeof(E));
  });
  return e;
}

void resize_nearest(KernelContext& ctx, const RtTensor& x, RtTensor* y, const dm::ResizeParams& p) {
  const int64_t n = y->numel();
  NearestGeometry g;
  g.rank = static_cast<int>(x.rank());
  FUSE_CHECK(g.rank <= kMaxDims,
             ctx.node().label() << ": rank " << g.rank << " exceeds the CUDA kernels' limit of " << kMaxDims);
  const std::vector<int64_t> st = dense_strides(x.shape);
  for (int d = 0; d < g.rank; ++d) {
    g.out_shape[d] = p.out_shape[d];
    g.in_strides[d] = st[d];
    g.axes[d] = p.axes[d];
  }
  dispatch_bytes(ctx, x.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E fill = fill_bytes<E>(ctx, x.dtype, p.extrapolation);
    resize_nearest_kernel<E><<<grid_for(n), kThreads, 0, stream_of(ctx)>>>(x.ptr<E>(), y->ptr<E>(), n, g, fill);
  });
  check_launch(ctx);
}

template <class T>
void resize_interpolate(KernelContext& ctx, const RtTensor& x, RtTensor* y, const dm::ResizeParams& p) {
  cudaStream_t s = stream_of(ctx);
  if (p.passes.empty()) {  // every axis kept as it is
    check_cuda(ctx, cudaMemcpyAsync(y->data, x.data, x.nbytes(), cudaMemcpyDeviceToDevice, s), "device copy");
    return;
  }
  // Intermediates (fp32) alternate between two scratch buffers sized for the
  // largest one.
  std::vector<int64_t> shape = x.shape;
  int64_t biggest = 0;
  for (size_t k = 0; k + 1 < p.passes.size(); ++k) {
    shape[p.passes[k]] = p.axes[p.passes[k]].out;
    biggest = std::max(biggest, shape_numel(shape));
  }
  float* buf[2] = {nullptr, nullptr};
  if (p.passes.size() > 1) {
    buf[0] = static_cast<float*>(ctx.scratch(static_cast<size_t>(biggest) * sizeof(float)));
    if (p.passes.size() > 2) buf[1] = static_cast<float*>(ctx.scratch(static_cast<size_t>(biggest) * sizeof(float)));
  }
  shape = x.shape;
  const float* cur = nullptr;  // the previous pass's fp32 output
  for (size_t k = 0; k < p.passes.size(); ++k) {
    const int d = p.passes[k];
    const dm::ResizeAxis& a = p.axes[d];
    const int64_t inner = dm::prod(shape, d + 1, shape.size());
    shape[d] = a.out;
    const int64_t n = shape_numel(shape);
    const bool first = k == 0, last = k + 1 == p.passes.size();
    float* next = last ? nullptr : buf[k % 2];
    const unsigned grid = grid_for(n);
    if (first && last)
      resize_pass_kernel<T, T><<<grid, kThreads, 0, s>>>(x.ptr<T>(), y->ptr<T>(), n, inner, a, p.extrapolation);
    else if (first)
      resize_pass_kernel<T, float><<<grid, kThreads, 0, s>>>(x.ptr<T>(), next, n, inner, a, p.extrapolation);
    else if (last)
      resize_pass_kernel<float, T><<<grid, kThreads, 0, s>>>(cur, y->ptr<T>(), n, inner, a, p.extrapolation);
    else
      resize_pass_kernel<float, float><<<grid, kThreads, 0, s>>>(cur, next, n, inner, a, p.extrapolation);
    check_launch(ctx);
    cur = next;
  }
}

}  // namespace

FUSEOPT_KERNEL(CudaResize, "", "Resize", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const dm::ResizeParams p = dm::resolve_resize(ctx, x);  // shared with the CPU reference kernel
  RtTensor* y = ctx.output(0, x.dtype, p.out_shape);
  if (p.mode == dm::ResizeMode::Nearest) {
    if (y->numel() > 0) resize_nearest(ctx, x, y, p);
    return;
  }
  DM_CHECK(ctx, is_float_dtype(x.dtype) && x.dtype != DType::Double,
           "linear and cubic modes need a float, float16 or bfloat16 input on CUDA, got " << dtype_name(x.dtype));
  if (y->numel() == 0) return;
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    resize_interpolate<T>(ctx, x, y, p);
  });
}

// Upsample (deprecated since opset 10) is Resize-10 with another name.
FUSEOPT_KERNEL(CudaUpsample, "", "Upsample", Backend::CUDA, {}) { CudaResize(ctx); }

}  // namespace cuda
}  // namespace fuseopt
