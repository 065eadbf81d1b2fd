#include "tools/fuserun/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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
    c.ref_max_abs = std::max(c.ref_max_abs, std::fabs(r));
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

std::string half_range_hint(const OutputCheck& c, bool fp16) {
  constexpr double kHalfMinNormal = 6.103515625e-05;  // 2^-14
  if (c.pass || !fp16 || !c.shape_ok || c.nan || c.ref_max_abs >= kHalfMinNormal) return "";
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "every reference value is below fp16's normal range (max |ref| %.3g < 6.1e-5): fp16 cannot "
                "represent this output; check it at fp32 or bf16",
                c.ref_max_abs);
  return buf;
}

}  // namespace fuseopt::fuserun
