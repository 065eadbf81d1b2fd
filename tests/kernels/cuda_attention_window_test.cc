// CUDA fuseopt.Attention with a sliding window (Mistral, Gemma-2/3, StarCoder2) against the
// CPU kernel. launch_attention drops a window of at least S_kv keys (it hides nothing) and
// sends the others to the mma.sync kernel (fp16/bf16, head dims 64/128: it skips the key
// tiles left of the block's window and masks the rest per element) or to the generic kernel
// (fp32, other head dims); the runtime kernel keeps cache steps whose window hides keys off
// the decode kernels. Sizes divide no tile (77, 130 queries; windows 20, 40, 65), with S_kv > S
// (bottom-right), GQA/MQA, key padding with a finfo.min fill, a window without causal, and a
// one-token step over a past longer than the window. The CUDA output is NaN-poisoned by the
// harness before the launch.
#include <catch2/catch.hpp>

#include "kernels/cuda/fused_launch.cuh"
#include "support/attention_variant_cases.h"

using namespace fuseopt;
using cuda_check::OpCase;

namespace {

struct WindowCase {
  attention_variant::Shape shape;
  int64_t window;
  bool causal, mask;
};

void run_window(const WindowCase& c, DType dt) {
  const attention_variant::Shape& s = c.shape;
  INFO(attention_variant::describe(s) << " window " << c.window << (c.causal ? " causal" : "")
                                      << (c.mask ? " mask" : "") << " " << cuda_check::short_name(dt));
  OpCase op("fuseopt", "Attention", 5, 1);
  attention_variant::set_heads(op, s.H, s.Hkv, c.causal);
  op.attr(Attribute::make_int("window", c.window));
  auto in = attention_variant::random_inputs(s);
  op.inputs = {&in.q, &in.k, &in.v, c.mask ? &in.mask : nullptr, nullptr};
  auto got = op.run_cuda(dt);
  auto want = op.run_cpu(dt);
  attention_variant::check_outputs(got, want, dt);
}

}  // namespace

TEST_CASE("cuda Attention sliding window (mma.sync / generic kernels) vs CPU", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const WindowCase cases[] = {
      {{2, 77, 77, 4, 4, 64}, 20, true, false},
      {{2, 130, 130, 4, 2, 128}, 40, true, true},  // GQA, padding; several key tiles left of the window
      {{2, 33, 130, 4, 1, 64}, 65, true, false},   // MQA, S_kv > S (bottom-right), tiles skipped per block
      {{2, 77, 77, 2, 2, 64}, 20, false, true},    // no causal: later keys stay visible
      {{1, 200, 200, 2, 2, 80}, 50, true, true},   // head dim 80: the generic kernel at every dtype
      {{1, 64, 64, 2, 2, 64}, 1, true, false},     // window 1: the diagonal only
  };
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16})
    for (const WindowCase& c : cases) run_window(c, dt);
}

TEST_CASE("cuda Attention: a window of at least S_kv keys runs the kernels without one", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  for (DType dt : {DType::Float16, DType::BFloat16}) run_window({{2, 100, 100, 4, 4, 64}, 100, true, true}, dt);
  cuda_fused::AttentionArgs a;
  a.H = a.Hkv = 8;
  a.Dh = a.Dv = 64;
  a.Sq = a.Skv = 512;
  a.dtype = DType::Float16;
  a.window = 100;
  CHECK(std::string(cuda_fused::attention_kernel_name(a)) != "hopper");
  a.window = 512;  // hides nothing: the same choice as without a window
  const std::string idle = cuda_fused::attention_kernel_name(a);
  a.window = 0;
  CHECK(idle == cuda_fused::attention_kernel_name(a));
}

TEST_CASE("cuda Attention: a decode step whose past outgrows the window", "[cuda][attention]") {
  if (!cuda_check::gpu_ready()) return;
  const int64_t B = 2, H = 4, Hkv = 2, D = 64;
  for (int64_t past : {31, 300}) {  // 32 keys: inside the window (decode kernels); 301: past it
    INFO("past " << past);
    OpCase op("fuseopt", "Attention", 7, 3);
    attention_variant::set_heads(op, H, Hkv, true);
    op.attr(Attribute::make_int("window", 64));
    auto in = attention_variant::random_step(B, H, Hkv, D, past);
    op.inputs = {&in.q, &in.k, &in.v, nullptr, nullptr, &in.past_k, &in.past_v};
    auto want = op.run_cpu(DType::Float16);
    auto got = op.run_cuda(DType::Float16);
    attention_variant::check_outputs(got, want, DType::Float16);
  }
}
