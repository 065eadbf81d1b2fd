// Decode-row GEMV op cases shared by the kernel tests of the [N, K] GEMVs
// (cuda_gemv_nk_fused_test.cc, cuda_gemv_nk_mma_test.cc): LayerNormLinear and GatedMatMul
// run on CUDA with the weight stored [N, K], as the runtime stores it, against the CPU
// kernels on the model's [K, N] weight; the outputs NaN-poisoned by the harness; a launch
// counter says which kernel ran; W read as a constant before the launch wait gives the same bits.
#pragma once
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "runtime/kernel.h"
#include "support/cuda_kernel_check.h"

namespace fuseopt::decode_gemv {

using cuda_check::OpCase;

// Reads a kernel's launch counter (which path ran).
using LaunchCounter = long long (*)();

// [K, N] -> [N, K] (fp32 host tensors).
inline Tensor transposed(const Tensor& w) {
  const int64_t K = w.dims[0], N = w.dims[1];
  std::vector<float> t(K * N);
  const float* p = w.data<float>();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) t[n * K + k] = p[k * N + n];
  return Tensor::from_floats(t, {N, K});
}

// Runs the CUDA kernel, checking `count` went up by `launches`.
inline std::vector<Tensor> run_counted(OpCase& c, DType dt, LaunchCounter count, int launches) {
  const long long before = count();
  auto out = c.run_cuda(dt);
  CHECK(count() == before + launches);
  return out;
}

// Every output bit-identical (the kernels' sums run in the same order either way).
inline bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t o = 0; o < a.size(); ++o)
    if (a[o].dims != b[o].dims || a[o].bytes.size() != b[o].bytes.size() ||
        std::memcmp(a[o].bytes.data(), b[o].bytes.data(), a[o].bytes.size()) != 0)
      return false;
  return true;
}

struct LnlCase {
  int64_t rows, K, N;
  bool rms, beta, bias, skip;
  const char* act;
};

// One LayerNormLinear case: CUDA with W [N, K] (transB 1) against the CPU with W [K, N].
inline void check_layer_norm_linear(const LnlCase& p, DType dt, LaunchCounter count, int launches) {
  Tensor x = cuda_check::random_tensor({p.rows, 1, p.K}, -2.f, 3.f);
  Tensor gamma = cuda_check::random_tensor({p.K}, 0.5f, 1.5f);
  Tensor beta = cuda_check::random_tensor({p.K}, -0.5f, 0.5f);
  Tensor w = cuda_check::random_tensor({p.K, p.N}, -0.2f, 0.2f);
  Tensor wt = transposed(w);
  Tensor bias = cuda_check::random_tensor({p.N});
  Tensor skip = cuda_check::random_tensor({p.rows, 1, p.K}, -1.f, 1.f);
  const size_t outs = p.skip ? 2 : 1;
  auto make = [&](bool nk) {
    OpCase c("fuseopt", "LayerNormLinear", 6, outs);
    c.attr(Attribute::make_string("activation", p.act));
    c.attr(Attribute::make_float("epsilon", 1e-5f));
    c.attr(Attribute::make_int("rms", p.rms ? 1 : 0));
    c.attr(Attribute::make_int("transB", nk ? 1 : 0));
    c.inputs = {&x, &gamma, p.beta ? &beta : nullptr, nk ? &wt : &w, p.bias ? &bias : nullptr,
                p.skip ? &skip : nullptr};
    return c;
  };
  OpCase gpu = make(true), cpu = make(false);
  auto got = run_counted(gpu, dt, count, launches);
  auto want = cpu.run_cpu(dt);
  // W as the runtime's constant (its first loads before the launch wait): the same bits.
  gpu.constant_inputs = {3};
  auto early = run_counted(gpu, dt, count, launches);
  INFO("LayerNormLinear rows " << p.rows << " K " << p.K << " N " << p.N << " rms " << p.rms << " beta " << p.beta
                               << " bias " << p.bias << " skip " << p.skip << " " << p.act << " "
                               << cuda_check::short_name(dt));
  CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
  if (p.skip) CHECK(cuda_check::rel_error(got[1], want[1]) < cuda_check::tolerance(dt));
  CHECK(same_bits(early, got));
}

// One GatedMatMul case: CUDA with W [2N, K] (the runtime's marker) against the CPU with W [K, 2N].
inline void check_gated(int64_t rows, int64_t K, int64_t N, bool with_bias, const char* act, DType dt,
                        LaunchCounter count, int launches) {
  Tensor a = cuda_check::random_tensor({rows, 1, K}, -2.f, 2.f);
  Tensor w = cuda_check::random_tensor({K, 2 * N}, -0.2f, 0.2f);
  Tensor wt = transposed(w);
  Tensor bias = cuda_check::random_tensor({2 * N});
  OpCase gpu("fuseopt", "GatedMatMul", 3, 1), cpu("fuseopt", "GatedMatMul", 3, 1);
  for (OpCase* c : {&gpu, &cpu}) c->attr(Attribute::make_string("activation", act));
  gpu.attr(Attribute::make_int(kWeightNkAttr, 1));
  gpu.inputs = {&a, &wt, with_bias ? &bias : nullptr};
  cpu.inputs = {&a, &w, with_bias ? &bias : nullptr};
  auto got = run_counted(gpu, dt, count, launches);
  auto want = cpu.run_cpu(dt);
  gpu.constant_inputs = {1};  // W as the runtime's constant: the same bits
  auto early = run_counted(gpu, dt, count, launches);
  INFO("GatedMatMul rows " << rows << " K " << K << " N " << N << " bias " << with_bias << " " << act << " "
                           << cuda_check::short_name(dt));
  CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
  CHECK(same_bits(early, got));
}


}  // namespace fuseopt::decode_gemv
