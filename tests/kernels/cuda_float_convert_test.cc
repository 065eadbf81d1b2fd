// Device-side float conversion (kernels/cuda/float_convert.cu): the session
// returns fp16/bf16-computed outputs in the declared dtype through it. Each
// pair of Float/Float16/BFloat16 must equal the host conversion bit for bit
// (host float_to_*_finite narrowing, exact widening) at sizes that do and do
// not fill the 8-wide vectors, from aligned and misaligned pointers, with the
// output poisoned first; specials (±inf, NaN, ±FLT_MAX) included.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/float_convert.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

size_t width(DType t) { return t == DType::Float ? 4 : 2; }

// Host reference: the value stored as `from`, read back as float, stored as `to`.
std::vector<uint8_t> host_convert(const std::vector<float>& v, DType from, DType to) {
  std::vector<uint8_t> out(v.size() * width(to));
  for (size_t i = 0; i < v.size(); ++i) {
    float f = v[i];
    if (from == DType::Float16) f = half_to_float(float_to_half_finite(f));
    if (from == DType::BFloat16) f = bf16_to_float(float_to_bf16_finite(f));
    if (to == DType::Float) std::memcpy(&out[i * 4], &f, 4);
    else {
      const uint16_t h = to == DType::Float16 ? float_to_half_finite(f) : float_to_bf16_finite(f);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> stored(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> out(v.size() * width(t));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::Float) std::memcpy(&out[i * 4], &v[i], 4);
    else {
      const uint16_t h = t == DType::Float16 ? float_to_half_finite(v[i]) : float_to_bf16_finite(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

// Bit-equal, except that any NaN matches any NaN (payloads differ between
// the host conversion and the device intrinsics).
bool same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType t) {
  const size_t w = width(t);
  for (size_t i = 0; i < want.size() / w; ++i) {
    float a, b;
    if (t == DType::Float) {
      std::memcpy(&a, &got[i * w], 4);
      std::memcpy(&b, &want[i * w], 4);
    } else {
      uint16_t ha, hb;
      std::memcpy(&ha, &got[i * w], 2);
      std::memcpy(&hb, &want[i * w], 2);
      a = t == DType::Float16 ? half_to_float(ha) : bf16_to_float(ha);
      b = t == DType::Float16 ? half_to_float(hb) : bf16_to_float(hb);
    }
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::memcmp(&got[i * w], &want[i * w], w) != 0) {
      UNSCOPED_INFO("element " << i << ": got " << a << ", want " << b);
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("cuda float convert: every Float/Float16/BFloat16 pair equals the host conversion", "[cuda][kernels]") {
  if (!cuda_check::gpu_ready()) return;
  const DType types[] = {DType::Float, DType::Float16, DType::BFloat16};
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int64_t n : {1, 7, 8, 9, 4099, 1 << 20}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(cuda_check::rng()) * std::exp2(u(cuda_check::rng()) * 4);
    const float specials[] = {INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX, 70000.f, -0.f, 1e-30f};
    for (size_t k = 0; k < std::size(specials) && k < v.size(); ++k) v[k * 3 % v.size()] = specials[k];
    for (DType from : types)
      for (DType to : types) {
        if (from == to) continue;
        for (int64_t offset : {0, 1}) {  // 1: misaligned start, the scalar path
          if (offset >= n) continue;
          const int64_t m = n - offset;
          const std::vector<uint8_t> src = stored(v, from);
          const std::vector<float> tail(v.begin() + offset, v.end());
          const std::vector<uint8_t> want = host_convert(tail, from, to);
          void *x = nullptr, *y = nullptr;
          cuda_check::ck(cudaMalloc(&x, src.size()), "malloc");
          cuda_check::ck(cudaMalloc(&y, (n + 8) * 4), "malloc");
          cuda_check::upload_bytes(x, src.data(), src.size());
          cuda_check::ck(cudaMemset(y, 0xff, (n + 8) * 4), "poison");  // NaN in every float type
          cuda_check::ck(cudaDeviceSynchronize(), "poison");  // ordered before a non-blocking stream
          char* ydst = static_cast<char*>(y) + offset * width(to);
          const char* xsrc = static_cast<const char*>(x) + offset * width(from);
          REQUIRE(cuda::launch_float_convert(ydst, to, xsrc, from, m, nullptr));
          std::vector<uint8_t> got(want.size() + width(to));
          cuda_check::ck(cudaMemcpy(got.data(), ydst, got.size(), cudaMemcpyDeviceToHost), "download");
          cudaFree(x);
          cudaFree(y);
          INFO("n " << n << " offset " << offset << " " << dtype_name(from) << " -> " << dtype_name(to));
          CHECK(same(got, want, to));
          // Nothing written past the end.
          CHECK(got[want.size()] == 0xff);
        }
      }
  }
}

TEST_CASE("cuda float convert: unsupported dtypes enqueue nothing", "[cuda][kernels]") {
  if (!cuda_check::gpu_ready()) return;
  CHECK_FALSE(cuda::launch_float_convert(nullptr, DType::Int64, nullptr, DType::Float, 4, nullptr));
  CHECK_FALSE(cuda::launch_float_convert(nullptr, DType::Float, nullptr, DType::Double, 4, nullptr));
}
