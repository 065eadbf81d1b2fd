// Shared by the cpu math kernel tests: pat() mirrors gen_cpu_math_refs.py.
#pragma once
#include "support/op_test.h"

namespace fuseopt::test {
// pat(shape, a, b, m, s)[i] = (((i*a + b) % m) - m/2) * s, in float32 like numpy.
inline Tensor pat(std::vector<int64_t> dims, int64_t a = 7, int64_t b = 3, int64_t m = 11, float s = 0.1f) {
  Tensor t(DType::Float, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>(((i * a + b) % m) - m / 2) * s;
  return t;
}
inline Tensor pat2(std::vector<int64_t> dims) { return pat(std::move(dims), 5, 1, 13, 0.2f); }
inline Tensor pat3(std::vector<int64_t> dims) { return pat(std::move(dims), 3, 2, 7, 0.5f); }
}  // namespace fuseopt::test
