// The decode step of fuseopt.Attention (S_q = 1 with past/present) run through the op on the
// GPU and on the CPU reference, for the decode kernels' tests (tests/kernels/
// cuda_attention_decode_append_test.cc: the register kernel; cuda_attention_decode_mma_test.cc:
// the tensor-core one). Fresh random inputs; the harness NaN-poisons outputs first. Y is
// compared within the type's tolerance, the presents exactly (they are copies).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>

#include "kernels/cuda/fused_attention_decode.h"
#include "support/attention_variant_cases.h"
#include "support/cuda_kernel_check.h"

namespace decode_attention {

using namespace fuseopt;
using cuda_check::OpCase;


inline const float kNoAttr = std::numeric_limits<float>::quiet_NaN();
inline const float kFinfoMin = -3.4028234663852886e38f;

struct Step {
  int64_t B, Sp, H, Hkv, D;
  int mask = 0;           // 0 none, 1 int64 padding over Sp + 1 (batch 0 fully masked), 2 bool
  float fill = kNoAttr;   // mask_filter_value (NaN = omitted: -inf)
  bool rows_zero = false;
  bool present = true;    // the op declares present_key / present_value
  bool stable_mask = false;  // the mask stands for a graph input (read before the launch wait)
};

inline std::string describe(const Step& c) {
  std::ostringstream os;
  os << "B" << c.B << " S_past" << c.Sp << " H" << c.H << " Hkv" << c.Hkv << " D" << c.D << " mask" << c.mask
     << " fill " << c.fill << (c.rows_zero ? " masked_rows_zero" : "") << (c.present ? "" : " no present")
     << (c.stable_mask ? " stable mask" : "");
  return os.str();
}

// FUSEOPT_DECODE_APPEND for one scope (the host reads it on every call).
struct AppendMode {
  explicit AppendMode(const char* v) { setenv("FUSEOPT_DECODE_APPEND", v, 1); }
  ~AppendMode() { unsetenv("FUSEOPT_DECODE_APPEND"); }
};

inline OpCase make_op(const Step& c) {
  OpCase op("fuseopt", "Attention", 7, c.present ? 3 : 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", 1));  // one query over the cache: causal keeps every key
  if (!std::isnan(c.fill)) op.attr(Attribute::make_float("mask_filter_value", c.fill));
  if (c.rows_zero) op.attr(Attribute::make_int("masked_rows_zero", 1));
  return op;
}

// Runs the step on the GPU (expecting the one-launch kernel, or not) and on the CPU.
inline void run_step(const Step& c, DType dt, bool expect_kernel = true) {
  INFO(describe(c) << " " << cuda_check::short_name(dt));
  OpCase op = make_op(c);
  auto in = attention_variant::random_step(c.B, c.H, c.Hkv, c.D, c.Sp);
  Tensor mask;
  if (c.mask) mask = cuda_check::random_padding_mask(c.B, c.Sp + 1, c.mask == 1 ? DType::Int64 : DType::Bool);
  op.inputs = {&in.q, &in.k, &in.v, c.mask ? &mask : nullptr, nullptr, &in.past_k, &in.past_v};
  if (c.stable_mask) op.stable_inputs.push_back(3);
  auto want = op.run_cpu(dt);
  AppendMode on("1");
  const long long before = cuda_fused::decode_append_launch_count();
  auto got = op.run_cuda(dt);
  const long long launched = cuda_fused::decode_append_launch_count() - before;
  if (expect_kernel) CHECK(launched >= 1);
  else CHECK(launched == 0);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    INFO("output " << o);
    REQUIRE(got[o].dims == want[o].dims);
    const double err = cuda_check::rel_error(got[o], want[o]);
    INFO("relative error " << err);
    if (o == 0) CHECK(err < cuda_check::tolerance(dt));
    else CHECK(err == 0.0);  // the presents are copies of the (rounded) inputs
  }
  if (c.rows_zero && c.mask && (std::isnan(c.fill) || std::isinf(c.fill))) {
    // Batch 0 is fully masked with -inf: exactly 0 (rel_error already fails on NaN).
    for (int64_t i = 0; i < c.H * c.D; ++i) REQUIRE(got[0].data<float>()[i] == 0.0f);
  }
}


// FUSEOPT_DECODE_MMA for one scope: "0" keeps the step on the register kernel, "1" tries the
// tensor-core one first (the host reads it on every launch).
struct MmaMode {
  explicit MmaMode(const char* v) { setenv("FUSEOPT_DECODE_MMA", v, 1); }
  ~MmaMode() { unsetenv("FUSEOPT_DECODE_MMA"); }
};

}  // namespace decode_attention
