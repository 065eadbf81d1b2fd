#include "tools/fuserun/compare.h"

#include <algorithm>
#include <cmath>

namespace fuseopt::fuserun {

OutputCheck compare(const std::string& name, const Tensor& out, const Tensor& ref, double atol, double rtol) {
  OutputCheck c;
  c.name = name;
  c.shape = out.dims;
  c.ref_shape = ref.dims;
  if (out.dims != ref.dims) {
    c.shape_ok = c.pass = false;
    c.note = "shape " + shape_str(out.dims) + " but the reference is " + shape_str(ref.dims);
    return c;
  }
  double diff2 = 0, ref2 = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double o = out.as_double(i), r = ref.as_double(i);
    if (std::isnan(o) || std::isnan(r)) {
      if (!(std::isnan(o) && std::isnan(r))) c.nan = true;  // NaN never passes, except where the reference is NaN too
      continue;
    }
    if (std::isinf(o) || std::isinf(r)) {
      if (o != r) c.nan = true;
      continue;
    }
    const double d = std::fabs(o - r);
    c.max_abs = std::max(c.max_abs, d);
    diff2 += d * d;
    ref2 += r * r;
  }
  c.rel = ref2 > 0 ? std::sqrt(diff2) / std::sqrt(ref2) : std::sqrt(diff2);
  c.pass = !c.nan && (c.rel <= rtol || c.max_abs <= atol);
  if (c.nan) c.note = "NaN/Inf where the reference has a number";
  if (out.dtype != ref.dtype)
    c.note += std::string(c.note.empty() ? "" : "; ") + "dtype " + dtype_name(out.dtype) + " vs reference " +
              dtype_name(ref.dtype);
  return c;
}

}  // namespace fuseopt::fuserun
