// CUDA data movement against the CPU reference kernels: Transpose, Slice
// (negative steps, clamping), Expand, Tile, Concat, Split, Pad (all modes),
// Trilu, Range, ConstantOfShape, Shape/Size, the view ops and Dropout. Every
// dtype moves as raw bytes, so int64/bool/fp16 cases run too.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {
// The same op over several element sizes.
std::vector<Tensor> typed_inputs(const std::vector<int64_t>& shape) {
  return {randn(shape), randint(shape, -1000, 1000), randint(shape, 0, 1, DType::Bool),
          convert_float(randn(shape), DType::Float16)};
}
}  // namespace

TEST_CASE("cuda Transpose", "[cuda][movement]") {
  if (!gpu_ready()) return;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{2, 16, 4, 33}, {0, 2, 1, 3}}, {{2, 4, 16, 33}, {0, 1, 3, 2}}, {{7, 129}, {}}, {{3, 1, 5, 2}, {3, 2, 1, 0}},
      {{5}, {0}}, {{2, 12, 64, 130}, {0, 1, 3, 2}}, {{33, 70}, {1, 0}}, {{3, 1, 31, 32}, {0, 1, 3, 2}}};
  for (const auto& [shape, perm] : cases)
    for (const Tensor& x : typed_inputs(shape)) {
      Case c("Transpose", 1);
      if (!perm.empty()) c.attr(Attribute::make_ints("perm", perm));
      c.in(0, x, false);
      INFO(dims_str(shape) << " perm " << dims_str(perm) << " " << dtype_name(x.dtype));
      c.check();
    }
}

TEST_CASE("cuda Slice", "[cuda][movement]") {
  if (!gpu_ready()) return;
  struct S {
    std::vector<int64_t> starts, ends, axes, steps;
  };
  const S cases[] = {{{1}, {-1}, {1}, {}},         {{0, 2}, {100, 9}, {0, 2}, {1, 3}}, {{-1}, {-1000}, {2}, {-1}},
                     {{5}, {2}, {1}, {-2}},        {{0}, {0}, {0}, {}},                {{2, 1}, {3, 4}, {}, {}},
                     {{-3}, {INT64_MAX}, {-1}, {}},     {{2}, {INT64_MAX}, {2}, {-3}},  // INT_MAX end, negative step:
                     {{-7}, {INT64_MAX}, {0}, {-2}}};                                    // runs to index 0 (as ORT)
  for (const S& s : cases)
    for (const Tensor& x : typed_inputs({4, 6, 11})) {
      Case c("Slice", 5);
      c.in(0, x, false).in(1, ints1(s.starts)).in(2, ints1(s.ends));
      if (!s.axes.empty()) c.in(3, ints1(s.axes));
      if (!s.steps.empty()) c.in(4, ints1(s.steps));
      INFO("starts " << dims_str(s.starts) << " ends " << dims_str(s.ends) << " " << dtype_name(x.dtype));
      c.check();
    }
}

TEST_CASE("cuda Expand and Tile", "[cuda][movement]") {
  if (!gpu_ready()) return;
  for (const Tensor& x : typed_inputs({3, 1, 5})) {
    Case e("Expand", 2);
    e.in(0, x, false).in(1, ints1({2, 3, 4, 5}));
    e.check();
    Case e2("Expand", 2);
    e2.in(0, x, false).in(1, ints1({1, 1}));  // shape smaller than input: broadcast keeps the input's
    e2.check();
    Case t("Tile", 2);
    t.in(0, x, false).in(1, ints1({2, 3, 1}));
    t.check();
  }
}

