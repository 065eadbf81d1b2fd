// ONNX RotaryEmbedding (opset 23) on CUDA: one warp per head row; semantics
// in kernels/common/rotary_params.h, shared with the CPU reference. An
// out-of-range position id is reported through the backend's index-error
// slot (the Session raises it naming the node) and its row is written as 0.
#include "kernels/common/rotary_params.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/index_errors.h"
#include "kernels/cuda/pdl.cuh"

namespace fuseopt {
namespace cuda {
namespace {

// One warp per head row ([rows, D] view of X: 4-D rows are (b·H + h)·S + s, 3-D
// rows (b·S + s)·H + h), lanes over the (x1, x2) pairs and the pass-through
// tail: the row's batch and position are found once per row, with 32 pairs per
// warp step (the element-per-thread form spent most of its time in 64-bit
// index division).
constexpr int kRowsPerBlock = 8;

template <class T, class C>
__global__ void rotary_rows_kernel(const T* __restrict__ x, const C* __restrict__ cos_c, const C* __restrict__ sin_c,
                                   const int64_t* __restrict__ pos, T* __restrict__ y, int64_t rows, int S, int H,
                                   int D, int R, int rotated_heads, int64_t max_pos, bool four_d, bool interleaved,
                                   bool cache_bcast, IndexErrorSink errors, bool trigger_first) {
  // Programmatic dependent launch (pdl.cuh): x is the QKV GEMV's output. A few blocks: the
  // attention after it may start first (pdl_begin_trigger_first).
  cuda_pdl::pdl_begin_trigger_first(trigger_first);
  const int half = R / 2;
  const int lane = threadIdx.x;
  for (int64_t r = blockIdx.x * (int64_t)kRowsPerBlock + threadIdx.y; r < rows; r += (int64_t)gridDim.x * kRowsPerBlock) {
    int64_t b, s;
    if (four_d) {
      s = r % S;
      b = r / ((int64_t)H * S);
    } else {
      s = (r / H) % S;
      b = r / ((int64_t)S * H);
    }
    const T* xv = x + r * D;
    T* yv = y + r * D;
    if (!four_d && static_cast<int>(r % H) >= rotated_heads) {  // packed form: this head passes through
      for (int d = lane; d < D; d += 32) yv[d] = xv[d];
      continue;
    }
    for (int d = R + lane; d < D; d += 32) yv[d] = xv[d];
    int64_t row = (cache_bcast ? 0 : b) * S + s;
    if (pos) {
      row = pos[b * S + s];
      if (row < 0 || row >= max_pos) {
        if (lane == 0) report_bad_index(errors, row, max_pos);
        for (int d = lane; d < R; d += 32) yv[d] = store_c<T>(static_cast<compute_t<T>>(0.f));
        continue;
      }
    }
    const C* cr = cos_c + row * half;
    const C* sr = sin_c + row * half;
    for (int i = lane; i < half; i += 32) {
      const int i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
      const float x1 = float(load_c(xv[i1])), x2 = float(load_c(xv[i2]));
      const float c = float(load_c(cr[i])), sn = float(load_c(sr[i]));
      yv[i1] = store_c<T>(static_cast<compute_t<T>>(c * x1 - sn * x2));
      yv[i2] = store_c<T>(static_cast<compute_t<T>>(sn * x1 + c * x2));
    }
  }
}

// The common case on 16-byte vectors: a thread per V = 16 / sizeof(T) elements of a row (one
// vector, or for the half-split form the vectors at e and e + R/2 together), 32-bit index math.
// The warp-per-row kernel above spends ~40 us a layer on a 2048-token Llama prefill (48 head rows
// a token: three 64-bit divisions per row and 2-byte accesses), 7x its bytes (NOTES-perf.md v25).
// Taken when D and the rotated span split into whole vectors (rotary_vec_fits); the arithmetic per
// element is the same expression as the warp-per-row kernel's.
template <class T>
struct alignas(16) Vec16 {
  T v[16 / sizeof(T)];
};

template <class T, class C, bool INTERLEAVED>
__global__ void rotary_vec_kernel(const T* __restrict__ x, const C* __restrict__ cos_c, const C* __restrict__ sin_c,
                                  const int64_t* __restrict__ pos, T* __restrict__ y, int units, int upr, int S,
                                  int H, int R, int rotated_heads, int64_t max_pos, bool four_d, bool cache_bcast,
                                  IndexErrorSink errors, bool trigger_first) {
  cuda_pdl::pdl_begin_trigger_first(trigger_first);
  constexpr int V = 16 / sizeof(T);
  const int half = R / 2;
  for (int gid = blockIdx.x * blockDim.x + threadIdx.x; gid < units; gid += gridDim.x * blockDim.x) {
    const int r = gid / upr, e = (gid - r * upr) * V;  // row, first element of the unit in it
    int s, b;
    bool rotates = true;
    if (four_d) {
      s = r % S;
      b = r / (H * S);
    } else {
      const int token = r / H;
      rotates = r - token * H < rotated_heads;
      s = token % S;
      b = token / S;
    }
    const int64_t off = int64_t(r) * (upr * V) + e;
    const Vec16<T> a = *reinterpret_cast<const Vec16<T>*>(x + off);
    if (!rotates || e >= R) {  // a pass-through head, or the row's tail past the rotated span
      *reinterpret_cast<Vec16<T>*>(y + off) = a;
      continue;
    }
    if (!INTERLEAVED && e >= half) continue;  // the x2 half: written with its x1 vector
    int64_t row = int64_t(cache_bcast ? 0 : b) * S + s;
    bool bad = false;
    if (pos) {
      row = pos[int64_t(b) * S + s];
      bad = row < 0 || row >= max_pos;  // reported once a row; its rotated elements are written as 0
      if (bad && e == 0) report_bad_index(errors, row, max_pos);
    }
    const C* cr = cos_c + row * half;
    const C* sr = sin_c + row * half;
    Vec16<T> o1, o2;
    if constexpr (INTERLEAVED) {
#pragma unroll
      for (int i = 0; i < V / 2; ++i) {
        const float x1 = float(load_c(a.v[2 * i])), x2 = float(load_c(a.v[2 * i + 1]));
        const float c = bad ? 0.f : float(load_c(cr[e / 2 + i])), sn = bad ? 0.f : float(load_c(sr[e / 2 + i]));
        o1.v[2 * i] = store_c<T>(static_cast<compute_t<T>>(bad ? 0.f : c * x1 - sn * x2));
        o1.v[2 * i + 1] = store_c<T>(static_cast<compute_t<T>>(bad ? 0.f : sn * x1 + c * x2));
      }
      *reinterpret_cast<Vec16<T>*>(y + off) = o1;
    } else {
      const Vec16<T> a2 = *reinterpret_cast<const Vec16<T>*>(x + off + half);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float x1 = float(load_c(a.v[i])), x2 = float(load_c(a2.v[i]));
        const float c = bad ? 0.f : float(load_c(cr[e + i])), sn = bad ? 0.f : float(load_c(sr[e + i]));
        o1.v[i] = store_c<T>(static_cast<compute_t<T>>(bad ? 0.f : c * x1 - sn * x2));
        o2.v[i] = store_c<T>(static_cast<compute_t<T>>(bad ? 0.f : sn * x1 + c * x2));
      }
      *reinterpret_cast<Vec16<T>*>(y + off) = o1;
      *reinterpret_cast<Vec16<T>*>(y + off + half) = o2;
    }
  }
}

// Whether rotary_vec_kernel takes these arguments: rows of whole 16-byte vectors, the rotated span
// (interleaved: R; half-split: each half) too, both tensors 16-byte aligned, 32-bit unit indices.
template <class T>
bool rotary_vec_fits(const dm::RotaryParams& p, const void* x, const void* y, int64_t total) {
  constexpr int V = 16 / sizeof(T);
  const bool span = p.interleaved ? p.R % V == 0 : (p.R / 2) % V == 0;
  const auto a16 = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) == 0; };
  // Units below 2^30: the grid-stride index (+ at most SMs x 16 x 256 threads) stays below 2^31,
  // and so do the kernel's H·S and B·S (each at most the row count, total / D <= total / V).
  return p.D % V == 0 && span && a16(x) && a16(y) && total / V < (int64_t(1) << 30);
}

