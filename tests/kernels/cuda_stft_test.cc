// CUDA STFT and window generators against the CPU reference (outputs
// NaN-poisoned by the harness): real and complex signals, one- and
// two-sided, with and without a window, Whisper-sized frames (400, step
// 160); fp32 and fp16/bf16 storage.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda STFT", "[cuda][stft]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case whisper("STFT", 3);  // n_fft 400, hop 160
    whisper.in(0, randn({1, 4000, 1})).in(1, scalar_i64(160)).in(2, uniform({400}, 0.f, 1.f));
    whisper.check(dt, 1e-4, 1e-4);
    Case no_window("STFT", 4);
    no_window.in(0, randn({2, 77, 1})).in(1, scalar_i64(5)).in(3, scalar_i64(16));
    no_window.check(dt, 1e-4, 1e-4);
    Case complex_in("STFT", 4);
    complex_in.attr(Attribute::make_int("onesided", 0));
    complex_in.in(0, randn({2, 50, 2})).in(1, scalar_i64(3)).in(2, randn({9})).in(3, scalar_i64(9));
    complex_in.check(dt, 1e-4, 1e-4);
  }
}

TEST_CASE("cuda window generators", "[cuda][stft]") {
  if (!gpu_ready()) return;
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    for (int periodic = 0; periodic < 2; ++periodic)
      for (int64_t n : {1, 7, 400}) {
        Case c(op, 1);
        c.attr(Attribute::make_int("periodic", periodic)).in(0, scalar_i64(n));
        INFO(op << " periodic " << periodic << " size " << n);
        c.check(DType::Float, 1e-6, 1e-5);
      }
}

TEST_CASE("cuda DFT", "[cuda][stft]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case real("DFT", 1);
    real.attr(Attribute::make_int("axis", 1)).in(0, randn({3, 400, 1}));
    real.check(dt, 1e-4, 1e-4);
    Case onesided("DFT", 2);
    onesided.attr(Attribute::make_int("axis", 1)).attr(Attribute::make_int("onesided", 1));
    onesided.in(0, randn({2, 37, 1})).in(1, scalar_i64(64));
    onesided.check(dt, 1e-4, 1e-4);
    Case inv("DFT", 3);  // opset 20 spelling: axis as input 2; truncated to 6
    inv.attr(Attribute::make_int("inverse", 1));
    inv.in(0, randn({2, 5, 8, 2})).in(1, scalar_i64(6)).in(2, scalar_i64(2));
    inv.check(dt, 1e-4, 1e-4);
  }
}
