// What the CUDA tests of fuseopt.Attention's variants (sinks, sliding window, softcap:
// tests/kernels/cuda_attention_{sinks,window,softcap}_test.cc) share: the node's head
// attributes, fresh random inputs of a prefill case or of a one-token step over a cache (the
// decode kernels' cases, decode_attention_cases.h, draw theirs here too), and the comparison of
// every output with the CPU kernel's. The harness NaN-poisons the CUDA
// outputs before each launch.
#pragma once
#include <catch2/catch.hpp>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "support/cuda_kernel_check.h"

namespace attention_variant {

using namespace fuseopt;

struct Shape {
  int64_t B, S, Skv, H, Hkv, Dh;
};

inline std::string describe(const Shape& s) {
  std::ostringstream os;
  os << "B" << s.B << " S" << s.S << " Skv" << s.Skv << " H" << s.H << " Hkv" << s.Hkv << " Dh" << s.Dh;
  return os.str();
}

// num_heads, kv_num_heads, causal, and the finfo.min fill of the key-padding mask (the exporters'
// value: a fully padded row then stays finite and uniform).
inline void set_heads(cuda_check::OpCase& op, int64_t H, int64_t Hkv, bool causal) {
  op.attr(Attribute::make_int("num_heads", H));
  op.attr(Attribute::make_int("kv_num_heads", Hkv));
  op.attr(Attribute::make_int("causal", causal));
  op.attr(Attribute::make_float("mask_filter_value", -std::numeric_limits<float>::max()));
}

// Q and K in [-2, 2) (sharp enough rows), V in [-1, 1), an int64 key-padding mask [B, S_kv].
struct Inputs {
  Tensor q, k, v, mask;
};
inline Inputs random_inputs(const Shape& s) {
  Inputs in;
  in.q = cuda_check::random_tensor({s.B, s.S, s.H * s.Dh}, -2.f, 2.f);
  in.k = cuda_check::random_tensor({s.B, s.Skv, s.Hkv * s.Dh}, -2.f, 2.f);
  in.v = cuda_check::random_tensor({s.B, s.Skv, s.Hkv * s.Dh});
  in.mask = cuda_check::random_padding_mask(s.B, s.Skv, DType::Int64);
  return in;
}

// One new token over a cache of `past` positions: Q/K/V [B, 1, ·], past K/V [B, Hkv, past, D].
struct StepInputs {
  Tensor q, k, v, past_k, past_v;
};
inline StepInputs random_step(int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t past) {
  StepInputs in;
  in.q = cuda_check::random_tensor({B, 1, H * D}, -2.f, 2.f);
  in.k = cuda_check::random_tensor({B, 1, Hkv * D}, -2.f, 2.f);
  in.v = cuda_check::random_tensor({B, 1, Hkv * D});
  in.past_k = cuda_check::random_tensor({B, Hkv, past, D}, -2.f, 2.f);
  in.past_v = cuda_check::random_tensor({B, Hkv, past, D});
  return in;
}

// Every output of the CUDA run against the CPU kernel's: the same count and dims, each within
// the dtype's relative tolerance.
inline void check_outputs(const std::vector<Tensor>& got, const std::vector<Tensor>& want, DType dt) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("output " << i);
    REQUIRE(got[i].dims == want[i].dims);
    const double err = cuda_check::rel_error(got[i], want[i]);
    INFO("relative error " << err);
    CHECK(err < cuda_check::tolerance(dt));
  }
}

}  // namespace attention_variant
