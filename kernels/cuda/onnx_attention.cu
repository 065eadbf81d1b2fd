// ONNX Attention (opsets 23-25) on CUDA: a plain (not tensor-core) kernel with
// one block per query row: scores for every key into a per-block fp32 row of
// scratch, block max / sum, then each thread accumulates output dims over
// the keys (coalesced reads of V rows). Same semantics and checks as the CPU
// reference (kernels/common/onnx_attention_params.h). A second small kernel
// writes present_key / present_value. The fused fuseopt.Attention kernels
// remain the fast path for exported attention patterns; this covers models
// that already carry the ONNX op.
#include "kernels/common/onnx_attention_params.h"
#include "kernels/cuda/cuda_common.cuh"

namespace fuseopt {
namespace cuda {
namespace {

struct AttnDev {
  int64_t B, Hq, Hkv, Sq, Skv, P, T, D, Dv, mask_len, left_window, right_window;
  int64_t q_st[4], k_st[4], v_st[4], m_st[4];
  bool three_d, causal, has_mask, mask_bool;
  float scale, softcap;
};

AttnDev to_dev(const dm::OnnxAttentionParams& p) {
  AttnDev a{};
  a.B = p.B, a.Hq = p.Hq, a.Hkv = p.Hkv, a.Sq = p.Sq, a.Skv = p.Skv, a.P = p.P, a.T = p.T, a.D = p.D, a.Dv = p.Dv;
  a.mask_len = p.mask_len;
  a.left_window = p.left_window, a.right_window = p.right_window;
  for (int i = 0; i < 4; ++i) a.q_st[i] = p.q_st[i], a.k_st[i] = p.k_st[i], a.v_st[i] = p.v_st[i], a.m_st[i] = p.m_st[i];
  a.three_d = p.three_d, a.causal = p.causal, a.has_mask = p.has_mask, a.mask_bool = p.mask_bool;
  a.scale = p.scale, a.softcap = p.softcap;
  return a;
}

template <class T>
__device__ __forceinline__ float kv_at(const T* cur, const T* past, const int64_t (&st)[4], int64_t P, int64_t H,
                                       int64_t Dh, int64_t b, int64_t h, int64_t j, int64_t d) {
  if (j < P) return float(load_c(past[((b * H + h) * P + j) * Dh + d]));
  return float(load_c(cur[b * st[0] + h * st[1] + (j - P) * st[2] + d]));
}

template <class T, class M>
__global__ void onnx_attention_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                      const M* __restrict__ mask, const T* __restrict__ past_k,
                                      const T* __restrict__ past_v, T* __restrict__ y, float* __restrict__ scratch,
                                      AttnDev a) {
  __shared__ float shm[32];
  const float neg_inf = -INFINITY;
  float* s = scratch + blockIdx.x * a.T;
  const int64_t rows = a.B * a.Hq * a.Sq, group = a.Hq / a.Hkv;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t i = r % a.Sq, h = (r / a.Sq) % a.Hq, b = r / (a.Sq * a.Hq), hk = h / group;
    const T* qr = q + b * a.q_st[0] + h * a.q_st[1] + i * a.q_st[2];
    float mx = neg_inf, allowed = 0.f;
    for (int64_t j = threadIdx.x; j < a.T; j += blockDim.x) {
      float bias = 0.f;
      if (a.has_mask) {
        if (j >= a.mask_len) {
          bias = neg_inf;
        } else {
          const int64_t off = b * a.m_st[0] + h * a.m_st[1] + i * a.m_st[2] + j * a.m_st[3];
          if constexpr (std::is_same_v<M, bool>) bias = mask[off] ? 0.f : neg_inf;
          else bias = float(load_c(mask[off]));
        }
      }
      if (a.causal && j > i + a.P) bias = neg_inf;
      if (!dm::window_keeps(a.left_window, a.right_window, i, a.P, j)) bias = neg_inf;
      if (bias != neg_inf) allowed = 1.f;
      float dot = 0.f;
      for (int64_t d = 0; d < a.D; ++d)
        dot += float(load_c(qr[d])) * kv_at(k, past_k, a.k_st, a.P, a.Hkv, a.D, b, hk, j, d);
      float sc = dot * a.scale;
      if (a.softcap > 0.f) sc = a.softcap * tanhf(sc / a.softcap);
      s[j] = sc + bias;
      mx = fmaxf(mx, s[j]);
    }
    mx = block_max(mx, shm, neg_inf);
    allowed = block_sum(allowed, shm);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < a.T; j += blockDim.x) {
      const float e = allowed > 0.f ? expf(s[j] - mx) : 0.f;
      s[j] = e;
      sum += e;
    }
    sum = block_sum(sum, shm);  // its barriers also publish s[] to the block
    T* yr = a.three_d ? y + (b * a.Sq + i) * a.Hq * a.Dv + h * a.Dv : y + ((b * a.Hq + h) * a.Sq + i) * a.Dv;
    for (int64_t d = threadIdx.x; d < a.Dv; d += blockDim.x) {
      float acc = 0.f;
      if (allowed > 0.f)
        for (int64_t j = 0; j < a.T; ++j)
          if (s[j] != 0.f) acc += s[j] * kv_at(v, past_v, a.v_st, a.P, a.Hkv, a.Dv, b, hk, j, d);
      yr[d] = store_c<T>(static_cast<compute_t<T>>(allowed > 0.f ? acc / sum : 0.f));
    }
    __syncthreads();  // s[] and shm are reused by the next row
  }
}

