// CUDA LayerNormalization, BatchNormalization (kernels/cuda/norm.cu), pooling
// (pool.cu) and Conv (conv.cu) against the CPU reference kernels at odd sizes,
// fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {
const DType kFloatRuns[] = {DType::Float, DType::Float16, DType::BFloat16};
}

TEST_CASE("cuda LayerNormalization", "[cuda][norm]") {
  if (!gpu_ready()) return;
  for (int64_t d : {8, 37, 128, 768, 5000})
    for (DType dt : kFloatRuns)
      for (int with_b = 0; with_b < 2; ++with_b) {
        Case c("LayerNormalization", 3, 3);
        c.attr(Attribute::make_float("epsilon", 1e-5f));
        c.in(0, randn({3, 5, d}, 1.f, 4.f)).in(1, uniform({d}, 0.5f, 1.5f));
        if (with_b) c.in(2, randn({d}));
        INFO("D " << d << " bias " << with_b);
        c.check(dt);
      }
  Case two_axes("LayerNormalization", 3);  // normalise over the last two axes, Scale broadcast [1, D]
  two_axes.attr(Attribute::make_int("axis", -2)).in(0, randn({4, 3, 33})).in(1, uniform({1, 33}, 0.5f, 1.5f)).in(2, randn({3, 1}));
  two_axes.check();
}

// Rows beyond launch_norm's shared-memory row cache (51200 fp32 values) take its
// uncached kernel: vectorisable (60032) and scalar (60022) widths, Scale/B dense and
// broadcast over two normalised axes, all three outputs.
TEST_CASE("cuda LayerNormalization over rows longer than the row cache", "[cuda][norm]") {
  if (!gpu_ready()) return;
  for (int64_t half : {30016, 30011})
    for (DType dt : kFloatRuns) {
      Case dense("LayerNormalization", 3, 3);
      dense.attr(Attribute::make_int("axis", -2));
      dense.in(0, randn({3, 2, half}, 1.f, 4.f)).in(1, uniform({2, half}, 0.5f, 1.5f)).in(2, randn({2, half}));
      INFO("D " << 2 * half << " dense Scale/B");
      dense.check(dt);
      Case bcast("LayerNormalization", 3, 3);
      bcast.attr(Attribute::make_int("axis", -2));
      bcast.in(0, randn({3, 2, half}, 1.f, 4.f)).in(1, uniform({1, half}, 0.5f, 1.5f)).in(2, randn({2, 1}));
      INFO("D " << 2 * half << " broadcast Scale/B");
      bcast.check(dt);
    }
}

TEST_CASE("cuda BatchNormalization", "[cuda][norm]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case c("BatchNormalization", 5);
    c.in(0, randn({2, 7, 5, 9})).in(1, randn({7})).in(2, randn({7})).in(3, randn({7})).in(4, uniform({7}, 0.5f, 2.f));
    c.check(dt);
  }
}

TEST_CASE("cuda pooling", "[cuda][pool]") {
  if (!gpu_ready()) return;
  for (const char* op : {"MaxPool", "AveragePool"})
    for (int ceil = 0; ceil < 2; ++ceil)
      for (int include_pad = 0; include_pad < 2; ++include_pad)
        for (DType dt : kFloatRuns) {
          Case c(op, 1);
          c.attr(Attribute::make_ints("kernel_shape", {3, 3})).attr(Attribute::make_ints("strides", {2, 2}));
          c.attr(Attribute::make_ints("pads", {1, 1, 1, 1})).attr(Attribute::make_int("ceil_mode", ceil));
          if (std::string(op) == "AveragePool") c.attr(Attribute::make_int("count_include_pad", include_pad));
          c.in(0, randn({2, 3, 11, 14}));
          INFO(op << " ceil " << ceil << " include_pad " << include_pad);
          c.check(dt);
        }
  Case one_d("MaxPool", 1);
  one_d.attr(Attribute::make_ints("kernel_shape", {4})).attr(Attribute::make_string("auto_pad", "SAME_UPPER"));
  one_d.in(0, randn({2, 3, 17}));
  one_d.check();
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (DType dt : kFloatRuns) {
      Case g(op, 1);
      g.in(0, randn({3, 5, 7, 9}));
      INFO(op);
      g.check(dt);
    }
}

TEST_CASE("cuda Conv", "[cuda][conv]") {
  if (!gpu_ready()) return;
  struct C {
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> strides, pads, dil;
    bool bias;
  };
  const C cases[] = {
      {{2, 3, 16, 16}, {8, 3, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},    // ResNet block
      {{2, 3, 32, 32}, {16, 3, 8, 8}, 1, {8, 8}, {0, 0, 0, 0}, {1, 1}, true},   // ViT patch embedding
      {{1, 6, 13, 11}, {6, 2, 3, 3}, 3, {2, 1}, {0, 1, 2, 1}, {2, 1}, false},  // groups, dilation, odd sizes
      {{1, 4, 9, 9}, {4, 1, 3, 3}, 4, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},      // depthwise
      {{2, 5, 19}, {7, 5, 3}, 1, {2}, {1, 1}, {1}, true},                        // 1-D, direct kernel
      {{2, 5, 19}, {16, 5, 3}, 1, {1}, {2, 0}, {2}, false},                      // 1-D through the GEMM
      {{3, 24, 7, 9}, {32, 24, 1, 1}, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true},    // 1x1: X is the column matrix
      {{2, 16, 10, 10}, {32, 8, 3, 3}, 2, {2, 2}, {1, 0, 1, 0}, {1, 1}, true},   // 2 groups through the GEMM
  };
  for (const C& cc : cases)
    for (DType dt : kFloatRuns) {
      Case c("Conv", 3);
      c.attr(Attribute::make_int("group", cc.group)).attr(Attribute::make_ints("strides", cc.strides));
      c.attr(Attribute::make_ints("pads", cc.pads)).attr(Attribute::make_ints("dilations", cc.dil));
      c.in(0, randn(cc.x)).in(1, randn(cc.w, 0.3f));
      if (cc.bias) c.in(2, randn({cc.w[0]}));
      INFO("X " << dims_str(cc.x) << " W " << dims_str(cc.w) << " group " << cc.group);
      c.check(dt, 1e-4, 1e-4);
    }
}
