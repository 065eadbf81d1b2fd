// CUDA kernel for fuseopt.Attention: reads inputs and attributes exactly as
// kernels/cpu/fused_attention.cc does, then one flash-style launch.
//   inputs : 0 query (packed QKV [B,S,(H+2Hkv)·Dh] when key/value are absent,
//            else Q [B,S,H·Dh]), 1 key [B,Skv,Hkv·Dh]?, 2 value [B,Skv,Hkv·Dv]?,
//            3 mask [B,Skv]?, 4 attn_bias (broadcastable to [B,H,S,Skv])?,
//            5 past_key [B,Hkv,Sp,Dh]?, 6 past_value [B,Hkv,Sp,Dv]? (both or neither),
//            7 sinks [H]? (float32/float16/bfloat16; fp32 on the device for the kernels: the
//            generic and mma.sync ones take it, the Hopper and decode kernels are skipped)
//   outputs: Y [B,S,H·Dv], with a past also present_key/present_value
//            [B,Hkv,Sp+Skv,D] = past ++ new keys (one copy kernel per tensor; the present is
//            what the kernels read in place through their head strides). S = 1 over a cache: the
//            split-KV (flash-decoding) kernel, fused_attention_decode.cu (kFlashDecodeMinKeys).
//   attrs  : num_heads, kv_num_heads (= num_heads), scale (= 1/sqrt(Dh)),
//            causal, mask_filter_value (= -inf), masked_rows_zero (= 0), softcap (= 0: none; > 0 runs the generic kernel),
//            window (= 0: none; where it hides keys, i.e. past + new keys > window, the mma.sync or generic kernel)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/fused_attention_params.h"
#include "kernels/cuda/fused_attention_decode.h"
#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/float_convert.h"
#include "kernels/cuda/fused_common.h"
#include "kernels/cuda/fused_launch.cuh"

