// ONNX RotaryEmbedding (opset 23) parameter resolution shared by the CPU
// reference (kernels/cpu/rotary_embedding.cc) and the CUDA kernel
// (kernels/cuda/rotary_embedding.cu). Semantics (ONNX reference):
//  X [B, H, S, D] or [B, S, H*D] (num_heads attribute); the first R =
//  rotary_embedding_dim (0 = D) dims of each head rotate, the rest pass;
//  cos/sin rows: cos_cache[position_ids[b, s]] ([max_pos, R/2] caches) or,
//  without position_ids, cos_cache[b, s] ([B, S, R/2] caches);
//  pairs (x1, x2) = (x[i], x[i + R/2]) or, interleaved, (x[2i], x[2i+1]):
//  x1' = cos * x1 - sin * x2,  x2' = sin * x1 + cos * x2.
// Without position_ids the caches may also be [1, S, R/2], broadcast over the
// batch (the exporters' position ids are [1, S]); `cache_batch` is then 1. For
// fuseopt.RotaryEmbedding (docs/fused_ops.md) that is the definition; for ONNX's
// op it is an extension: the spec asks for [B, S, R/2], but PyTorch's dynamo
// exporter (opset 23, every rotary decoder) writes [1, S, R/2] caches, which
// ONNX Runtime 1.2x refuses; broadcasting is the only meaning they can have.
// It also takes `rotated_heads` (3-D X only): only the first N heads of each
// token rotate and the others pass through unchanged, so one node rotates Q and
// K inside a packed [Q | K | V] projection (passes/fusion/packed_rotary.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/dm_util.h"

namespace fuseopt::dm {

struct RotaryParams {
  int64_t B = 0, S = 0, H = 0, D = 0, R = 0, max_pos = 0;
  int64_t cache_batch = 0;  // without position_ids: the caches' batch dim (B, or 1 for fuseopt's broadcast)
  int64_t rotated_heads = 0;  // heads (of H, per token) that rotate; the rest pass through; H unless fuseopt's attribute
  bool four_d = false, interleaved = false, has_pos = false;
};

inline RotaryParams resolve_rotary(KernelContext& ctx, const RtTensor& x, const RtTensor& cos_c, const RtTensor& sin_c,
                                   const RtTensor* pos) {
  RotaryParams p;
  DM_CHECK(ctx, x.rank() == 3 || x.rank() == 4, "input must be [B, H, S, D] or [B, S, hidden], got " << shape_str(x.shape));
  p.four_d = x.rank() == 4;
  p.B = x.shape[0];
  if (p.four_d) {
    p.H = x.shape[1];
    p.S = x.shape[2];
    p.D = x.shape[3];
  } else {
    p.S = x.shape[1];
    p.H = ctx.node().attr_int("num_heads", 0);
    DM_CHECK(ctx, p.H > 0 && x.shape[2] % p.H == 0, "3-D input needs num_heads dividing the hidden size " << x.shape[2]);
    p.D = x.shape[2] / p.H;
  }
  p.R = ctx.node().attr_int("rotary_embedding_dim", 0);
  if (p.R == 0) p.R = p.D;
  DM_CHECK(ctx, p.R > 0 && p.R <= p.D && p.R % 2 == 0,
           "rotary_embedding_dim " << p.R << " must be even and at most the head size " << p.D);
  p.interleaved = ctx.node().attr_int("interleaved", 0) != 0;
  p.rotated_heads = p.H;
  if (ctx.node().domain == "fuseopt" && ctx.node().attr_int("rotated_heads", 0) != 0) {
    p.rotated_heads = ctx.node().attr_int("rotated_heads", 0);
    DM_CHECK(ctx, !p.four_d && p.rotated_heads > 0 && p.rotated_heads <= p.H,
             "rotated_heads " << p.rotated_heads << " needs a 3-D input and must be in [1, num_heads = " << p.H << "]");
  }
  DM_CHECK(ctx, cos_c.shape == sin_c.shape, "cos_cache " << shape_str(cos_c.shape) << " and sin_cache "
                                                         << shape_str(sin_c.shape) << " differ");
  DM_CHECK(ctx, !cos_c.shape.empty() && cos_c.shape.back() == p.R / 2,
           "cos/sin caches' last dim must be rotary_embedding_dim / 2 = " << p.R / 2 << ", got " << shape_str(cos_c.shape));
  p.has_pos = pos != nullptr;
  if (p.has_pos) {
    DM_CHECK(ctx, pos->dtype == DType::Int64, "position_ids must be int64");
    DM_CHECK(ctx, pos->shape == std::vector<int64_t>({p.B, p.S}),
             "position_ids " << shape_str(pos->shape) << " must be [" << p.B << ", " << p.S << "]");
    DM_CHECK(ctx, cos_c.rank() == 2, "with position_ids the caches must be [max_position, R/2], got " << shape_str(cos_c.shape));
    p.max_pos = cos_c.shape[0];
  } else {
    p.cache_batch = p.B;
    if (cos_c.shape == std::vector<int64_t>({1, p.S, p.R / 2})) p.cache_batch = 1;
    DM_CHECK(ctx, cos_c.shape == std::vector<int64_t>({p.cache_batch, p.S, p.R / 2}),
             "without position_ids the caches must be [" << p.B << ", " << p.S << ", " << p.R / 2 << "], got "
                                                         << shape_str(cos_c.shape));
  }
  return p;
}

}  // namespace fuseopt::dm
