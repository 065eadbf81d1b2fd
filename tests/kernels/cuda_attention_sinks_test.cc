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

#include <limits>

#include "kernels/cuda/fused_attention_hopper.cuh"
#include "kernels/cuda/fused_launch.cuh"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct SinkCase {
  int64_t B, S, Skv, H, Hkv, Dh;
  bool causal, mask;
  int64_t window = 0;
};

void run_sinks(const SinkCase& c, DType dt) {
  INFO("B" << c.B << " S" << c.S << " Skv" << c.Skv << " H" << c.H << " Hkv" << c.Hkv << " Dh" << c.Dh
           << (c.causal ? " causal" : "") << (c.mask ? " mask" : "") << " window " << c.window << " "
           << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 8, 1);
  op.attr(Attribute::make_int("num_heads", c.H));
  op.attr(Attribute::make_int("kv_num_heads", c.Hkv));
  op.attr(Attribute::make_int("causal", c.causal));
  if (c.window) op.attr(Attribute::make_int("window", c.window));
  op.attr(Attribute::make_float("mask_filter_value", -std::numeric_limits<float>::max()));
  Tensor q = cuda_check::random_tensor({c.B, c.S, c.H * c.Dh}, -2.f, 2.f);
  Tensor k = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dh}, -2.f, 2.f);
  Tensor v = cuda_check::random_tensor({c.B, c.Skv, c.Hkv * c.Dh});
  Tensor sinks = cuda_check::random_tensor({c.H}, -3.f, 3.f);
  Tensor mask = cuda_check::random_padding_mask(c.B, c.Skv, DType::Int64);
  for (int64_t j = 0; j < c.Skv; ++j) mask.data<int64_t>()[j] = 0;  // batch 0: every key padded
  op.inputs = {&q, &k, &v, c.mask ? &mask : nullptr, nullptr, nullptr, nullptr, &sinks};
  auto want = op.run_cpu(dt);
  for (int hopper : {1, 0}) {  // the Hopper kernel where it applies (sm_90), then never
    INFO("Hopper kernel " << (hopper ? "on" : "off"));
    cuda_fused::attention_set_hopper(hopper);
    auto got = op.run_cuda(dt);
    cuda_fused::attention_set_hopper(-1);
    REQUIRE(got[0].dims == want[0].dims);
    const double err = cuda_check::rel_error(got[0], want[0]);
    INFO("relative error " << err);
    CHECK(err < cuda_check::tolerance(dt));
  }
}

}  // namespace

TEST_CASE("cuda Attention sinks (generic, mma.sync and Hopper kernels) vs CPU", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const SinkCase cases[] = {
      {2, 77, 77, 4, 4, 64, true, false},
      {3, 130, 130, 8, 2, 128, true, true},     // GQA, padding (batch 0 fully: the sink's rows)
      {2, 33, 130, 4, 1, 64, true, true},       // MQA, S_kv > S (bottom-right)
      {2, 77, 77, 4, 2, 64, false, true},       // no causal
      {2, 130, 130, 4, 2, 64, true, true, 32},  // a sliding layer
      {1, 100, 100, 2, 2, 80, true, true},      // head dim 80: the generic kernel at every dtype
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
    op.attr(Attribute::make_int("num_heads", H));
    op.attr(Attribute::make_int("kv_num_heads", Hkv));
    op.attr(Attribute::make_int("causal", 1));
    Tensor q = cuda_check::random_tensor({B, 1, H * D}, -2.f, 2.f);
    Tensor k = cuda_check::random_tensor({B, 1, Hkv * D}, -2.f, 2.f);
    Tensor v = cuda_check::random_tensor({B, 1, Hkv * D});
    Tensor pk = cuda_check::random_tensor({B, Hkv, past, D}, -2.f, 2.f);
    Tensor pv = cuda_check::random_tensor({B, Hkv, past, D});
    Tensor sinks = cuda_check::random_tensor({H}, -3.f, 3.f);
    op.inputs = {&q, &k, &v, nullptr, nullptr, &pk, &pv, &sinks};
    auto want = op.run_cpu(DType::Float16);
    auto got = op.run_cuda(DType::Float16);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("output " << i);
      REQUIRE(got[i].dims == want[i].dims);
      CHECK(cuda_check::rel_error(got[i], want[i]) < cuda_check::tolerance(DType::Float16));
    }
  }
}
