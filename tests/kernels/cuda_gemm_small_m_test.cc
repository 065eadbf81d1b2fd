// The weight-streaming small-M GEMM (kernels/cuda/gemm_small_m.cu): against a
// host fp64 reference on fresh random inputs with Y NaN-poisoned first, M 1..8
// (each template size and the rows it pads), K and N off every tile and split
// (K 1, 7, 64, 1000, 2049, 8192; N 8, 24, 1000, 3072), both B layouts, with and
// without bias, fp16 and bf16, every activation and alpha; the gated variant
// (GatedMatMul's product and gate in one kernel); bit-identity over
// runs and CUDA-graph replays (the cluster's split-K sum), and with B read as a constant
// weight before the launch wait (the same bits); the cases it must
// refuse (Y untouched); and MatMul / FusedMatMul / LayerNormLinear /
// GatedMatMul at decode row counts through the kernel registry against the
// CPU kernels.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/gemm_small_m.h"
#include "support/cuda_host_buffers.h"
#include "support/cuda_kernel_check.h"

using namespace fuseopt;

namespace {

using cuda_check::ck;
using cuda_check::DevBuf;
using cuda_check::OpCase;
using cuda_fused::GemvAct;

uint16_t to16(DType dt, float v) { return dt == DType::Float16 ? float_to_half(v) : float_to_bf16(v); }
float from16(DType dt, uint16_t h) { return dt == DType::Float16 ? half_to_float(h) : bf16_to_float(h); }

std::vector<float> values(DType dt, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = from16(dt, to16(dt, u(cuda_check::rng())));
  return v;
}

void upload16(DType dt, void* dst, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = to16(dt, v[i]);
  cuda_check::upload_bytes(dst, h.data(), h.size() * 2);
}

std::vector<uint16_t> download_bits(const void* src, size_t n) {
  std::vector<uint16_t> h(n);
  ck(cudaMemcpy(h.data(), src, n * 2, cudaMemcpyDeviceToHost), "download");
  return h;
}

std::vector<float> as_float(DType dt, const std::vector<uint16_t>& h) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = from16(dt, h[i]);
  return v;
}

// Non-blocking stream, as in the runtime (PDL is not used on the legacy stream).
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream"); }
  ~Stream() { cudaStreamDestroy(s); }
};

// A [M, K], B as [K, N] and as [N, K] (the same values), bias [N]; the fp64
// product once, the epilogues on top.
struct Problem {
  DType dt;
  int64_t M, K, N;
  std::vector<float> A, B, bias;
  std::vector<double> prod;
  DevBuf dA, dB, dBt, dbias, dY;
  Problem(DType d, int64_t m, int64_t k, int64_t n)
      : dt(d), M(m), K(k), N(n), A(values(d, m * k, -2.f, 2.f)), B(values(d, k * n, -0.3f, 0.3f)),
        bias(values(d, n, -1.f, 1.f)), prod(m * n, 0.0), dA(m * k * 2), dB(k * n * 2), dBt(k * n * 2),
        dbias(n * 2), dY(m * n * 2) {
    upload16(dt, dA.p, A);
    upload16(dt, dB.p, B);
    std::vector<float> bt(K * N);
    for (int64_t kk = 0; kk < K; ++kk)
      for (int64_t nn = 0; nn < N; ++nn) bt[nn * K + kk] = B[kk * N + nn];
    upload16(dt, dBt.p, bt);
    upload16(dt, dbias.p, bias);
    for (int64_t mm = 0; mm < M; ++mm)
      for (int64_t kk = 0; kk < K; ++kk) {
        const double a = A[mm * K + kk];
        const float* brow = &B[kk * N];
        double* y = &prod[mm * N];
        for (int64_t nn = 0; nn < N; ++nn) y[nn] += a * brow[nn];
      }
  }
  void poison(cudaStream_t s) { ck(cudaMemsetAsync(dY.p, 0xFF, M * N * 2, s), "poison"); }
  // b_const: B as the runtime's constant weight (its first loads before the launch wait).
  bool launch(cudaStream_t s, bool trans_b, bool with_bias, GemvAct act = GemvAct::None, float alpha = 1.f,
              bool b_const = false) {
    return cuda_fused::launch_gemm_small_m(dt, act, dA.p, trans_b ? dBt.p : dB.p, with_bias ? dbias.p : nullptr,
                                           dY.p, M, N, K, trans_b, s, alpha, b_const);
  }
  std::vector<double> reference(bool with_bias, GemvAct act = GemvAct::None, float alpha = 1.f) const {
    std::vector<double> y(M * N);
    for (int64_t i = 0; i < M * N; ++i) {
      const double v = alpha * prod[i] + (with_bias ? bias[i % N] : 0.0);
      switch (act) {
        case GemvAct::None: y[i] = v; break;
        case GemvAct::Relu: y[i] = v > 0 ? v : 0; break;
        case GemvAct::GeluErf: y[i] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
        case GemvAct::GeluTanh:
          y[i] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          break;
        case GemvAct::Tanh: y[i] = std::tanh(v); break;
        case GemvAct::Relu2: y[i] = v > 0 ? v * v : 0; break;
      }
    }
    return y;
  }
  double tol() const { return dt == DType::Float16 ? 2e-3 : 1e-2; }
};

