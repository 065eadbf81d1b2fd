// Mean and 1/sqrt(variance + eps) of a contiguous row, accumulated in double:
// how every CPU normalization reference (LayerNormalization, Instance- and
// GroupNormalization) computes its statistics, so they agree to the bit.
#pragma once
#include <cmath>
#include <cstdint>

namespace fuseopt::cpu {

struct RowStats {
  double mean = 0, inv_std = 0;
};

inline RowStats row_stats(const float* x, int64_t n, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  RowStats s;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += (x[i] - s.mean) * (x[i] - s.mean);
  s.inv_std = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
  return s;
}

}  // namespace fuseopt::cpu
