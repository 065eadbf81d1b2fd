// Less common index ops on the GPU. OneHot and EyeLike are device kernels.
// NonZero and Compress have output shapes that depend on device data, so
// they truly need it on the host: they run the CPU kernel on host copies of
// their inputs (the Session records the device-to-host copy in the profile
// and runs such a plan without graph capture) and upload the result.
#include <cstring>
#include <memory>

#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// Presents a CUDA kernel context to a CPU kernel: inputs are host copies,
// outputs are host buffers uploaded to the real outputs afterwards.
class HostFallbackContext final : public KernelContext {
 public:
  explicit HostFallbackContext(KernelContext& dev) : dev_(dev) {
    views_.resize(dev.num_inputs());
    present_.resize(dev.num_inputs(), false);
    for (size_t i = 0; i < dev.num_inputs(); ++i)
      if (const RtTensor* t = dev.input(i)) {
        views_[i] = *dev.host_input(i);
        present_[i] = true;
      }
    outs_.resize(dev.num_outputs());
    out_views_.resize(dev.num_outputs());
  }
  const Node& node() const override { return dev_.node(); }
  Backend backend() const override { return Backend::CPU; }
  Precision precision() const override { return dev_.precision(); }
  size_t num_inputs() const override { return views_.size(); }
  const RtTensor* input(size_t i) const override { return i < views_.size() && present_[i] ? &views_[i] : nullptr; }
  const RtTensor* host_input(size_t i) override { return input(i); }
  size_t num_outputs() const override { return outs_.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override {
    FUSE_CHECK(i < outs_.size(), node().label() << ": kernel wrote undeclared output " << i);
    outs_[i] = Tensor(dtype, shape);
    out_views_[i] = RtTensor{dtype, shape, outs_[i].bytes.data(), Backend::CPU};
    return &out_views_[i];
  }
  RtTensor* alias_output(size_t i, size_t j, const std::vector<int64_t>& shape) override {
    const RtTensor* in = input(j);
    FUSE_CHECK(in, node().label() << ": alias of omitted input " << j);
    RtTensor* o = output(i, in->dtype, shape);
    if (in->nbytes()) std::memcpy(o->data, in->data, in->nbytes());
    return o;
  }
  void* scratch(size_t bytes) override {
    scratch_.emplace_back(new uint8_t[bytes + 64]);
    return scratch_.back().get();
  }
  void* stream() const override { return nullptr; }

  // Uploads every output the CPU kernel wrote.
  void upload() {
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    check_cuda(dev_, cudaStreamIsCapturing(stream_of(dev_), &cap), "capture status");
    DM_CHECK(dev_, cap == cudaStreamCaptureStatusNone,
             "its output shape depends on data, so it cannot run inside a CUDA graph (run with --no-cuda-graphs)");
    for (size_t i = 0; i < outs_.size(); ++i) {
      if (outs_[i].dtype == DType::Undefined) continue;
      RtTensor* d = dev_.output(i, outs_[i].dtype, outs_[i].dims);
      if (!outs_[i].bytes.empty())
        // Pageable source: staged before the call returns, so the host buffer may go.
        check_cuda(dev_, cudaMemcpyAsync(d->data, outs_[i].bytes.data(), outs_[i].bytes.size(), cudaMemcpyHostToDevice,
                                         stream_of(dev_)),
                   "upload");
    }
  }

 private:
  KernelContext& dev_;
  std::vector<RtTensor> views_;
  std::vector<bool> present_;
  std::vector<Tensor> outs_;
  std::vector<RtTensor> out_views_;
  std::vector<std::unique_ptr<uint8_t[]>> scratch_;
};

KernelFn on_host(const char* op) {
  return [op](KernelContext& ctx) {
    const RtTensor* first = opt_input(ctx, 0);
    const KernelInfo* k = find_kernel("", op, Backend::CPU, first ? first->dtype : DType::Undefined);
    DM_CHECK(ctx, k, "no CPU kernel for " << op << " to run on the host");
    HostFallbackContext host(ctx);
    k->fn(host);
    host.upload();
  };
}
KernelRegistrar nonzero_reg(KernelInfo{"", "NonZero", Backend::CUDA, {}, on_host("NonZero")});
KernelRegistrar compress_reg(KernelInfo{"", "Compress", Backend::CUDA, {}, on_host("Compress")});

// ---- OneHot ---------------------------------------------------------------------
template <class E, class I>
__global__ void one_hot_kernel(const I* __restrict__ idx, E* __restrict__ y, int64_t total, int64_t depth, int64_t inner,
                               const E* __restrict__ values) {
  const E off = values[0], on = values[1];
  CUDA_GRID_STRIDE(i, total) {
    const int64_t in = i % inner, d = (i / inner) % depth, o = i / (inner * depth);
    int64_t k = static_cast<int64_t>(to_double(idx[o * inner + in]));
    if (k < 0) k += depth;
    y[i] = k == d ? on : off;
  }
}

FUSEOPT_KERNEL(CudaOneHot, "", "OneHot", Backend::CUDA, {}) {
  const RtTensor& idx = req_input(ctx, 0);
  DM_CHECK(ctx, opt_input(ctx, 1), "missing depth");
  const RtTensor& depth_t = *ctx.host_input(1);
  const RtTensor& values = req_input(ctx, 2);
  DM_CHECK(ctx, depth_t.numel() == 1, "depth must hold one value, got " << shape_str(depth_t.shape));
  DM_CHECK(ctx, values.numel() == 2, "values must hold [off, on], got " << shape_str(values.shape));
  int64_t depth = 0;
  switch (depth_t.dtype) {
    case DType::Float: depth = static_cast<int64_t>(*depth_t.ptr<float>()); break;
    case DType::Double: depth = static_cast<int64_t>(*depth_t.ptr<double>()); break;
    default: depth = dm::int_at(ctx, depth_t, 0);
  }
  DM_CHECK(ctx, depth > 0, "depth must be positive, got " << depth);
  const int64_t out_rank = static_cast<int64_t>(idx.rank()) + 1;
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), out_rank);
  std::vector<int64_t> out_shape = idx.shape;
  out_shape.insert(out_shape.begin() + axis, depth);
  RtTensor* y = ctx.output(0, values.dtype, out_shape);
  const int64_t total = y->numel();
  if (!total) return;
  const int64_t inner = dm::prod(idx.shape, axis, idx.rank());
  dispatch_bytes(ctx, values.dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    auto go = [&](auto itag) {
      using I = typename decltype(itag)::type;
      one_hot_kernel<E, I><<<grid_for(total), kThreads, 0, stream_of(ctx)>>>(idx.ptr<I>(), y->ptr<E>(), total, depth, inner,
                                                                             values.ptr<E>());
    };
    switch (idx.dtype) {
      case DType::Int64: go(Tag<int64_t>{}); break;
      case DType::Int32: go(Tag<int32_t>{}); break;
      case DType::Float: go(Tag<float>{}); break;
      default: throw Error(unsupported(ctx, idx.dtype));
    }
  });
  check_launch(ctx);
}

