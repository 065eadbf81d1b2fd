// CUDA elementwise kernels against the CPU reference kernels: unary math,
// binary arithmetic with broadcasting (odd sizes, scalars, both directions),
// comparisons/logic, variadic Max/Min/Sum/Mean, Clip, Pow, Cast, Where; fresh
// random inputs, NaN-poisoned outputs, fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

namespace {
const DType kFloatRuns[] = {DType::Float, DType::Float16, DType::BFloat16};
const std::vector<std::vector<int64_t>> kShapes = {{1}, {7}, {3, 5}, {2, 3, 257}, {4, 1, 33, 9}};

// Pairs of shapes that broadcast (right-aligned), including scalar operands.
const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> kBroadcastPairs = {
    {{2, 3, 257}, {2, 3, 257}}, {{3, 1, 5}, {4, 5}},     {{}, {6, 7}},         {{6, 7}, {}},
    {{2, 1, 4, 1}, {3, 1, 9}},  {{5, 129}, {129}},      {{1, 1, 1}, {2, 3, 4}}, {{2, 12, 16, 16}, {2, 1, 1, 16}}};
}  // namespace

TEST_CASE("cuda unary float ops", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  const char* ops[] = {"Sqrt", "Reciprocal", "Erf", "Tanh", "Exp", "Log", "Neg", "Abs", "Floor", "Ceil", "Sin", "Cos",
                       "Relu", "Sigmoid", "Softplus", "Sign", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "Atan"};
  for (const char* op : ops)
    for (const auto& shape : kShapes)
      for (DType dt : kFloatRuns) {
        const std::string o = op;
        const bool positive = o == "Sqrt" || o == "Log" || o == "Reciprocal";
        Case c(op, 1);
        c.in(0, positive ? uniform(shape, 0.1f, 4.f) : randn(shape, 2.f));
        INFO(op << " " << dims_str(shape));
        c.check(dt);
      }
}

TEST_CASE("cuda Gelu both forms", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* form : {"none", "tanh"})
    for (DType dt : kFloatRuns) {
      Case c("Gelu", 1);
      c.attr(Attribute::make_string("approximate", form)).in(0, randn({3, 1001}, 3.f));
      c.check(dt);
    }
}

TEST_CASE("cuda unary integer ops", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* op : {"Neg", "Abs", "Relu", "Sign"})
    for (DType it : {DType::Int64, DType::Int32}) {
      Case c(op, 1);
      c.in(0, randint({5, 13}, -50, 50, it));
      INFO(op);
      c.check();
    }
}

TEST_CASE("cuda binary arithmetic with broadcasting", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"})
    for (const auto& [sa, sb] : kBroadcastPairs)
      for (DType dt : kFloatRuns) {
        const std::string o = op;
        if (o == "PRelu" && sb.size() > sa.size()) continue;  // slope broadcasts to X only
        Case c(op, 2);
        c.in(0, randn(sa, 3.f)).in(1, o == "Div" ? uniform(sb, 0.5f, 3.f) : randn(sb, 3.f));
        INFO(op << " " << dims_str(sa) << " x " << dims_str(sb));
        c.check(dt);
      }
}

TEST_CASE("cuda integer arithmetic (shape and position math)", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"})
    for (DType it : {DType::Int64, DType::Int32})
      for (int fmod = 0; fmod < 2; ++fmod) {
        if (fmod && std::string(op) != "Mod") continue;
        Case c(op, 2);
        c.in(0, randint({3, 1, 17}, -100, 100, it)).in(1, randint({4, 17}, 1, 9, it));
        if (std::string(op) == "Mod") c.attr(Attribute::make_int("fmod", fmod));
        INFO(op << " fmod " << fmod);
        c.check();
      }
  // Python-style Mod with negative divisors, floats (fmod = 1 required by ONNX for floats).
  Case f("Mod", 2);
  f.attr(Attribute::make_int("fmod", 1)).in(0, randn({6, 11}, 10.f)).in(1, uniform({11}, 1.f, 4.f));
  f.check();
}

TEST_CASE("cuda comparisons and logic", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"}) {
    for (const auto& [sa, sb] : kBroadcastPairs) {
      Case c(op, 2);
      c.in(0, randint(sa, -3, 3)).in(1, randint(sb, -3, 3));  // int64 with many ties
      INFO(op << " int64 " << dims_str(sa) << " x " << dims_str(sb));
      c.check();
    }
    Case f(op, 2);
    f.in(0, randn({5, 67})).in(1, randn({67}));
    f.check();
  }
  for (const char* op : {"And", "Or", "Xor"})
    for (const auto& [sa, sb] : kBroadcastPairs) {
      Case c(op, 2);
      c.in(0, randint(sa, 0, 1, DType::Bool)).in(1, randint(sb, 0, 1, DType::Bool));
      INFO(op);
      c.check();
    }
  Case n("Not", 1);
  n.in(0, randint({3, 77}, 0, 1, DType::Bool));
  n.check();
}