FUSEOPT_KERNEL(CudaRotaryEmbedding, "", "RotaryEmbedding", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& x = req_input(ctx, 0);
  const RtTensor& cos_c = req_input(ctx, 1);
  const RtTensor& sin_c = req_input(ctx, 2);
  const RtTensor* pos = opt_input(ctx, 3);
  DM_CHECK(ctx, cos_c.dtype == sin_c.dtype, "cos_cache and sin_cache dtypes differ");
  const dm::RotaryParams p = dm::resolve_rotary(ctx, x, cos_c, sin_c, pos);
  RtTensor* y = ctx.output(0, x.dtype, x.shape);
  const int64_t total = x.numel();
  if (!total) return;
  const IndexErrorSink errors = pos ? index_error_sink(ctx) : IndexErrorSink{nullptr, nullptr, 0};
  dispatch_float(ctx, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_float(ctx, cos_c.dtype, [&](auto ctag) {
      using C = typename decltype(ctag)::type;
      const int64_t rows = total / p.D;
      // With PDL: in a decode step this launch sits between the QKV GEMV and the attention, both
      // PDL-launched; a plain launch would serialise both edges.
      if (rotary_vec_fits<T>(p, x.data, y->data, total)) {
        const int upr = static_cast<int>(p.D / (16 / sizeof(T)));
        const int units = static_cast<int>(rows * upr);
        auto kernel = p.interleaved ? rotary_vec_kernel<T, C, true> : rotary_vec_kernel<T, C, false>;
        cuda_pdl::pdl_launch(kernel, grid_for(units), dim3(kThreads), 0, stream_of(ctx), x.ptr<T>(), cos_c.ptr<C>(),
                             sin_c.ptr<C>(), pos ? pos->ptr<int64_t>() : nullptr, y->ptr<T>(), units, upr,
                             static_cast<int>(p.S), static_cast<int>(p.H), static_cast<int>(p.R),
                             static_cast<int>(p.rotated_heads), p.max_pos, p.four_d, !pos && p.cache_batch == 1,
                             errors, cuda_pdl::trigger_first_enabled());
        return;
      }
      cuda_pdl::pdl_launch(
          rotary_rows_kernel<T, C>, grid_for(rows, kRowsPerBlock), dim3(32, kRowsPerBlock), 0, stream_of(ctx),
          x.ptr<T>(), cos_c.ptr<C>(), sin_c.ptr<C>(), pos ? pos->ptr<int64_t>() : nullptr, y->ptr<T>(), rows,
          static_cast<int>(p.S), static_cast<int>(p.H), static_cast<int>(p.D), static_cast<int>(p.R),
          static_cast<int>(p.rotated_heads), p.max_pos,
          p.four_d, p.interleaved, !pos && p.cache_batch == 1, errors, cuda_pdl::trigger_first_enabled());
    });
  });
  check_launch(ctx);
}

// fuseopt.RotaryEmbedding (the rotary fusion's op): the same kernel, whose
// caches may also broadcast over the batch (kernels/common/rotary_params.h).
KernelRegistrar cuda_fuseopt_rotary_registrar(KernelInfo{"fuseopt", "RotaryEmbedding", Backend::CUDA,
                                                         {DType::Float, DType::Float16, DType::BFloat16},
                                                         CudaRotaryEmbedding});

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
