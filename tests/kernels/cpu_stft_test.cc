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
