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
  double ref_max_abs = 0;  // largest finite |reference value|
  bool nan = false, shape_ok = true, pass = true;
  std::string note;
};

// Passes when rel <= rtol or max_abs <= atol, shapes agree, and no NaN/Inf
// appears where the reference has a number (equal infinities and NaN where
// the reference is NaN are fine).
OutputCheck compare(const std::string& name, const Tensor& out, const Tensor& ref, double atol, double rtol);

// Why a failed check at fp16 may be no fault of the model: every reference value lies below
// fp16's smallest normal number (6.1e-5), where fp16 keeps few or no significant bits (random-
// weight vision models end in outputs of 1e-20 .. 1e-7). Empty when the check passed, the
// compute precision is not fp16, or the reference reaches the normal range.
std::string half_range_hint(const OutputCheck& c, bool fp16);

}  // namespace fuseopt::fuserun
