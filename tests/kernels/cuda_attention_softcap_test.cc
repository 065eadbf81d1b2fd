// CUDA fuseopt.Attention with softcap (Gemma-2 logit soft-capping) against the CPU kernel:
// launch_attention sends softcap > 0 to the generic (SIMT) kernel, which caps the scaled
// score before bias and masks as the CPU reference does. Cases cover the shapes that
// would otherwise pick the tensor-core / Hopper kernels (fp16/bf16, head dims 64/128),
// GQA, causal with S_kv != S, key padding with a finfo.min fill and a float bias; the
// CUDA output is NaN-poisoned by the harness before the launch.
#include <catch2/catch.hpp>

#include "kernels/cuda/fused_launch.cuh"
#include "support/attention_variant_cases.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct CapCase {
  attention_variant::Shape shape;
  bool causal, mask, bias;
  float softcap;
};

void run_cap(const CapCase& c, DType dt) {
  const attention_variant::Shape& s = c.shape;
  INFO(attention_variant::describe(s) << " cap " << c.softcap << (c.causal ? " causal" : "") << (c.mask ? " mask" : "")
                                      << (c.bias ? " bias" : "") << " " << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 5, 1);
  attention_variant::set_heads(op, s.H, s.Hkv, c.causal);
  op.attr(Attribute::make_float("scale", 0.5f));
  op.attr(Attribute::make_float("softcap", c.softcap));
  auto in = attention_variant::random_inputs(s);
  Tensor bias = cuda_check::random_tensor({1, s.H, s.S, s.Skv}, -3.f, 3.f);
  op.inputs = {&in.q, &in.k, &in.v, c.mask ? &in.mask : nullptr, c.bias ? &bias : nullptr};
  auto got = op.run_cuda(dt);
  auto want = op.run_cpu(dt);
  attention_variant::check_outputs(got, want, dt);
}

}  // namespace

TEST_CASE("cuda Attention softcap (generic kernel) vs CPU", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const CapCase cases[] = {
      {{2, 77, 77, 4, 4, 64}, false, false, false, 2.0f},
      {{2, 77, 77, 4, 2, 128}, true, true, false, 3.0f},   // GQA, causal, padding (finfo.min)
      {{2, 33, 70, 4, 1, 64}, true, false, true, 5.0f},    // MQA, S_kv > S, bias after the cap
      {{1, 130, 130, 2, 2, 256}, false, true, true, 50.0f},  // Gemma-2's cap, head dim 256
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