namespace fuseopt {


#define ATT_CHECK(cond, msg) FUSE_CHECK(cond, ctx.node().label() << ": " << msg)

FUSEOPT_KERNEL(CudaFusedAttention, "fuseopt", "Attention", Backend::CUDA,
               {DType::Float, DType::Float16, DType::BFloat16}) {
  const Node& node = ctx.node();
  const dm::AttentionInputs in = dm::attention_inputs(ctx);  // checks shared with the CPU reference
  const RtTensor* q = in.q;
  const RtTensor* mask = in.mask;
  const RtTensor* bias = in.bias;
  const DType dt = q->dtype;
  ATT_CHECK(cuda_fused::is_gpu_float(dt), "CUDA Attention supports float/float16/bfloat16, got " << dtype_name(dt));
  const dm::AttentionLayout l = dm::resolve_attention_layout(
      ctx, in, {dt, "key and value must have the query's dtype", "past_key/past_value must have the query's dtype"});
  const int64_t H = l.H, Hkv = l.Hkv, B = l.B, S = l.S, Dh = l.Dh, Dv = l.Dv;
  int64_t Skv = l.Skv;

  cuda_fused::AttentionArgs a;
  a.dtype = dt;
  const size_t esz = dtype_size(dt);
  if (l.packed) {
    const int64_t row = q->shape[2];
    a.q = q->data;
    a.k = static_cast<const char*>(q->data) + H * Dh * esz;
    a.v = static_cast<const char*>(q->data) + (H + Hkv) * Dh * esz;
    a.q_seq_stride = a.k_seq_stride = a.v_seq_stride = row;
    a.q_batch_stride = a.k_batch_stride = a.v_batch_stride = S * row;
  } else {
    a.q = q->data;
    a.k = in.k->data;
    a.v = in.v->data;
    a.q_seq_stride = H * Dh;
    a.q_batch_stride = S * H * Dh;
    a.k_seq_stride = Hkv * Dh;
    a.k_batch_stride = Skv * Hkv * Dh;
    a.v_seq_stride = Hkv * Dv;
    a.v_batch_stride = Skv * Hkv * Dv;
  }
  const RtTensor* past_k = in.past_k;
  const RtTensor* past_v = in.past_v;
  // One new token over a cache: the split-KV decode kernel reads the present directly.
  // FUSEOPT_FLASH_DECODE=1/0 forces it on/off; unset, it runs from kFlashDecodeMinKeys keys on
  // (below that the prefill kernels' fewer, longer blocks win: NOTES-perf.md v9).
  const char* fd_env = std::getenv("FUSEOPT_FLASH_DECODE");
  const int64_t total_keys = l.Sp + Skv;
  const bool fd_on = fd_env && *fd_env ? std::string(fd_env) == "1" : total_keys >= cuda_fused::kFlashDecodeMinKeys;
  const float softcap = node.attr_float("softcap", 0.0f);
  // The node's numeric attributes, read once for whichever path runs.
  const float scale = node.has_attr("scale") ? node.attr_float("scale", 1.0f) : 1.0f / std::sqrt(static_cast<float>(Dh));
  const float fill = node.attr_float("mask_filter_value", -std::numeric_limits<float>::infinity());
  const bool rows_zero = node.attr_int("masked_rows_zero", 0) != 0;
  ATT_CHECK(!(softcap < 0.0f) && !std::isnan(softcap), "softcap " << softcap << " must be >= 0");
  const int64_t window = node.attr_int("window", 0);
  ATT_CHECK(window >= 0, "window " << window << " must be >= 0 (0: no sliding window)");
  // A window hides a key only when the keys outnumber it (the farthest query-key distance is
  // total_keys - 1); below that the paths without a window give the same result.
  const bool window_hides = window > 0 && total_keys > window;
  const RtTensor* sinks = in.sinks;
  if (sinks) dm::check_attention_sinks(ctx, *sinks, H, /*half_ok=*/true);
  // The decode kernels neither soft-cap, slide a window nor take sinks (launch_attention sends
  // those to the generic / mma.sync kernels).
  const bool flash_decode = past_k && S == 1 && !bias && !sinks && softcap == 0.0f && !window_hides && fd_on &&
                            cuda_fused::flash_decode_supported(int(Dh), int(Dv), int(H), int(Hkv));
  // A KV cache the session holds (Session::hold_kv_cache): the pasts are views of its blocks
  // (seq_capacity rows per (b, h)) and the presents are the same blocks grown in place, so only
  // the new rows are written. Asked for once: the paths below share them.
  RtTensor* held_k = nullptr;
  RtTensor* held_v = nullptr;
  int64_t cap = 0;
  if (past_k && (past_k->seq_capacity > 0 || past_v->seq_capacity > 0)) {
    cap = past_k->seq_capacity;
    const int64_t St = l.Sp + Skv;
    ATT_CHECK(past_v->seq_capacity == cap && cap >= St && ctx.num_outputs() > 2,
              "past_key/past_value are views of a held KV cache of " << cap << " positions that cannot take " << St);
    held_k = ctx.cache_output(1, 5, dt, {B, Hkv, St, Dh});
    held_v = ctx.cache_output(2, 6, dt, {B, Hkv, St, Dv});
    ATT_CHECK(held_k && held_v, "past_key/past_value are views of a held KV cache but the presents are not held");
  }
  // Outputs are allocated once (the one-launch decode below may decline after allocating them).
  RtTensor* outs[3] = {nullptr, nullptr, nullptr};
  auto out_of = [&](size_t i, const std::vector<int64_t>& shape) -> RtTensor* {
    if (!outs[i]) outs[i] = ctx.output(i, dt, shape);
    return outs[i];
  };
  // One new token over a cache: append and attention in ONE launch (fused_attention_decode_append.cu:
  // the cache is read once, from the past, and written to the present on the way). FUSEOPT_DECODE_APPEND
  // =0 sends the step to the two-launch paths below; FUSEOPT_FLASH_DECODE=0 does too (prefill kernels).
  const bool fd_off = fd_env && *fd_env && std::string(fd_env) == "0";
  if (past_k && S == 1 && Skv == 1 && !bias && !sinks && softcap == 0.0f && !window_hides && !fd_off && B > 0 &&
      cuda_fused::decode_append_mode() != 0) {
    const int64_t St = l.Sp + 1;
    if (mask) dm::check_attention_mask(ctx, *mask, B, St);
    cuda_fused::DecodeAppend d;
    d.dt = dt;
    d.q = a.q;
    d.q_batch_stride = a.q_batch_stride;
    d.past_k = past_k->data;
    d.past_v = past_v->data;
    d.new_k = a.k;
    d.new_v = a.v;
    d.new_k_batch = a.k_batch_stride;
    d.new_v_batch = a.v_batch_stride;
    if (held_k) {
      d.present_k = held_k->data;
      d.present_v = held_v->data;
      d.past_rows = d.present_rows = cap;
      d.in_place = true;
    } else {
      d.present_k = ctx.num_outputs() > 1 ? out_of(1, {B, Hkv, St, Dh})->data : nullptr;
      d.present_v = ctx.num_outputs() > 2 ? out_of(2, {B, Hkv, St, Dv})->data : nullptr;
    }
    d.mask = mask ? mask->data : nullptr;
    d.mask_dtype = mask ? mask->dtype : DType::Bool;
    d.mask_stable = mask && ctx.input_is_run_stable(3);
    d.y = out_of(0, {B, S, H * Dv})->data;
    d.B = B;
    d.H = H;
    d.Hkv = Hkv;
    d.Sp = l.Sp;
    d.Dh = Dh;
    d.Dv = Dv;
    d.scale = scale;
    d.fill = fill;
    d.rows_zero = rows_zero;
    if (cuda_fused::launch_decode_append(d, cuda_fused::stream_of(ctx))) {
      FUSED_LAUNCH_CHECK(node.label());
      return;
    }
  }
  void* decode_scratch = nullptr;  // flash_decode's, allocated before the append (which zeroes its counters)
  if (past_k) {
    const int64_t Sp = l.Sp;
    const int64_t St = Sp + Skv;
    cudaStream_t st = cuda_fused::stream_of(ctx);
    // One launch for K and V (fused_attention_kv_cache.cu): present[b, h, t] = past, then the
    // new rows. Every attention kernel reads the present in place ([B, Hkv, St, D]: seq stride
    // D, head stride St·D), so there is no second, re-laid-out copy.
    auto present_of = [&](size_t out, int64_t d) -> void* {
      RtTensor* pres = ctx.num_outputs() > out ? out_of(out, {B, Hkv, St, d}) : nullptr;
      return pres ? pres->data : ctx.scratch(size_t(B * Hkv * St * d) * esz);
    };
    // Held cache: only the new rows, written at row Sp of each (b, h) of the block (rows = cap).
    const int64_t rows = held_k ? cap : St;
    char* held_k_row = held_k ? static_cast<char*>(held_k->data) + size_t(Sp * Dh) * esz : nullptr;
    char* held_v_row = held_v ? static_cast<char*>(held_v->data) + size_t(Sp * Dv) * esz : nullptr;
    const cuda_fused::KvAppend k{held_k ? nullptr : past_k->data, a.k, a.k_seq_stride, a.k_batch_stride,
                                 held_k ? held_k_row : present_of(1, Dh), Dh, rows};
    const cuda_fused::KvAppend v{held_v ? nullptr : past_v->data, a.v, a.v_seq_stride, a.v_batch_stride,
                                 held_v ? held_v_row : present_of(2, Dv), Dv, rows};
    // The decode kernel's scratch now, so the append zeroes its arrival counters in passing.
    if (flash_decode)
      decode_scratch = ctx.scratch(cuda_fused::flash_decode_scratch_bytes(dt, int(B), int(H), int(Hkv), int(St),
                                                                          int(Dh), int(Dv)));
    cuda_fused::launch_kv_append_pair(esz, k, v, B, Hkv, held_k ? 0 : Sp, held_k ? Skv : St, st, decode_scratch,
                                      decode_scratch ? cuda_fused::flash_decode_counter_bytes(int(B), int(H)) : 0);
    FUSED_LAUNCH_CHECK(node.label());
    a.k = held_k ? held_k->data : k.present;
    a.k_seq_stride = Dh;
    a.k_head_stride = rows * Dh;
    a.k_batch_stride = Hkv * rows * Dh;
    a.v = held_v ? held_v->data : v.present;
    a.v_seq_stride = Dv;
    a.v_head_stride = rows * Dv;
    a.v_batch_stride = Hkv * rows * Dv;
    Skv = St;
  }
  a.B = static_cast<int>(B);
  a.H = static_cast<int>(H);
  a.Hkv = static_cast<int>(Hkv);
  a.Sq = static_cast<int>(S);
  a.Skv = static_cast<int>(Skv);
  a.Dh = static_cast<int>(Dh);
  a.Dv = static_cast<int>(Dv);
  ATT_CHECK(B < 65536 && H < 65536 && S < (int64_t(1) << 30) && Skv < (int64_t(1) << 30), "sizes too large");
  a.scale = scale;
  a.causal = node.attr_int("causal", 0) != 0;
  a.mask_filter_value = fill;
  a.masked_rows_zero = rows_zero;
  a.softcap = softcap;
  a.window = window_hides ? static_cast<int>(std::min<int64_t>(window, int64_t(1) << 30)) : 0;

  if (mask) {
    dm::check_attention_mask(ctx, *mask, B, Skv);
    a.mask = mask->data;
    a.mask_dtype = mask->dtype;
  }
  if (bias) {
    ATT_CHECK(bias->dtype == DType::Bool || cuda_fused::is_gpu_float(bias->dtype),
              "attn_bias must be float or bool, got " << dtype_name(bias->dtype));
    const std::array<int64_t, 4> strides = dm::attention_bias_strides(ctx, *bias, B, H, S, Skv);
    a.bias = bias->data;
    a.bias_dtype = bias->dtype;
    a.bias_sb = strides[0];
    a.bias_sh = strides[1];
    a.bias_si = strides[2];
    a.bias_sj = strides[3];
  }
  if (sinks && sinks->dtype == DType::Float) {
    a.sinks = sinks->ptr<float>();
  } else if (sinks) {  // half sinks: widened once to the fp32 [H] the kernels read
    float* wide = static_cast<float*>(ctx.scratch(size_t(H) * sizeof(float)));
    ATT_CHECK(cuda::launch_float_convert(wide, DType::Float, sinks->data, sinks->dtype, H, cuda_fused::stream_of(ctx)),
              "cannot widen " << dtype_name(sinks->dtype) << " sinks");
    a.sinks = wide;
  }
  RtTensor* y = out_of(0, {B, S, H * Dv});
  if (y->numel() == 0) return;
  if (Skv == 0) {  // no keys: the reference's weighted sum is empty, i.e. zeros
    FUSED_CUDA_CHECK(cudaMemsetAsync(y->data, 0, y->nbytes(), cuda_fused::stream_of(ctx)), node.label());
    return;
  }
  a.y = y->data;
  if (flash_decode) {
    cuda_fused::launch_flash_decode(dt, a.q, a.q_batch_stride, a.k, a.v, a.mask, a.mask_dtype, a.y, decode_scratch,
                                    a.B, a.H, a.Hkv, a.Skv, a.Dh, a.Dv, a.scale, a.mask_filter_value,
                                    a.masked_rows_zero, cuda_fused::stream_of(ctx), /*counters_zeroed=*/true,
                                    held_k ? int(cap) : 0);
    FUSED_LAUNCH_CHECK(node.label());
    return;
  }
  if (a.mask && a.window == 0 && a.softcap == 0.f && cuda_fused::mask_prefix_exact(a.mask_filter_value) &&
      cuda_fused::hopper_attention_applies(a)) {
    // The mask's per-batch key counts (the Hopper kernel's varlen path, AttentionArgs::mask_prefix):
    // computed by the first attention of the execution that reads this mask, read by the rest.
    bool fill_it = false;
    int* prefix = static_cast<int*>(ctx.shared_derived(3, "attention_mask_prefix", size_t(B) * sizeof(int), &fill_it));
    if (prefix && fill_it)
      cuda_fused::launch_mask_prefix(a.mask, a.mask_dtype, a.B, a.Skv, prefix, cuda_fused::stream_of(ctx));
    a.mask_prefix = prefix;
  }
  cuda_fused::launch_attention(a, cuda_fused::stream_of(ctx));
}

}  // namespace fuseopt
