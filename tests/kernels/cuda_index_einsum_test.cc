// CUDA NonZero / Compress (host fallback: value-dependent shapes), OneHot,
// EyeLike, DepthToSpace / SpaceToDepth, ReduceLogSumExp and Einsum against
// the CPU reference kernels.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda NonZero and Compress", "[cuda][index]") {
  if (!gpu_ready()) return;
  for (const Tensor& x : {randint({3, 4, 5}, 0, 1), randint({17}, 0, 1, DType::Bool), randint({2, 9}, -1, 1, DType::Int32)}) {
    Case nz("NonZero", 1);
    nz.in(0, x);
    INFO("NonZero " << dtype_name(x.dtype));
    nz.check();
  }
  Case c("Compress", 2);
  c.attr(Attribute::make_int("axis", 1)).in(0, randn({3, 6, 2})).in(1, randint({5}, 0, 1, DType::Bool));
  c.check();
  Case flat("Compress", 2);
  flat.in(0, randint({3, 4}, -9, 9)).in(1, randint({12}, 0, 1, DType::Bool));
  flat.check();
}

TEST_CASE("cuda OneHot and EyeLike", "[cuda][index]") {
  if (!gpu_ready()) return;
  for (int64_t axis : {-1, 0, 1}) {
    Case c("OneHot", 3);
    c.attr(Attribute::make_int("axis", axis)).in(0, randint({3, 5}, -7, 6)).in(1, scalar_i64(7)).in(2, Tensor::from_floats({-1.f, 2.f}, {2}));
    INFO("axis " << axis);
    c.check();
  }
  for (int64_t k : {-1, 0, 2}) {
    Case e("EyeLike", 1);
    e.attr(Attribute::make_int("k", k)).in(0, randn({4, 6}));
    e.check();
    Case ei("EyeLike", 1);
    ei.attr(Attribute::make_int("k", k)).attr(Attribute::make_int("dtype", static_cast<int64_t>(DType::Int64))).in(0, randn({5, 3}));
    ei.check();
  }
}

TEST_CASE("cuda DepthToSpace and SpaceToDepth", "[cuda][movement]") {
  if (!gpu_ready()) return;
  for (const char* mode : {"DCR", "CRD"}) {
    Case d("DepthToSpace", 1);
    d.attr(Attribute::make_int("blocksize", 2)).attr(Attribute::make_string("mode", mode)).in(0, randn({2, 12, 3, 5}));
    INFO(mode);
    d.check();
  }
  Case s("SpaceToDepth", 1);
  s.attr(Attribute::make_int("blocksize", 3)).in(0, randint({2, 2, 6, 9}, -5, 5));
  s.check();
}

TEST_CASE("cuda ReduceLogSumExp", "[cuda][reduce]") {
  if (!gpu_ready()) return;
  for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{-1}, {0, 2}, {1}})
    for (DType dt : {DType::Float, DType::Float16}) {
      Case c("ReduceLogSumExp", 2);
      c.in(0, randn({3, 5, 70}, 3.f, 20.f)).in(1, ints1(axes));
      c.check(dt);
    }
}

TEST_CASE("cuda Einsum", "[cuda][einsum]") {
  if (!gpu_ready()) return;
  struct E {
    std::string eq;
    std::vector<std::vector<int64_t>> shapes;
  };
  const E cases[] = {
      {"bhqd,bhkd->bhqk", {{2, 3, 5, 7}, {2, 3, 6, 7}}},
      {"ij,jk", {{4, 9}, {9, 5}}},
      {"...ij,...jk->...ik", {{2, 1, 3, 4}, {5, 4, 6}}},
      {"ii->i", {{6, 6}}},
      {"bij->bji", {{2, 3, 4}}},
      {"i,i->", {{33}, {33}}},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
  };
  for (const E& e : cases)
    for (DType dt : {DType::Float, DType::Float16}) {
      Case c("Einsum", e.shapes.size());
      c.attr(Attribute::make_string("equation", e.eq));
      for (size_t i = 0; i < e.shapes.size(); ++i) c.in(i, randn(e.shapes[i]));
      INFO(e.eq);
      c.check(dt);
    }
}