TEST_CASE("cuda IsNaN and IsInf", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  Tensor x = randn({4, 33});
  x.data<float>()[3] = NAN;
  x.data<float>()[40] = INFINITY;
  x.data<float>()[41] = -INFINITY;
  Case a("IsNaN", 1);
  a.in(0, x);
  a.check();
  // The CPU backend has no IsInf: hand reference, each detect_* setting.
  for (int neg = 0; neg < 2; ++neg)
    for (int pos = 0; pos < 2; ++pos)
      for (DType dt : kFloatRuns) {
        Case b("IsInf", 1);
        b.attr(Attribute::make_int("detect_negative", neg)).attr(Attribute::make_int("detect_positive", pos)).in(0, x);
        const Tensor got = b.run_cuda(dt)[0];
        REQUIRE(got.dtype == DType::Bool);
        REQUIRE(got.numel() == x.numel());
        for (int64_t i = 0; i < x.numel(); ++i) {
          const float v = x.data<float>()[i];
          const bool want = (v == INFINITY && pos) || (v == -INFINITY && neg);
          INFO("element " << i << " neg " << neg << " pos " << pos);
          CHECK(got.bytes[i] == (want ? 1 : 0));
        }
      }
}

TEST_CASE("cuda variadic Max Min Sum Mean", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (const char* op : {"Max", "Min", "Sum", "Mean"})
    for (DType dt : kFloatRuns) {
      Case c(op, 3);
      c.in(0, randn({3, 1, 9})).in(1, randn({4, 9})).in(2, randn({1}));
      INFO(op);
      c.check(dt);
      Case one(op, 1);
      one.in(0, randn({2, 5}));
      one.check(dt);
    }
}

TEST_CASE("cuda Pow including a mixed-dtype exponent", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case sq("Pow", 2);
    sq.in(0, randn({7, 129})).in(1, Tensor::scalar_float(2.f));
    sq.check(dt);
    Case gen("Pow", 2);
    gen.in(0, uniform({3, 65}, 0.1f, 3.f)).in(1, uniform({65}, -2.f, 2.f));
    gen.check(dt);
  }
  Case mixed("Pow", 2);
  mixed.in(0, randn({5, 9})).in(1, Tensor::from_ints({3}, {}));
  mixed.check();
  Case ints_pow("Pow", 2);
  ints_pow.in(0, randint({4, 7}, -6, 6)).in(1, randint({7}, 0, 4));
  ints_pow.check();
}

TEST_CASE("cuda Clip with inputs, omitted bounds and attributes", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case both("Clip", 3);
    both.in(0, randn({6, 101}, 2.f)).in(1, Tensor::scalar_float(-0.5f)).in(2, Tensor::scalar_float(1.25f));
    both.check(dt);
    Case hi_only("Clip", 3);
    hi_only.in(0, randn({6, 101}, 2.f)).in(2, Tensor::scalar_float(0.3f));
    hi_only.check(dt);
  }
  Case attr("Clip", 1);
  attr.attr(Attribute::make_float("min", -1.f)).attr(Attribute::make_float("max", 0.5f)).in(0, randn({17}, 2.f));
  attr.check();
  Case ints_clip("Clip", 3);
  ints_clip.in(0, randint({40}, -20, 20)).in(1, scalar_i64(-3)).in(2, scalar_i64(7));
  ints_clip.check();
}

TEST_CASE("cuda Cast between dtypes", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  const DType targets[] = {DType::Float, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32, DType::Bool,
                           DType::UInt8, DType::Double};
  std::vector<Tensor> sources = {randn({3, 37}, 20.f), randint({3, 37}, -100, 100), randint({3, 37}, -100, 100, DType::Int32),
                                 randint({3, 37}, 0, 1, DType::Bool), convert_float(randn({3, 37}, 5.f), DType::Float16)};
  sources[0].data<float>()[5] = NAN;  // NaN to integer gives 0, as the CPU
  for (const Tensor& src : sources)
    for (DType to : targets) {
      if (src.dtype == DType::Float16 && to == DType::BFloat16) continue;
      // Negative floats to an unsigned type are undefined in C++ (and differ by device).
      if (to == DType::UInt8 && (src.dtype == DType::Float || src.dtype == DType::Float16)) continue;
      Case c("Cast", 1);
      c.attr(Attribute::make_int("to", static_cast<int64_t>(to))).in(0, src, false);
      INFO("Cast " << dtype_name(src.dtype) << " -> " << dtype_name(to));
      c.check();
    }
}

TEST_CASE("cuda Where with three-way broadcasting", "[cuda][elementwise]") {
  if (!gpu_ready()) return;
  for (DType dt : kFloatRuns) {
    Case c("Where", 3);
    c.in(0, randint({2, 1, 16}, 0, 1, DType::Bool)).in(1, randn({3, 16})).in(2, Tensor::scalar_float(-1e4f));
    c.check(dt);
  }
  Case i("Where", 3);
  i.in(0, randint({5, 1}, 0, 1, DType::Bool)).in(1, randint({1, 7}, -9, 9)).in(2, randint({5, 7}, -9, 9));
  i.check();
}
