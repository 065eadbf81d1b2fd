// ArgMax / ArgMin / TopK on the GPU, with the element order of the CPU
// reference (kernels/cpu/arg_topk.cc): ties to the lower index (ArgMax/ArgMin
// select_last_index = 1: the higher), ArgMax/ArgMin return the first NaN,
// TopK ranks NaN above every number; TopK output sorted.
// One block per row along the axis. TopK runs K selection rounds: round k
// finds, over the elements that come after pick k-1 in that order, the first
// one (per-thread scan, then a shared-memory tree). That is O(K * n / threads)
// per row: right for the small K exporters use (MoE routing, top-k
// sampling, ArgMax as K = 1), slow but correct for K close to n.
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

template <class C> __device__ __forceinline__ bool dev_is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

template <class C>
__device__ __forceinline__ bool comes_before(C a, int64_t ia, C b, int64_t ib, bool largest, bool nan_first,
                                             bool last_index) {
  const bool na = dev_is_nan(a), nb = dev_is_nan(b);
  if (na || nb) {
    if (na && nb) return last_index ? ia > ib : ia < ib;
    return na == nan_first;
  }
  if (a != b) return largest ? a > b : a < b;
  return last_index ? ia > ib : ia < ib;
}

constexpr int kMaxSelectThreads = 256;

// values may be null (ArgMax/ArgMin). Output element k of row (o, i) lives
// at o * K * inner + k * inner + i.
template <class T>
__global__ void select_kernel(const T* __restrict__ x, T* __restrict__ values, int64_t* __restrict__ indices,
                              int64_t rows, int64_t n, int64_t inner, int64_t K, bool largest, bool nan_first,
                              bool last_index) {
  using C = compute_t<T>;
  __shared__ C s_val[kMaxSelectThreads];
  __shared__ int64_t s_idx[kMaxSelectThreads];
  __shared__ C prev_val;
  __shared__ int64_t prev_idx;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r / inner, i = r % inner;
    const T* row = x + o * n * inner + i;
    for (int64_t k = 0; k < K; ++k) {
      C best_v{};
      int64_t best_i = -1;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        const C v = load_c(row[j * inner]);
        if (k > 0 && !comes_before(prev_val, prev_idx, v, j, largest, nan_first, last_index)) continue;
        if (best_i < 0 || comes_before(v, j, best_v, best_i, largest, nan_first, last_index)) {
          best_v = v;
          best_i = j;
        }
      }
      s_val[threadIdx.x] = best_v;
      s_idx[threadIdx.x] = best_i;
      __syncthreads();
      for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
          const int64_t oi = s_idx[threadIdx.x + s];
          if (oi >= 0 && (s_idx[threadIdx.x] < 0 || comes_before(s_val[threadIdx.x + s], oi, s_val[threadIdx.x],
                                                                   s_idx[threadIdx.x], largest, nan_first, last_index))) {
            s_val[threadIdx.x] = s_val[threadIdx.x + s];
            s_idx[threadIdx.x] = oi;
          }
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        const int64_t dst = o * K * inner + k * inner + i;
        if (values) values[dst] = row[s_idx[0] * inner];
        indices[dst] = s_idx[0];
        prev_val = s_val[0];
        prev_idx = s_idx[0];
      }
      __syncthreads();
    }
  }
}

void launch_select(KernelContext& ctx, const RtTensor& x, RtTensor* values, int64_t* indices, int64_t axis, int64_t K,
                   bool largest, bool nan_first, bool last_index) {
  const int64_t outer = dm::prod(x.shape, 0, axis), n = x.shape[axis];
  const int64_t inner = dm::prod(x.shape, axis + 1, x.rank());
  const int64_t rows = outer * inner;
  if (!rows || !K) return;
  const int threads = n >= 2048 ? kMaxSelectThreads : n >= 256 ? 128 : 32;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
  dispatch_numeric(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    select_kernel<T><<<blocks, threads, 0, stream_of(ctx)>>>(x.ptr<T>(), values ? values->ptr<T>() : nullptr, indices,
                                                             rows, n, inner, K, largest, nan_first, last_index);
  });
  check_launch(ctx);
}

#define SORTABLE {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Int8, DType::UInt8}

void arg_reduce(KernelContext& ctx, bool largest) {
  const RtTensor& x = req_input(ctx, 0);
  DM_CHECK(ctx, x.rank() >= 1, "input must have rank >= 1");
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", 0), static_cast<int64_t>(x.rank()));
  const bool keepdims = ctx.node().attr_int("keepdims", 1) != 0;
  const bool last = ctx.node().attr_int("select_last_index", 0) != 0;
  DM_CHECK(ctx, x.shape[axis] > 0, "cannot reduce over an empty axis " << axis << " of " << shape_str(x.shape));
  std::vector<int64_t> shape = x.shape;
  if (keepdims) shape[axis] = 1;
  else shape.erase(shape.begin() + axis);
  RtTensor* y = ctx.output(0, DType::Int64, shape);
  launch_select(ctx, x, nullptr, y->ptr<int64_t>(), axis, 1, largest, true, last);
}

FUSEOPT_KERNEL(CudaArgMax, "", "ArgMax", Backend::CUDA, SORTABLE) { arg_reduce(ctx, true); }
FUSEOPT_KERNEL(CudaArgMin, "", "ArgMin", Backend::CUDA, SORTABLE) { arg_reduce(ctx, false); }

FUSEOPT_KERNEL(CudaTopK, "", "TopK", Backend::CUDA, SORTABLE) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor* kt = opt_host_input(ctx, 1);
  DM_CHECK(ctx, kt, "needs X and K");
  DM_CHECK(ctx, x.rank() >= 1, "X must have rank >= 1");
  DM_CHECK(ctx, kt->numel() == 1, "K must hold one value, got shape " << shape_str(kt->shape));
  const int64_t K = read_ints(ctx, *kt)[0];
  const int64_t axis = norm_axis(ctx, ctx.node().attr_int("axis", -1), static_cast<int64_t>(x.rank()));
  const bool largest = ctx.node().attr_int("largest", 1) != 0;
  const int64_t n = x.shape[axis];
  DM_CHECK(ctx, K >= 0 && K <= n,
           "K = " << K << " is outside [0, " << n << "] (axis " << axis << " of " << shape_str(x.shape) << ")");
  std::vector<int64_t> shape = x.shape;
  shape[axis] = K;
  RtTensor* values = ctx.output(0, x.dtype, shape);
  const int64_t count = shape_numel(shape);
  int64_t* indices = wants_output(ctx, 1) ? ctx.output(1, DType::Int64, shape)->ptr<int64_t>()
                                          : static_cast<int64_t*>(ctx.scratch(static_cast<size_t>(std::max<int64_t>(1, count)) * 8));
  launch_select(ctx, x, values, indices, axis, K, largest, largest, false);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
