// STFT and the window generators on the CPU reference backend; expected
// values from numpy (np.fft.rfft of the windowed frames; the window formulas
// of the ONNX spec). onnxruntime comparisons: tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("STFT of a real signal with a window, step 2", "[cpu][stft]") {
  OpTest t("STFT");
  t.input("x", floats({1, 2, 0, -1, 3, 0.5f, -2, 1}, {1, 8, 1}));
  t.const_input("step", ints({2}, {})).input("w", floats({0.5f, 1, 1, 0.5f}, {4}));
  // rfft(x[2f : 2f + 4] * w) for frames f = 0, 1, 2 as (re, im) pairs.
  expect_near(t.run()[0], {2, 0, 0.5f, -2.5f, -1, 0, 2.25f, 0, -3, 1.25f, 3.75f, 0, 0.5f, 0, 3.5f, 0, -1.5f, 0},
              {1, 3, 3, 2}, 1e-5f, 1e-5f);
}

TEST_CASE("STFT rejects a complex signal with onesided and a window/frame_length mismatch", "[cpu][stft]") {
  OpTest complex_onesided("STFT");
  complex_onesided.input("x", iota({1, 8, 2})).const_input("step", ints({2}, {})).input("w", iota({4}));
  REQUIRE_THROWS_WITH(complex_onesided.run(), Catch::Contains("STFT_node") && Catch::Contains("onesided"));
  OpTest mismatch("STFT");
  mismatch.input("x", iota({1, 8, 1})).const_input("step", ints({2}, {})).input("w", iota({4}));
  mismatch.const_input("n", ints({5}, {}));
  REQUIRE_THROWS_WITH(mismatch.run(), Catch::Contains("STFT_node") && Catch::Contains("frame_length"));
}

TEST_CASE("HannWindow, HammingWindow, BlackmanWindow", "[cpu][stft]") {
  auto window = [](const char* op, int64_t n, int periodic) {
    OpTest t(op);
    t.const_input("n", ints({n}, {}));
    t.attr(Attribute::make_int("periodic", periodic));
    return t.run()[0];
  };
  expect_near(window("HannWindow", 8, 1), {0, 0.1464466f, 0.5f, 0.8535534f, 1, 0.8535534f, 0.5f, 0.1464466f}, {8});
  expect_near(window("HammingWindow", 5, 0), {0.08695652f, 0.5434783f, 1, 0.5434783f, 0.08695652f}, {5});
  expect_near(window("BlackmanWindow", 6, 1), {0, 0.13f, 0.63f, 1, 0.63f, 0.13f}, {6});
  REQUIRE_THROWS_WITH(window("HannWindow", -1, 1), Catch::Contains("HannWindow_node"));
}

namespace {
Tensor dft(Tensor x, std::vector<Attribute> attrs, const int64_t* length = nullptr) {
  OpTest t("DFT");
  t.input("x", std::move(x));
  if (length) t.const_input("n", ints({*length}, {}));
  for (Attribute& a : attrs) t.attr(std::move(a));
  return t.run()[0];
}
}  // namespace

TEST_CASE("DFT: forward, onesided with padding, inverse of a complex signal (numpy.fft)", "[cpu][stft]") {
  const Tensor x = floats({1, 2, 0, -1, 3}, {1, 5, 1});
  expect_near(dft(x, {Attribute::make_int("axis", 1)}),
              {5, 0, 3.354102f, 0.3632713f, -3.354102f, 1.538842f, -3.354102f, -1.538842f, 3.354102f, -0.3632713f},
              {1, 5, 2}, 1e-5f, 1e-5f);
  const int64_t eight = 8;  // rfft(x, n=8): zero-padded
  expect_near(dft(x, {Attribute::make_int("axis", 1), Attribute::make_int("onesided", 1)}, &eight),
              {5, 0, 0.1213203f, -0.7071068f, 4, -3, -4.12132f, -0.7071068f, 3, 0}, {1, 5, 2}, 1e-5f, 1e-5f);
  expect_near(dft(floats({1, 1, 2, -1, 0, 0.5f, -1, 0}, {1, 4, 2}), {Attribute::make_int("inverse", 1)}),
              {0.5f, 0.125f, 0.5f, 0.875f, 0, 0.625f, 0, -0.625f}, {1, 4, 2}, 1e-6f, 1e-5f);
}

TEST_CASE("DFT rejects the complex dim as axis and an ambiguous default axis", "[cpu][stft]") {
  REQUIRE_THROWS_WITH(dft(iota({1, 5, 1}), {Attribute::make_int("axis", 2)}), Catch::Contains("DFT_node"));
  REQUIRE_THROWS_WITH(dft(iota({2, 3, 5, 1}), {}), Catch::Contains("DFT_node") && Catch::Contains("default"));
}
