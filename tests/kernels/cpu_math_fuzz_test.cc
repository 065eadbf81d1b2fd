// Malformed inputs never crash the math kernels: random shapes and attribute
// values (valid or not) either run or throw fuseopt::Error.
#include <catch2/catch.hpp>

#include <random>

#include "kernels/cpu_math_test_util.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

std::vector<int64_t> random_dims(std::mt19937& rng, int max_rank, int max_dim = 4) {
  std::vector<int64_t> d(rng() % (max_rank + 1));
  for (auto& x : d) x = static_cast<int64_t>(rng() % (max_dim + 1));  // zero-size dims included
  return d;
}
std::vector<int64_t> random_ints(std::mt19937& rng, int max_len, int lo, int hi) {
  std::vector<int64_t> v(rng() % (max_len + 1));
  for (auto& x : v) x = lo + static_cast<int64_t>(rng() % (hi - lo + 1));
  return v;
}

int g_ran = 0, g_rejected = 0;

// Runs t; success or Error are both fine, anything else fails the test.
void run_or_error(OpTest& t) {
  try {
    t.run();
    ++g_ran;
  } catch (const Error&) {
    ++g_rejected;
  }
}

}  // namespace

TEST_CASE("math kernels survive random shapes and attributes", "[cpu][fuzz]") {
  std::mt19937 rng(12345);
  const char* binaries[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "PRelu"};
  const char* reduces[] = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"};
  for (int iter = 0; iter < 300; ++iter) {
    INFO("iteration " << iter);
    {
      OpTest t(binaries[rng() % 9]);
      t.input("a", pat(random_dims(rng, 3))).input("b", pat2(random_dims(rng, 3)));
      run_or_error(t);
    }
    {
      OpTest t(rng() % 2 ? "Softmax" : "LogSoftmax");
      t.input("x", pat(random_dims(rng, 3))).attr(Attribute::make_int("axis", static_cast<int>(rng() % 9) - 4));
      run_or_error(t);
    }
    {
      OpTest t(reduces[rng() % 5]);
      t.input("x", pat(random_dims(rng, 3)));
      std::vector<int64_t> axes = random_ints(rng, 3, -4, 3);
      if (rng() % 2) t.input("axes", ints(axes, {static_cast<int64_t>(axes.size())}));
      else t.attr(Attribute::make_ints("axes", axes));
      t.attr(Attribute::make_int("keepdims", rng() % 2));
      run_or_error(t);
    }
    {
      OpTest t("ReduceSum");
      std::vector<int64_t> axes = random_ints(rng, 3, -4, 3);
      t.input("x", pat(random_dims(rng, 3))).input("axes", ints(axes, {static_cast<int64_t>(axes.size())}));
      run_or_error(t);
    }
    {
      OpTest t("CumSum");
      t.input("x", pat(random_dims(rng, 3))).input("axis", ints({static_cast<int64_t>(rng() % 7) - 3}, {}));
      run_or_error(t);
    }
    {
      OpTest t("MatMul");
      t.input("a", pat(random_dims(rng, 4, 3))).input("b", pat2(random_dims(rng, 4, 3)));
      run_or_error(t);
    }
    {
      OpTest t("Gemm");
      t.input("a", pat(random_dims(rng, 2, 3))).input("b", pat2(random_dims(rng, 2, 3)));
      if (rng() % 2) t.input("c", pat3(random_dims(rng, 3, 3)));
      t.attr(Attribute::make_int("transA", rng() % 2)).attr(Attribute::make_int("transB", rng() % 2));
      run_or_error(t);
    }
    {
      OpTest t("Conv");
      std::vector<int64_t> xd = random_dims(rng, 4, 5), wd = random_dims(rng, 4, 3);
      t.input("x", pat(xd)).input("w", pat2(wd));
      if (rng() % 2) t.input("b", pat3(random_dims(rng, 1, 3)));
      if (rng() % 2) t.attr(Attribute::make_ints("strides", random_ints(rng, 3, -1, 3)));
      if (rng() % 2) t.attr(Attribute::make_ints("pads", random_ints(rng, 4, -2, 3)));
      if (rng() % 2) t.attr(Attribute::make_ints("dilations", random_ints(rng, 2, 0, 3)));
      if (rng() % 2) t.attr(Attribute::make_int("group", static_cast<int64_t>(rng() % 4)));
      if (rng() % 3 == 0) t.attr(Attribute::make_string("auto_pad", rng() % 2 ? "SAME_LOWER" : "VALID"));
      run_or_error(t);
    }
    {
      OpTest t(rng() % 2 ? "MaxPool" : "AveragePool");
      t.input("x", pat(random_dims(rng, 4, 5)));
      t.attr(Attribute::make_ints("kernel_shape", random_ints(rng, 3, -1, 4)));
      if (rng() % 2) t.attr(Attribute::make_ints("strides", random_ints(rng, 3, -1, 3)));
      if (rng() % 2) t.attr(Attribute::make_ints("pads", random_ints(rng, 4, -1, 3)));
      if (rng() % 2) t.attr(Attribute::make_int("ceil_mode", 1));
      if (rng() % 2) t.attr(Attribute::make_int("count_include_pad", 1));
      run_or_error(t);
    }
    {
      OpTest t("LayerNormalization");
      t.input("x", pat(random_dims(rng, 3))).input("g", pat3(random_dims(rng, 2)));
      if (rng() % 2) t.input("b", pat2(random_dims(rng, 2)));
      t.attr(Attribute::make_int("axis", static_cast<int>(rng() % 7) - 3));
      run_or_error(t);
    }
    {
      OpTest t("BatchNormalization");
      std::vector<int64_t> c = random_dims(rng, 1, 3);
      t.input("x", pat(random_dims(rng, 4))).input("s", pat2(c)).input("b", pat3(c)).input("m", pat(c)).input("v", pat3(random_dims(rng, 1, 3)));
      run_or_error(t);
    }
    {
      const char* eqs[] = {"ij,jk->ik", "bij,bjk->bik", "...j,jk->...k", "ij->", "ii->i", "ij,jk", "i,i->", "ab,ab->ab", "x...,...->x"};
      OpTest t("Einsum");
      t.input("a", pat(random_dims(rng, 3, 3))).input("b", pat2(random_dims(rng, 3, 3)));
      t.attr(Attribute::make_string("equation", eqs[rng() % 9]));
      run_or_error(t);
    }
    {
      OpTest t("Clip");
      t.input("x", pat(random_dims(rng, 2)));
      if (rng() % 2) t.input("min", pat(random_dims(rng, 1, 2)));
      if (rng() % 2) t.input("max", ints({1}, {}));
      run_or_error(t);
    }
  }
  // Both paths were exercised.
  CHECK(g_ran > 300);
  CHECK(g_rejected > 300);
}