TEST_CASE("cuda Concat and Split", "[cuda][movement]") {
  if (!gpu_ready()) return;
  for (int64_t axis : {0, 1, -1})
    for (const Tensor& proto : typed_inputs({1})) {
      auto make = [&](std::vector<int64_t> s) {
        Tensor t = proto.dtype == DType::Float ? randn(s)
                   : proto.dtype == DType::Int64 ? randint(s, -9, 9)
                   : proto.dtype == DType::Bool  ? randint(s, 0, 1, DType::Bool)
                                                 : convert_float(randn(s), DType::Float16);
        return t;
      };
      std::vector<int64_t> a{2, 3, 5}, b{2, 3, 5}, c3{2, 3, 5};
      const int64_t ax = axis < 0 ? 2 : axis;
      b[ax] = 1;
      c3[ax] = 4;
      Case c("Concat", 3);
      c.attr(Attribute::make_int("axis", axis)).in(0, make(a), false).in(1, make(b), false).in(2, make(c3), false);
      INFO("Concat axis " << axis << " " << dtype_name(proto.dtype));
      c.check();

      Case s("Split", 2, 3);
      s.attr(Attribute::make_int("axis", axis)).in(0, make({4, 6, 10}), false).in(1, ints1({1, 2, axis == 0 ? 1 : axis == 1 ? 3 : 7}));
      s.check();
    }
  Case empty_split("Split", 2, 2);  // an empty split input counts as omitted
  empty_split.attr(Attribute::make_int("axis", 0)).in(0, randn({6, 3})).in(1, ints({}, {0}));
  empty_split.check();
  Case eq("Split", 1, 2);  // equal parts, no split input
  eq.attr(Attribute::make_int("axis", -1)).in(0, randn({3, 384}));
  eq.check();
  Case n("Split", 1, 3);  // opset 18 num_outputs, last chunk smaller
  n.attr(Attribute::make_int("axis", 1)).attr(Attribute::make_int("num_outputs", 3)).in(0, randn({2, 7}));
  n.check();
  // 16-byte pieces take the one-launch vector copy: a GQA QKV split in fp16
  // (64 + 16 + 16 halves per row), with an empty piece, and Concat back.
  Case qkv("Split", 2, 4);
  qkv.attr(Attribute::make_int("axis", -1))
      .in(0, convert_float(randn({2, 37, 96}), DType::Float16), false)
      .in(1, ints1({64, 16, 0, 16}));
  qkv.check();
  Case cat("Concat", 3);
  cat.attr(Attribute::make_int("axis", 2))
      .in(0, randn({3, 5, 8}), false)
      .in(1, randn({3, 5, 4}), false)
      .in(2, randn({3, 5, 12}), false);
  cat.check();
  Case cat1("Concat", 2);  // axis 1 of [B, S, D]: a KV-cache append
  cat1.attr(Attribute::make_int("axis", 1)).in(0, randn({2, 7, 16}), false).in(1, randn({2, 1, 16}), false);
  cat1.check();
  Case many("Split", 1, 9);  // more pieces than one launch takes: the copy_2d path
  many.attr(Attribute::make_int("axis", 1)).attr(Attribute::make_int("num_outputs", 9)).in(0, randn({3, 36}));
  many.check();
}

TEST_CASE("cuda Pad in every mode", "[cuda][movement]") {
  if (!gpu_ready()) return;
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    Case c("Pad", 3);
    c.attr(Attribute::make_string("mode", mode)).in(0, randn({2, 5, 7})).in(1, ints1({0, 2, 3, 1, 1, 2}));
    if (std::string(mode) == "constant") c.in(2, Tensor::scalar_float(-7.5f));
    INFO(mode);
    c.check();
  }
  Case crop("Pad", 2);  // negative pads crop
  crop.in(0, randint({4, 9}, -5, 5)).in(1, ints1({-1, 2, 0, -3}));
  crop.check();
}

TEST_CASE("cuda Trilu, Range, ConstantOfShape, Shape, Size", "[cuda][movement]") {
  if (!gpu_ready()) return;
  for (int upper = 0; upper < 2; ++upper)
    for (int64_t k : {-2, 0, 3}) {
      Case t("Trilu", 2);
      t.attr(Attribute::make_int("upper", upper)).in(0, randn({2, 5, 7})).in(1, scalar_i64(k));
      INFO("upper " << upper << " k " << k);
      t.check();
    }
  Case ri("Range", 3);
  ri.in(0, scalar_i64(3)).in(1, scalar_i64(-20)).in(2, scalar_i64(-3));
  ri.check();
  Case rf("Range", 3);
  rf.in(0, Tensor::scalar_float(0.5f)).in(1, Tensor::scalar_float(10.f)).in(2, Tensor::scalar_float(0.75f));
  rf.check();
  Case cs("ConstantOfShape", 1);
  cs.attr(Attribute::make_tensor("value", Tensor::from_ints({7}, {1}))).in(0, ints1({3, 1, 65}));
  cs.check();
  Case cf("ConstantOfShape", 1);
  cf.in(0, ints1({2, 9}));
  cf.check();
  Case sh("Shape", 1);
  sh.attr(Attribute::make_int("start", 1)).in(0, randn({2, 3, 4, 5}));
  sh.check();
  Case sz("Size", 1);
  sz.in(0, randn({2, 3, 4}));
  sz.check();
}

TEST_CASE("cuda view ops and Dropout", "[cuda][movement]") {
  if (!gpu_ready()) return;
  Case r("Reshape", 2);
  r.in(0, randn({2, 3, 4})).in(1, ints1({0, -1}));
  r.check();
  Case sq("Squeeze", 2);
  sq.in(0, randn({2, 1, 4, 1})).in(1, ints1({-1}));
  sq.check();
  Case us("Unsqueeze", 2);
  us.in(0, randint({2, 4}, 0, 9)).in(1, ints1({0, -1}));
  us.check();
  Case fl("Flatten", 1);
  fl.attr(Attribute::make_int("axis", 2)).in(0, randn({2, 3, 4, 5}));
  fl.check();
  Case id("Identity", 1);
  id.in(0, randint({5}, 0, 1, DType::Bool));
  id.check();
  Case dr("Dropout", 1, 2);
  dr.in(0, randn({3, 17}));
  dr.check();
}