// Runs one launch on freshly poisoned Y; returns Y's bits.
std::vector<uint16_t> run(Problem& p, cudaStream_t s, bool trans_b, bool with_bias, GemvAct act = GemvAct::None,
                          float alpha = 1.f, bool b_const = false) {
  p.poison(s);
  REQUIRE(p.launch(s, trans_b, with_bias, act, alpha, b_const));
  ck(cudaStreamSynchronize(s), "kernel");
  return download_bits(p.dY.p, p.M * p.N);
}

bool all_nan(DType dt, const std::vector<uint16_t>& h) {
  for (uint16_t x : h)
    if (!std::isnan(from16(dt, x))) return false;
  return true;
}

// c.run_cuda(dt), checking it launched the kernel once (on) or never (off).
std::vector<Tensor> run_counted(OpCase& c, DType dt, int on) {
  const long long before = cuda_fused::gemm_small_m_launch_count();
  auto out = c.run_cuda(dt);
  CHECK(cuda_fused::gemm_small_m_launch_count() == before + on);
  return out;
}

}  // namespace

TEST_CASE("cuda small-M GEMV kernel matches the reference", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  cuda_fused::set_gemm_small_m(1);
  struct Shape { int64_t K, N; };
  // Llama-1B's o-proj, QKV and down-proj, then K and N off the 64-column
  // tile, the 32-row step and the splits (K 1 and 7: fewer rows than one step;
  // 2049: uneven splits); N 16392: more [N, K] blocks than the GPU holds at once
  // (later waves start without the early loads' head start).
  const Shape shapes[] = {{2048, 2048}, {2048, 3072}, {8192, 2048}, {1, 8},        {7, 24},
                          {64, 1000},   {1000, 3072}, {2049, 24},   {8192, 1000}, {1024, 16392}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int64_t M : {1, 2, 3, 5, 8})
      for (const Shape& s : shapes) {
        Problem p(dt, M, s.K, s.N);
        for (int trans_b = 0; trans_b < 2; ++trans_b) {
          if (trans_b && s.K % 8 != 0) continue;  // [N, K] rows must be 16-byte chunks
          for (int with_bias = 0; with_bias < 2; ++with_bias) {
            INFO(cuda_check::short_name(dt) << " M " << M << " K " << s.K << " N " << s.N << " trans_b " << trans_b
                                            << " bias " << with_bias);
            const auto bits = run(p, st.s, trans_b, with_bias);
            const double err = cuda_check::rel_err(as_float(dt, bits), p.reference(with_bias));
            INFO("relative error " << err);
            CHECK(err < p.tol());
            // B as a constant weight (first loads before the launch wait): the same bits.
            const bool early_same = run(p, st.s, trans_b, with_bias, GemvAct::None, 1.f, true) == bits;
            CHECK(early_same);
          }
        }
      }
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda small-M GEMV kernel: every activation and alpha", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  cuda_fused::set_gemm_small_m(1);
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (int64_t M : {1, 3, 8}) {
      Problem p(dt, M, 1000, 1000);
      for (GemvAct act :
           {GemvAct::None, GemvAct::Relu, GemvAct::GeluErf, GemvAct::GeluTanh, GemvAct::Tanh, GemvAct::Relu2})
        for (float alpha : {1.f, 0.5f})
          for (int trans_b = 0; trans_b < 2; ++trans_b) {
            INFO(cuda_check::short_name(dt) << " M " << M << " act " << int(act) << " alpha " << alpha
                                            << " trans_b " << trans_b);
            const auto got = as_float(dt, run(p, st.s, trans_b, true, act, alpha));
            const double err = cuda_check::rel_err(got, p.reference(true, act, alpha));
            INFO("relative error " << err);
            CHECK(err < p.tol());
          }
    }
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda small-M gated GEMV (GatedMatMul in one kernel) matches the reference", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  using cuda_fused::GateActivation;
  Stream st;
  cuda_fused::set_gemm_small_m(1);
  struct Shape { int64_t M, K, N; };  // N: the output's columns (W is [K, 2N])
  // Llama-1B's gate+up at batch 1 and 8; then off the 32-column tile and the splits.
  const Shape shapes[] = {{1, 2048, 8192}, {8, 2048, 8192}, {3, 7, 24}, {5, 1000, 1000}, {2, 2049, 8}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      Problem p(dt, s.M, s.K, 2 * s.N);
      DevBuf dY(s.M * s.N * 2);
      for (GateActivation act : {GateActivation::Silu, GateActivation::Gelu, GateActivation::GeluTanh,
                                 GateActivation::Relu})
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " N " << s.N << " act " << int(act)
                                          << " bias " << with_bias);
          ck(cudaMemsetAsync(dY.p, 0xFF, s.M * s.N * 2, st.s), "poison");
          REQUIRE(cuda_fused::launch_gated_small_m(dt, act, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr, dY.p,
                                                   s.M, s.N, s.K, st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          const auto bits = download_bits(dY.p, s.M * s.N);
          const std::vector<double> pre = p.reference(with_bias);  // [M, 2N]
          std::vector<double> want(s.M * s.N);
          for (int64_t m = 0; m < s.M; ++m)
            for (int64_t j = 0; j < s.N; ++j) {
              const double g = pre[m * 2 * s.N + j], u = pre[m * 2 * s.N + s.N + j];
              double a = 0;
              switch (act) {
                case GateActivation::Silu: a = g / (1.0 + std::exp(-g)); break;
                case GateActivation::Gelu: a = 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))); break;
                case GateActivation::GeluTanh:
                  a = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
                  break;
                case GateActivation::Relu: a = g > 0 ? g : 0; break;
              }
              want[m * s.N + j] = a * u;
            }
          const double err = cuda_check::rel_err(as_float(dt, bits), want);
          INFO("relative error " << err);
          CHECK(err < p.tol());
          // Bit-identical on a second run.
          ck(cudaMemsetAsync(dY.p, 0xFF, s.M * s.N * 2, st.s), "poison");
          REQUIRE(cuda_fused::launch_gated_small_m(dt, act, p.dA.p, p.dB.p, with_bias ? p.dbias.p : nullptr, dY.p,
                                                   s.M, s.N, s.K, st.s));
          ck(cudaStreamSynchronize(st.s), "kernel");
          const bool same = download_bits(dY.p, s.M * s.N) == bits;
          CHECK(same);
        }
    }
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda small-M GEMV kernel is bit-identical over runs and graph replays", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  cuda_fused::set_gemm_small_m(1);
  struct Shape { int64_t M, K, N; };
  const Shape shapes[] = {{1, 2048, 3072}, {8, 8192, 2048}, {5, 2049, 1000}};
  for (DType dt : {DType::Float16, DType::BFloat16})
    for (const Shape& s : shapes) {
      Problem p(dt, s.M, s.K, s.N);
      for (int trans_b = 0; trans_b < 2; ++trans_b) {
        if (trans_b && s.K % 8 != 0) continue;
        INFO(cuda_check::short_name(dt) << " M " << s.M << " K " << s.K << " N " << s.N << " trans_b " << trans_b);
        const auto first = run(p, st.s, trans_b, true);
        CHECK(cuda_check::rel_err(as_float(dt, first), p.reference(true)) < p.tol());
        const bool again_same = run(p, st.s, trans_b, true) == first;  // (not CHECK(a == b): it would print both)
        CHECK(again_same);
        // Three launches captured into one graph (split-K state, if any, must
        // be per launch), the graph replayed twice.
        cudaGraph_t g = nullptr;
        cudaGraphExec_t e = nullptr;
        ck(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeThreadLocal), "capture");
        for (int i = 0; i < 3; ++i) REQUIRE(p.launch(st.s, trans_b, true, GemvAct::None, 1.f, i == 1));
        ck(cudaStreamEndCapture(st.s, &g), "end capture");
        ck(cudaGraphInstantiate(&e, g, 0), "instantiate");
        for (int replay = 0; replay < 2; ++replay) {
          p.poison(st.s);
          ck(cudaGraphLaunch(e, st.s), "replay");
          ck(cudaStreamSynchronize(st.s), "replay");
          const bool replay_same = download_bits(p.dY.p, p.M * p.N) == first;
          CHECK(replay_same);
        }
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(g);
      }
    }
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda small-M GEMV kernel refuses what it does not handle", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  Stream st;
  const DType dt = DType::Float16;
  Problem p(dt, 9, 64, 64);
  auto refused = [&](const void* a, const void* b, void* y, int64_t M, int64_t N, int64_t K, bool trans_b, DType t) {
    p.poison(st.s);
    const bool launched =
        cuda_fused::launch_gemm_small_m(t, GemvAct::None, a, b, p.dbias.p, y, M, N, K, trans_b, st.s);
    ck(cudaStreamSynchronize(st.s), "kernel");
    return !launched && all_nan(dt, download_bits(p.dY.p, 9 * 64));
  };
  cuda_fused::set_gemm_small_m(0);
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 1, 64, 64, false, dt));  // switched off
  cuda_fused::set_gemm_small_m(1);
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 9, 64, 64, false, dt));                         // M over 8
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 0, 64, 64, false, dt));                         // empty
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 2, 60, 64, false, dt));                         // N % 8 != 0
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 2, 64, 60, true, dt));                          // [N, K], K % 8 != 0
  CHECK(refused(p.dA.p, p.dB.p, p.dY.p, 2, 64, 64, false, DType::Float));               // fp32
  CHECK(refused(p.dA.p, static_cast<char*>(p.dB.p) + 2, p.dY.p, 2, 64, 64, false, dt));  // misaligned B
  CHECK(refused(static_cast<char*>(p.dA.p) + 2, p.dB.p, p.dY.p, 2, 64, 64, true, dt));   // [N, K], misaligned A
  // A needs no alignment with B [K, N] (it is staged element by element).
  p.poison(st.s);
  CHECK(cuda_fused::launch_gemm_small_m(dt, GemvAct::None, static_cast<char*>(p.dA.p) + 2, p.dB.p, nullptr, p.dY.p,
                                        2, 64, 63, false, st.s));
  ck(cudaStreamSynchronize(st.s), "kernel");
  cuda_fused::set_gemm_small_m(-1);
}

