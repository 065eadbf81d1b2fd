// CUDA fuseopt.Attention with softcap (Gemma-2 logit soft-capping) against the CPU kernel:
// launch_attention sends softcap > 0 to the generic (SIMT) kernel, which caps the scaled
// score before bias and masks as the CPU reference does. Cases cover the shapes that
// would otherwise pick the tensor-core / Hopper kernels (fp16/bf16, head dims 64/128),
// GQA, causal with S_kv != S, key padding with a finfo.min fill and a float bias; the
// CUDA output is NaN-poisoned by the harness before the launch.
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct CapCase {
  int64_t B, S, Skv, H, Hkv, Dh;
  bool causal, mask, bias;
  float softcap;
};

void run_cap(const CapCase& c, DType dt) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh << " cap "
           << c.softcap << (c.causal ? " causal" : "") << (c.mask ? " mask" : "") << (c.bias ? " bias" : "") << " "
           << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 5, 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", c.causal));
  op.attr(Attribute::make_float("mask_filter_value", -std::numeric_limits<float>::max()));
  op.attr(Attribute::make_float("scale", 0.5f));
  op.attr(Attribute::make_float("softcap", c.softcap));
  Tensor q = cuda_check::random_tensor({c.B, c.S, c.H * c.Dh}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dh}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dh});
  Tensor mask = cuda_check::random_padding_mask(c.B, c.Skv, DType::Int64);
  Tensor bias = cuda_check::random_tensor({1, c.H, c.S, c.Skv}, -3.f, 3.f);
  op.inputs = {&q, &k, &v, c.mask ? &mask : nullptr, c.bias ? &bias : nullptr};
  auto got = op.run_cuda(dt);
  auto want = op.run_cpu(dt);
  REQUIRE(got[0].dims == want[0].dims);
  const double err = cuda_check::rel_error(got[0], want[0]);
  INFO("relative error " << err);
  CHECK(err < cuda_check::tolerance(dt));
}

}  // namespace

TEST_CASE("cuda Attention softcap (generic kernel) vs CPU", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const CapCase cases[] = {
      {2, 77, 77, 4, 4, 64, false, false, false, 2.0f},
      {2, 77, 77, 4, 2, 128, true, true, false, 3.0f},   // GQA, causal, padding (finfo.min)
      {2, 33, 70, 4, 1, 64, true, false, true, 5.0f},    // MQA, S_kv > S, bias after the cap
      {1, 130, 130, 2, 2, 256, false, true, true, 50.0f},  // Gemma-2's cap, head dim 256
  };
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (const CapCase& c : cases) run_cap(c, dt);
}

TEST_CASE("cuda Attention softcap picks the generic kernel", "[cuda][attention]") {
  cuda_fused::AttentionArgs a;
  a.H = a.Hkv = 8;
  a.Dh = a.Dv = 64;
  a.dtype = DType::Float16;
  a.softcap = 50.f;
  CHECK(std::string(cuda_fused::attention_kernel_name(a)) == "generic");
}
