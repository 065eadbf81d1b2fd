// CUDA fuseopt.Attention with sinks (input 7, [H]; GPT-OSS) against the CPU kernel. The sink
// joins each row's running max and sum after the last key tile (join_sink in
// fused_attention_common.cuh) in the generic, mma.sync and Hopper kernels (each case runs with
// the Hopper kernel forced on and off, so an sm_90 device tests both); the runtime kernel keeps
// such calls off the decode kernels. Half sinks (the
// harness gives the inputs the case's dtype) are widened to fp32 once. Cases: tiles that do not
// divide (77, 130 rows), GQA/MQA, causal, key padding with a whole batch padded (rows whose
// mass is all the sink's: 0), sliding windows (GPT-OSS alternates them), head dim 80 (generic
// kernel at every dtype), and a decode step over a cache. The output is NaN-poisoned first.
#include <catch2/catch.hpp>

#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "support/attention_variant_cases.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct SinkCase {
  attention_variant::Shape shape;
  bool causal, mask;
  int64_t window = 0;
};

void run_sinks(const SinkCase& c, DType dt) {
  const attention_variant::Shape& s = c.shape;
  INFO(attention_variant::describe(s) << (c.causal ? " causal" : "") << (c.mask ? " mask" : "") << " window "
                                      << c.window << " " << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 8, 1);
  attention_variant::set_heads(op, s.H, s.Hkv, c.causal);
  if (c.window) op.attr(Attribute::make_int("window", c.window));
  auto in = attention_variant::random_inputs(s);
  Tensor sinks = cuda_check::random_tensor({s.H}, -3.f, 3.f);
  for (int64_t j = 0; j < s.Skv; ++j) in.mask.data<int64_t>()[j] = 0;  // batch 0: every key padded
  op.inputs = {&in.q, &in.k, &in.v, c.mask ? &in.mask : nullptr, nullptr, nullptr, nullptr, &sinks};
  auto want = op.run_cpu(dt);
  for (int hopper : {1, 0}) {  // the Hopper kernel where it applies (sm_90), then never
    INFO("Hopper kernel " << (hopper ? "on" : "off"));
    cuda_fused::attention_set_hopper(hopper);
    auto got = op.run_cuda(dt);
    cuda_fused::attention_set_hopper(-1);
    attention_variant::check_outputs(got, want, dt);
  }
}

}  // namespace

TEST_CASE("cuda Attention sinks (generic, mma.sync and Hopper kernels) vs CPU", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const SinkCase cases[] = {
      {{2, 77, 77, 4, 4, 64}, true, false},
      {{3, 130, 130, 8, 2, 128}, true, true},     // GQA, padding (batch 0 fully: the sink's rows)
      {{2, 33, 130, 4, 1, 64}, true, true},       // MQA, S_kv > S (bottom-right)
      {{2, 77, 77, 4, 2, 64}, false, true},       // no causal
      {{2, 130, 130, 4, 2, 64}, true, true, 32},  // a sliding layer
      {{1, 100, 100, 2, 2, 80}, true, true},      // head dim 80: the generic kernel at every dtype
  };
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (const SinkCase& c : cases) run_sinks(c, dt);
}

TEST_CASE("cuda Attention: sinks do not change the kernel choice", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  cuda_fused::AttentionArgs a;
  a.H = a.Hkv = 8;
  a.Dh = a.Dv = 64;
  a.Sq = a.Skv = 512;
  a.dtype = DType::Float16;
  const std::string without = cuda_fused::attention_kernel_name(a);
  const float dummy = 0.f;
  a.sinks = &dummy;  // only the pointer's presence could be read by the choice
  CHECK(std::string(cuda_fused::attention_kernel_name(a)) == without);
}

TEST_CASE("cuda Attention sinks: a decode step over a cache", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const int64_t B = 2, H = 4, Hkv = 2, D = 64;
  for (int64_t past : {31, 1000}) {  // below and above kFlashDecodeMinKeys: the decode kernels decline
    INFO("past " << past);
    OpCase op("fuseopt", "Attention", 8, 3);
    attention_variant::set_heads(op, H, Hkv, true);
    auto in = attention_variant::random_step(B, H, Hkv, D, past);
    Tensor sinks = cuda_check::random_tensor({H}, -3.f, 3.f);
    op.inputs = {&in.q, &in.k, &in.v, nullptr, nullptr, &in.past_k, &in.past_v, &sinks};
    auto want = op.run_cpu(DType::Float16);
    auto got = op.run_cuda(DType::Float16);
    attention_variant::check_outputs(got, want, DType::Float16);
  }
}