template <class T>
__global__ void present_kernel(const T* __restrict__ cur, const T* __restrict__ past, T* __restrict__ out,
                               int64_t total, AttnDev a, int64_t Dh, bool is_value) {
  CUDA_GRID_STRIDE(e, total) {
    const int64_t d = e % Dh, j = (e / Dh) % a.T, h = (e / (Dh * a.T)) % a.Hkv, b = e / (Dh * a.T * a.Hkv);
    const float v = kv_at(cur, past, is_value ? a.v_st : a.k_st, a.P, a.Hkv, Dh, b, h, j, d);
    out[e] = store_c<T>(static_cast<compute_t<T>>(v));
  }
}

FUSEOPT_KERNEL(CudaOnnxAttention, "", "Attention", Backend::CUDA, {DType::Float, DType::Float16, DType::BFloat16}) {
  const RtTensor& q = req_input(ctx, 0);
  const RtTensor& k = req_input(ctx, 1);
  const RtTensor& v = req_input(ctx, 2);
  const RtTensor* mask = opt_input(ctx, 3);
  const RtTensor* past_k = opt_input(ctx, 4);
  const RtTensor* past_v = opt_input(ctx, 5);
  for (const RtTensor* t : {&k, &v, past_k, past_v})
    DM_CHECK(ctx, !t || t->dtype == q.dtype, "Q, K, V and the past tensors must share a dtype");
  const dm::OnnxAttentionParams p = dm::resolve_onnx_attention(ctx, q, k, v, mask, past_k, past_v);
  RtTensor* y = ctx.output(0, q.dtype, p.y_shape);
  RtTensor* pk_out = wants_output(ctx, 1) ? ctx.output(1, q.dtype, p.present_k_shape) : nullptr;
  RtTensor* pv_out = wants_output(ctx, 2) ? ctx.output(2, q.dtype, p.present_v_shape) : nullptr;
  const AttnDev a = to_dev(p);
  const int64_t rows = p.B * p.Hq * p.Sq;
  dispatch_float(ctx, q.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ppk = past_k ? past_k->ptr<T>() : nullptr;
    const T* ppv = past_v ? past_v->ptr<T>() : nullptr;
    if (pk_out && pk_out->numel())
      present_kernel<T><<<grid_for(pk_out->numel()), kThreads, 0, stream_of(ctx)>>>(k.ptr<T>(), ppk, pk_out->ptr<T>(),
                                                                                  pk_out->numel(), a, p.D, false);
    if (pv_out && pv_out->numel())
      present_kernel<T><<<grid_for(pv_out->numel()), kThreads, 0, stream_of(ctx)>>>(v.ptr<T>(), ppv, pv_out->ptr<T>(),
                                                                                  pv_out->numel(), a, p.Dv, true);
    if (!rows || !p.Dv) return;
    if (!p.T) {  // no keys at all: every row is fully masked
      check_cuda(ctx, cudaMemsetAsync(y->data, 0, y->nbytes(), stream_of(ctx)), "zero Y");
      return;
    }
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 1024));
    float* scratch = static_cast<float*>(ctx.scratch(static_cast<size_t>(blocks) * p.T * sizeof(float)));
    auto launch = [&](auto mtag) {
      using M = typename decltype(mtag)::type;
      onnx_attention_kernel<T, M><<<blocks, 128, 0, stream_of(ctx)>>>(
          q.ptr<T>(), k.ptr<T>(), v.ptr<T>(), mask ? mask->ptr<M>() : nullptr, ppk, ppv, y->ptr<T>(), scratch, a);
    };
    if (mask && mask->dtype == DType::Bool) launch(Tag<bool>{});
    else if (mask) dispatch_float(ctx, mask->dtype, launch);
    else launch(Tag<T>{});
  });
  check_launch(ctx);
}

}  // namespace
}  // namespace cuda
}  // namespace fuseopt