// ---- EyeLike --------------------------------------------------------------------
template <class T> __global__ void eye_kernel(T* __restrict__ y, int64_t rows, int64_t cols, int64_t k) {
  CUDA_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i - r * cols;
    y[i] = c - r == k ? T(1) : T(0);
  }
}
template <> __global__ void eye_kernel<__half>(__half* __restrict__ y, int64_t rows, int64_t cols, int64_t k) {
  CUDA_GRID_STRIDE(i, rows * cols) { y[i] = __float2half((i % cols) - i / cols == k ? 1.f : 0.f); }
}
template <> __global__ void eye_kernel<__nv_bfloat16>(__nv_bfloat16* __restrict__ y, int64_t rows, int64_t cols, int64_t k) {
  CUDA_GRID_STRIDE(i, rows * cols) { y[i] = __float2bfloat16((i % cols) - i / cols == k ? 1.f : 0.f); }
}

FUSEOPT_KERNEL(CudaEyeLike, "", "EyeLike", Backend::CUDA, {}) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() == 2, "input must be 2-d, got " << shape_str(x.shape));
  const DType dt = ctx.node().has_attr("dtype") ? static_cast<DType>(ctx.node().attr_int("dtype", 1)) : x.dtype;
  const int64_t k = ctx.node().attr_int("k", 0);
  RtTensor* y = ctx.output(0, dt, x.shape);
  if (!y->numel()) return;
  dispatch_all(ctx, dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    eye_kernel<T><<<grid_for(y->numel()), kThreads, 0, stream_of(ctx)>>>(y->ptr<T>(), x.shape[0], x.shape[1], k);
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
