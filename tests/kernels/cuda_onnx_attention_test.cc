// CUDA ONNX Attention (opset 23) against the CPU reference on fresh random
// inputs (outputs NaN-poisoned by the harness): 3-D and 4-D layouts, GQA,
// head sizes D != Dv, bool/float masks (broadcast, shorter than the keys),
// causal with past key/value and present outputs, softcap, fully masked
// rows, long key rows; fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {
const DType kFloatRuns[] = {DType::Float, DType::Float16, DType::BFloat16};

Tensor bool_mask(std::vector<int64_t> dims, float p_true) {
  Tensor u = uniform(dims, 0.f, 1.f);
  Tensor m(DType::Bool, dims);
  for (int64_t i = 0; i < m.numel(); ++i) m.data<uint8_t>()[i] = u.data<float>()[i] < p_true;
  return m;
}
}  // namespace

TEST_CASE("cuda ONNX Attention 4-D: GQA, D != Dv, float and bool masks", "[cuda][onnx_attention]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case plain("Attention", 3);
    plain.in(0, randn({2, 4, 5, 8})).in(1, randn({2, 2, 7, 8})).in(2, randn({2, 2, 7, 6}));
    plain.check(dt);
    Case fmask("Attention", 4);
    fmask.attr(Attribute::make_float("scale", 0.3f));
    fmask.in(0, randn({2, 4, 5, 8})).in(1, randn({2, 4, 7, 8})).in(2, randn({2, 4, 7, 8})).in(3, randn({1, 4, 5, 7}));
    fmask.check(dt);
    Case bmask("Attention", 4);  // mask [B, 1, 1, 5] shorter than the 7 keys; some rows fully masked
    bmask.in(0, randn({2, 2, 3, 16})).in(1, randn({2, 2, 7, 16})).in(2, randn({2, 2, 7, 16}));
    bmask.in(3, bool_mask({2, 1, 3, 5}, 0.4f), false);
    bmask.check(dt);
  }
}

TEST_CASE("cuda ONNX Attention: causal with past and present, 3-D, softcap, long rows", "[cuda][onnx_attention]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case past("Attention", 6, 3);
    past.attr(Attribute::make_int("is_causal", 1));
    past.in(0, randn({1, 4, 3, 8})).in(1, randn({1, 2, 3, 8})).in(2, randn({1, 2, 3, 8}));
    past.in(4, randn({1, 2, 5, 8})).in(5, randn({1, 2, 5, 8}));
    past.check(dt);
    Case three_d("Attention", 3);
    three_d.attr(Attribute::make_int("q_num_heads", 6)).attr(Attribute::make_int("kv_num_heads", 2));
    three_d.attr(Attribute::make_int("is_causal", 1)).attr(Attribute::make_float("softcap", 2.f));
    three_d.in(0, randn({2, 9, 6 * 12}, 2.f)).in(1, randn({2, 9, 2 * 12}, 2.f)).in(2, randn({2, 9, 2 * 12}));
    three_d.check(dt);
    Case long_rows("Attention", 3);  // keys > threads per block, head dim > threads per block
    long_rows.in(0, randn({1, 2, 3, 160}, 0.2f)).in(1, randn({1, 2, 1500, 160}, 0.2f)).in(2, randn({1, 2, 1500, 160}));
    long_rows.check(dt);
  }
}

TEST_CASE("cuda ONNX Attention: opset 25's sliding window with causal, past and a mask", "[cuda][onnx_attention]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case left("Attention", 3);
    left.attr(Attribute::make_int("is_causal", 1)).attr(Attribute::make_int("left_window_size", 2));
    left.in(0, randn({2, 2, 6, 8})).in(1, randn({2, 2, 6, 8})).in(2, randn({2, 2, 6, 8}));
    left.check(dt);
    Case both("Attention", 6, 3);  // the window around i + P: keys of the past in and out of it
    both.attr(Attribute::make_int("left_window_size", 3)).attr(Attribute::make_int("right_window_size", 1));
    both.in(0, randn({1, 4, 3, 8})).in(1, randn({1, 2, 3, 8})).in(2, randn({1, 2, 3, 8}));
    both.in(4, randn({1, 2, 4, 8})).in(5, randn({1, 2, 4, 8}));
    both.check(dt);
    Case masked("Attention", 4);  // a window of one key left, none right, and a bool mask: some rows empty
    masked.attr(Attribute::make_int("left_window_size", 1)).attr(Attribute::make_int("right_window_size", 0));
    masked.in(0, randn({2, 2, 5, 16})).in(1, randn({2, 2, 5, 16})).in(2, randn({2, 2, 5, 16}));
    masked.in(3, bool_mask({2, 1, 5, 5}, 0.4f), false);
    masked.check(dt);
  }
}