TEST_CASE("cuda MatMul / FusedMatMul / LayerNormLinear / GatedMatMul at decode rows", "[cuda][gemm_small_m]") {
  if (!cuda_check::gpu_ready()) return;
  for (int on : {1, 0}) {
    cuda_fused::set_gemm_small_m(on);  // the kernel, then cuBLASLt: both against the CPU
    for (DType dt : {DType::Float16, DType::BFloat16}) {
      INFO("FUSEOPT_GEMV " << on << " " << cuda_check::short_name(dt));
      {
        OpCase c("", "MatMul", 2, 1);
        Tensor a = cuda_check::random_tensor({2, 1, 96}), b = cuda_check::random_tensor({96, 72});
        c.inputs = {&a, &b};
        auto got = run_counted(c, dt, on);
        auto want = c.run_cpu(dt);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      for (int trans_b = 0; trans_b < 2; ++trans_b)
        for (const char* act : {"none", "relu", "gelu", "gelu_tanh", "tanh", "relu2"}) {
          OpCase c("fuseopt", "FusedMatMul", 3, 1);
          c.attr(Attribute::make_string("activation", act));
          c.attr(Attribute::make_int("transB", trans_b));
          Tensor a = cuda_check::random_tensor({5, 1, 200}, -2.f, 2.f);
          Tensor b = cuda_check::random_tensor(trans_b ? std::vector<int64_t>{136, 200} : std::vector<int64_t>{200, 136});
          Tensor bias = cuda_check::random_tensor({136});
          c.inputs = {&a, &b, &bias};
          auto got = run_counted(c, dt, on);
          auto want = c.run_cpu(dt);
          INFO("FusedMatMul " << act << " transB " << trans_b);
          CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
        }
      {
        OpCase c("fuseopt", "LayerNormLinear", 6, 1);
        c.attr(Attribute::make_string("activation", "none"));
        c.attr(Attribute::make_float("epsilon", 1e-5f));
        c.attr(Attribute::make_int("rms", 1));
        Tensor x = cuda_check::random_tensor({3, 1, 256}, -2.f, 3.f);
        Tensor gamma = cuda_check::random_tensor({256}, 0.5f, 1.5f);
        Tensor w = cuda_check::random_tensor({256, 264});
        c.inputs = {&x, &gamma, nullptr, &w, nullptr, nullptr};
        auto got = run_counted(c, dt, on);
        auto want = c.run_cpu(dt);
        INFO("LayerNormLinear rms");
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
      for (const char* act : {"silu", "gelu", "gelu_tanh", "relu"}) {
        OpCase c("fuseopt", "GatedMatMul", 3, 1);
        c.attr(Attribute::make_string("activation", act));
        Tensor a = cuda_check::random_tensor({5, 1, 256});
        Tensor w = cuda_check::random_tensor({256, 2 * 136}), bias = cuda_check::random_tensor({2 * 136});
        c.inputs = {&a, &w, &bias};
        auto got = run_counted(c, dt, on);
        auto want = c.run_cpu(dt);
        INFO("GatedMatMul " << act);
        CHECK(cuda_check::rel_error(got[0], want[0]) < cuda_check::tolerance(dt));
      }
    }
  }
  cuda_fused::set_gemm_small_m(-1);
}
