// CUDA fuseopt.RotaryEmbedding (the opset-23 kernel registered under the
// fuseopt domain) against the CPU reference on fresh random inputs (outputs
// NaN-poisoned by the harness): caches [1, S, R/2] broadcast over the batch
// and per-batch [B, S, R/2]; 4-D and 3-D inputs, interleaved, partial rotary;
// packed QKV with rotated_heads (V heads pass through); the warp-per-row kernel and the
// 16-byte-vector one (rows and rotated spans of whole vectors); fp32 and fp16/bf16 storage. Skipped (with a warning) without a GPU.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda fuseopt.RotaryEmbedding", "[cuda][rotary]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (int interleaved = 0; interleaved < 2; ++interleaved) {
      Case bcast("RotaryEmbedding", 3, 1, "fuseopt");
      bcast.attr(Attribute::make_int("interleaved", interleaved));
      bcast.in(0, randn({3, 4, 7, 64})).in(1, randn({1, 7, 32})).in(2, randn({1, 7, 32}));
      bcast.check(dt);
      Case per_batch("RotaryEmbedding", 3, 1, "fuseopt");
      per_batch.attr(Attribute::make_int("interleaved", interleaved));
      per_batch.in(0, randn({2, 3, 9, 16})).in(1, randn({2, 9, 8})).in(2, randn({2, 9, 8}));
      per_batch.check(dt);
      Case flat("RotaryEmbedding", 3, 1, "fuseopt");
      flat.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 3));
      flat.attr(Attribute::make_int("rotary_embedding_dim", 10));
      flat.in(0, randn({2, 5, 3 * 16})).in(1, randn({1, 5, 5})).in(2, randn({1, 5, 5}));
      flat.check(dt);
      // Packed [Q | K | V] (PackedRotary): 4 + 2 heads rotate, the 2 V heads pass through.
      Case packed("RotaryEmbedding", 3, 1, "fuseopt");
      packed.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 8));
      packed.attr(Attribute::make_int("rotated_heads", 6)).attr(Attribute::make_int("rotary_embedding_dim", 10));
      packed.in(0, randn({3, 5, 8 * 16})).in(1, randn({1, 5, 5})).in(2, randn({1, 5, 5}));
      packed.check(dt);
      // The same forms in whole 16-byte vectors (rotary_vec_kernel): Llama's packed 12 + 4 + 4
      // heads of 64, and a partial span (16 of 32) whose pass-through tail is a vector of its own.
      Case packed_vec("RotaryEmbedding", 3, 1, "fuseopt");
      packed_vec.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 20));
      packed_vec.attr(Attribute::make_int("rotated_heads", 16));
      packed_vec.in(0, randn({2, 13, 20 * 64})).in(1, randn({1, 13, 32})).in(2, randn({1, 13, 32}));
      packed_vec.check(dt);
      Case partial_vec("RotaryEmbedding", 3, 1, "fuseopt");
      partial_vec.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 6));
      partial_vec.attr(Attribute::make_int("rotated_heads", 4)).attr(Attribute::make_int("rotary_embedding_dim", 16));
      partial_vec.in(0, randn({3, 7, 6 * 32})).in(1, randn({3, 7, 8})).in(2, randn({3, 7, 8}));
      partial_vec.check(dt);
    }
}
