// CUDA reductions (any axes, keepdims, axes as attribute or input,
// noop_with_empty_axes), Softmax/LogSoftmax (last and inner axes, short and
// long rows), CumSum and CumProd against the CPU reference kernels.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {
const DType kFloatRuns[] = {DType::Float, DType::Float16, DType::BFloat16};

struct AxesCase {
  std::vector<int64_t> shape, axes;
};
const AxesCase kAxes[] = {
    {{4, 7, 129}, {-1}},   {{4, 7, 129}, {1}},  {{4, 7, 129}, {0, 2}}, {{4, 7, 129}, {0}},
    {{3, 5000}, {1}},      {{2, 3, 4, 5}, {1, 2}}, {{33}, {0}},        {{2, 1, 9}, {1}},
    {{6, 2, 3}, {-2, -1}}, {{3, 3000, 2}, {1}}};
}  // namespace

TEST_CASE("cuda ReduceMean/Sum/Max/Min over any axes", "[cuda][reduce]") {
  if (!gpu_ready()) return;
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL2",
                         "ReduceL1"})
    for (const AxesCase& ac : kAxes)
      for (int keep = 0; keep < 2; ++keep)
        for (DType dt : kFloatRuns) {
          const std::string o = op;
          if (o == "ReduceProd" && dt != DType::Float) continue;
          Case c(op, 2);
          // ReduceProd over long axes under/overflows; keep its values near 1.
          c.in(0, o == "ReduceProd" ? uniform(ac.shape, 0.9f, 1.1f) : randn(ac.shape));
          c.in(1, ints1(ac.axes));  // axes as input (opset 18 form)
          c.attr(Attribute::make_int("keepdims", keep));
          INFO(op << " " << dims_str(ac.shape) << " axes " << dims_str(ac.axes) << " keepdims " << keep);
          c.check(dt, 1e-5, o == "ReduceProd" ? 1e-3 : 2e-4);
        }
}

TEST_CASE("cuda reductions: attribute axes, all axes, noop, integers", "[cuda][reduce]") {
  if (!gpu_ready()) return;
  Case attr("ReduceMean", 1);
  attr.attr(Attribute::make_ints("axes", {-1})).in(0, randn({5, 3, 77}));
  attr.check();
  Case all("ReduceSum", 1);
  all.attr(Attribute::make_int("keepdims", 0)).in(0, randn({3, 4, 5}));
  all.check();
  Case noop("ReduceSum", 2);
  noop.attr(Attribute::make_int("noop_with_empty_axes", 1)).in(0, randn({3, 4})).in(1, ints({}, {0}));
  noop.check();
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin"}) {
    Case i(op, 2);
    i.in(0, randint({4, 9, 5}, -100, 100)).in(1, ints1({1}));
    INFO(op << " int64");
    i.check();
  }
}

TEST_CASE("cuda Softmax and LogSoftmax", "[cuda][softmax]") {
  if (!gpu_ready()) return;
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
      {{2, 4, 16, 16}, -1}, {{3, 1000}, 1}, {{2, 3, 5000}, -1}, {{4, 7, 9}, 1}, {{4, 7, 9}, 0}, {{1}, 0}, {{5, 33}, -1}};
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (const auto& [shape, axis] : cases)
      for (DType dt : kFloatRuns) {
        Case c(op, 1);
        c.attr(Attribute::make_int("axis", axis)).in(0, randn(shape, 4.f, 50.f));  // large offset: max subtraction
        INFO(op << " " << dims_str(shape) << " axis " << axis);
        c.check(dt);
      }
  // Opset < 13 semantics (the Session's marker): 2-D [prod(before axis), prod(from axis)].
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    Case c(op, 1);
    c.attr(Attribute::make_int("axis", 1)).attr(Attribute::make_int("__fuseopt_softmax_2d", 1)).in(0, randn({2, 3, 4}));
    c.check();
  }
  // A fully masked row (finfo.min everywhere) gives a uniform row, not NaN.
  Tensor masked = randn({2, 8});
  for (int i = 0; i < 8; ++i) masked.data<float>()[i] = -3.4028234663852886e38f;
  Case m("Softmax", 1);
  m.attr(Attribute::make_int("axis", -1)).in(0, masked);
  m.check();
}

TEST_CASE("cuda CumSum", "[cuda][cumsum]") {
  if (!gpu_ready()) return;
  for (int exclusive = 0; exclusive < 2; ++exclusive)
    for (int reverse = 0; reverse < 2; ++reverse)
      for (int64_t axis : {0, 1, -1}) {
        Case f("CumSum", 2);
        f.attr(Attribute::make_int("exclusive", exclusive)).attr(Attribute::make_int("reverse", reverse));
        f.in(0, randn({5, 33, 7})).in(1, scalar_i64(axis));
        INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
        f.check();
        Case i("CumSum", 2);
        i.attr(Attribute::make_int("exclusive", exclusive)).attr(Attribute::make_int("reverse", reverse));
        i.in(0, randint({2, 17}, 0, 1)).in(1, scalar_i64(axis == 0 ? 0 : 1));  // position ids from a mask
        i.check();
      }
  Case scalar("CumSum", 2);
  scalar.in(0, randn({})).in(1, scalar_i64(0));
  scalar.check();
}

TEST_CASE("cuda CumProd (opset 26)", "[cuda][cumsum]") {
  if (!gpu_ready()) return;
  for (int exclusive = 0; exclusive < 2; ++exclusive)
    for (int reverse = 0; reverse < 2; ++reverse)
      for (int64_t axis : {0, 1, -1}) {
        Case f("CumProd", 2);  // factors near 1 keep 33 of them in fp16 range
        f.attr(Attribute::make_int("exclusive", exclusive)).attr(Attribute::make_int("reverse", reverse));
        f.in(0, randn({5, 33, 7}, 0.1f, 1.f)).in(1, scalar_i64(axis));
        INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
        for (DType dt : kFloatRuns) f.check(dt, 1e-5, dt == DType::Float ? 1e-4 : 2e-2);
        Case i("CumProd", 2);
        i.attr(Attribute::make_int("exclusive", exclusive)).attr(Attribute::make_int("reverse", reverse));
        i.in(0, randint({2, 17}, -2, 2)).in(1, scalar_i64(axis == 0 ? 0 : 1));
        i.check();
      }
}
