// Resize (opsets 10 to 19) and Upsample, the CPU reference. Parameters and
// coordinate math come from kernels/common/resize_params.h (shared with the CUDA
// kernel). Nearest is one gather (any dtype, values copied exactly);
// linear and cubic run one separable 1-D pass per resized axis in fp32
// (fp16 / bf16 / double inputs converted once), as the ONNX reference does.
#include <vector>

#include "kernels/common/resize_params.h"
#include "kernels/cpu/dm_util.h"
#include "runtime/parameter_inputs.h"

namespace fuseopt {
namespace {

using namespace dm;

template <class T>
void resize_nearest(const RtTensor& x, RtTensor* y, const ResizeParams& p) {
  const size_t rank = x.rank();
  // Per dim: the input index of every output coordinate, -1 = extrapolated.
  std::vector<std::vector<int64_t>> map(rank);
  for (size_t d = 0; d < rank; ++d) {
    map[d].resize(p.out_shape[d]);
    for (int64_t o = 0; o < p.out_shape[d]; ++o) {
      bool outside = false;
      const int64_t i = resize_nearest_index(p.axes[d], o, &outside);
      map[d][o] = outside ? -1 : i;
    }
  }
  const std::vector<int64_t> strides = dense_strides(x.shape);
  const T* src = x.ptr<T>();
  T* dst = y->ptr<T>();
  const T fill = convert<T>(p.extrapolation);
  const int64_t total = y->numel();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < total; ++o) {
    int64_t off = 0;
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = map[d][idx[d]];
      if (i < 0) outside = true;
      else off += i * strides[d];
    }
    dst[o] = outside ? fill : src[off];
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < p.out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void resize_interpolate(const RtTensor& x, RtTensor* y, const ResizeParams& p) {
  std::vector<float> cur(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) cur[i] = static_cast<float>(value_of(x.ptr<T>()[i]));
  std::vector<int64_t> shape = x.shape;
  for (int d : p.passes) {
    const ResizeAxis& a = p.axes[d];
    const int64_t outer = prod(shape, 0, d), in_len = shape[d], out_len = a.out;
    const int64_t inner = prod(shape, d + 1, shape.size());
    std::vector<float> next(static_cast<size_t>(outer * out_len * inner));
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t o = 0; o < out_len; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const float* line = cur.data() + b * in_len * inner + i;
          next[(b * out_len + o) * inner + i] =
              resize_interp_1d(a, o, p.extrapolation, [&](int64_t q) { return line[q * inner]; });
        }
    cur.swap(next);
    shape[d] = out_len;
  }
  T* dst = y->ptr<T>();
  for (int64_t i = 0; i < y->numel(); ++i) dst[i] = convert<T>(cur[i]);
}

}  // namespace

FUSEOPT_KERNEL(CpuResize, "", "Resize", Backend::CPU, {}) {
  const RtTensor& x = req_input(ctx, 0);
  const ResizeParams p = resolve_resize(ctx, x);  // shared with the CUDA kernel
  RtTensor* y = ctx.output(0, x.dtype, p.out_shape);
  visit_dtype(x.dtype, ctx.node(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool is_float = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BF16>;
    if (p.mode != ResizeMode::Nearest) {
      if constexpr (!is_float) {
        DM_CHECK(ctx, false, "linear and cubic modes need a float input, got " << dtype_name(x.dtype));
      } else {
        if (y->numel() > 0) resize_interpolate<T>(x, y, p);
      }
      return;
    }
    if (y->numel() > 0) resize_nearest<T>(x, y, p);
  });
}

// roi and scales set the output length (floor(len * scale)): the session
// keeps them fp32 under fp16/bf16 on every backend.
FUSEOPT_FP32_PARAMETER_INPUTS(Resize, "Resize", {1, 2});
FUSEOPT_FP32_PARAMETER_INPUTS(Upsample, "Upsample", {1});

// Upsample (deprecated since opset 10) is Resize-10 with another name.
FUSEOPT_KERNEL(CpuUpsample, "", "Upsample", Backend::CPU, {}) { CpuResize(ctx); }

}  // namespace fuseopt
