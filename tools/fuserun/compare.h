// One output against its reference: norm-wise relative error, max abs error,
// NaN/Inf mismatches, shape. Used by --check and --compare-cpu.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace fuseopt::fuserun {

struct OutputCheck {
  std::string name;
  std::vector<int64_t> shape, ref_shape;
  double max_abs = 0, rel = 0;
  bool nan = false, shape_ok = true, pass = true;
  std::string note;
};

// Passes when rel <= rtol or max_abs <= atol, shapes agree, and no NaN/Inf
// appears where the reference has a number (equal infinities and NaN where
// the reference is NaN are fine).
OutputCheck compare(const std::string& name, const Tensor& out, const Tensor& ref, double atol, double rtol);

}  // namespace fuseopt::fuserun
