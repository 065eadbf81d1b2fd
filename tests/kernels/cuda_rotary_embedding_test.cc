// CUDA ONNX RotaryEmbedding (opset 23) against the CPU reference on fresh
// random inputs (outputs NaN-poisoned by the harness): 4-D and 3-D inputs,
// with and without position ids, interleaved, partial rotary dim (the warp-per-row kernel and
// the 16-byte-vector one); fp32 and
// fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda RotaryEmbedding", "[cuda][rotary]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (int interleaved = 0; interleaved < 2; ++interleaved) {
      Case four_d("RotaryEmbedding", 4);
      four_d.attr(Attribute::make_int("interleaved", interleaved));
      four_d.in(0, randn({2, 4, 7, 64})).in(1, randn({50, 32})).in(2, randn({50, 32}));
      four_d.in(3, randint({2, 7}, 0, 49));
      four_d.check(dt);
      Case three_d("RotaryEmbedding", 3);
      three_d.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 3));
      three_d.in(0, randn({2, 5, 3 * 16})).in(1, randn({2, 5, 8})).in(2, randn({2, 5, 8}));
      three_d.check(dt);
      Case partial("RotaryEmbedding", 4);
      partial.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("rotary_embedding_dim", 6));
      partial.in(0, randn({1, 2, 9, 10})).in(1, randn({12, 3})).in(2, randn({12, 3})).in(3, randint({1, 9}, 0, 11));
      partial.check(dt);
      // 3-D with position ids, partial span of whole vectors (the vector kernel's pass-through tail).
      Case three_d_pos("RotaryEmbedding", 4);
      three_d_pos.attr(Attribute::make_int("interleaved", interleaved)).attr(Attribute::make_int("num_heads", 3));
      three_d_pos.attr(Attribute::make_int("rotary_embedding_dim", 16));
      three_d_pos.in(0, randn({2, 11, 3 * 32})).in(1, randn({40, 8})).in(2, randn({40, 8}));
      three_d_pos.in(3, randint({2, 11}, 0, 39));
      three_d_pos.check(dt);
    }
}
