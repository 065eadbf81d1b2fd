// Weights fetched into L2 ahead of small-row GEMMs (kernels/cuda/l2_prefetch.h and the Session's
// plan in src/runtime/session_step.cc): a chain of MatMuls over constant weights at 128 rows
// issues one prefetch per GEMM after the first, at 4096 rows and with the switch off none;
// outputs are bit-identical with and without prefetching, eager, captured and replayed, and
// match the CPU backend. The kernel's ordering contract (its completion implies its
// predecessor's) is checked directly: a GEMM, the prefetch, then a PDL-launched kernel of ours
// that reads the GEMM's output, with that output NaN-poisoned before every run.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/float_convert.h"
#include "kernels/cuda/gemm_cublaslt.h"
#include "kernels/cuda/l2_prefetch.h"
#include "kernels/cuda/pdl.h"
#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/cuda_host_buffers.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

namespace {

// x [R, 256] -> MatMul W1 [256, 1024] -> Relu -> MatMul W2 [1024, 512] -> MatMul W3 [512, 256]:
// stored as fp16, W2 is 1 MB and W3 256 KB. The first GEMM's weight has no predecessor; W2 is
// prefetched after the first GEMM; W3 is under the 512 KB threshold (a launch for nothing).
std::unique_ptr<Graph> build_chain() {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {-1, 256}, {"rows", ""});
  Value* h = b.op("MatMul", {x, b.constant("w1", randn({256, 1024}, 0.06f))});
  h = b.op("Relu", {h});
  h = b.op("MatMul", {h, b.constant("w2", randn({1024, 512}, 0.03f))});
  h = b.op("MatMul", {h, b.constant("w3", randn({512, 256}, 0.04f))});
  b.output(h);
  return b.release();
}

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.bytes == b.bytes;
}

// Three runs (eager, captured, replayed) with prefetching forced on or off; returns the last
// outputs and how many prefetch kernels the three runs enqueued.
std::vector<Tensor> run_chain(const Graph& g, const std::map<std::string, Tensor>& in, int prefetch,
                              long long* launched) {
  cuda::set_l2_prefetch_override(prefetch);
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.precision = Precision::FP16;
  Session s(g, o);
  const long long before = cuda::l2_prefetch_launch_count();
  std::vector<Tensor> first, got;
  for (int rep = 0; rep < 3; ++rep) {
    got = s.run(in);
    if (rep == 0) first = got;
  }
  *launched = cuda::l2_prefetch_launch_count() - before;
  cuda::set_l2_prefetch_override(-1);
  for (size_t i = 0; i < got.size(); ++i) CHECK(bit_identical(got[i], first[i]));
  return got;
}

bool hopper() {
  int device = 0, major = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

}  // namespace

TEST_CASE("cuda L2 prefetch: issued between small-row GEMMs, never changes a result", "[cuda][l2_prefetch]") {
  std::unique_ptr<Graph> g = build_chain();
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  Session cpu(*g, cpu_o);
  const std::map<std::string, Tensor> small{{"x", randn({128, 256})}}, large{{"x", randn({4096, 256})}};
  const auto want = cpu.run(small);  // the graph itself is valid (runs in CI too)
  REQUIRE(want.size() == 1);
  if (!gpu_ready()) return;
  if (!hopper() || !cuda_pdl::enabled()) {
    WARN("L2 prefetch tests skipped: the device is below sm_90 or PDL is off (the prefetch needs both)");
    return;
  }
  long long on = 0, off = 0, on_large = 0;
  const auto with = run_chain(*g, small, 1, &on);
  const auto without = run_chain(*g, small, 0, &off);
  run_chain(*g, large, 1, &on_large);
  // W2 after the first GEMM, once per run: the eager run, the captured one (the replay
  // launches the graph, not the host code).
  CHECK(on == 2);
  CHECK(off == 0);
  CHECK(on_large == 0);  // 4096 rows: compute-bound GEMMs, nothing prefetched
  REQUIRE(with.size() == 1);
  CHECK(bit_identical(with[0], without[0]));
  compare(with[0], want[0], DType::Float16);
}

TEST_CASE("cuda L2 prefetch kernel keeps the stream's order for PDL-launched successors", "[cuda][l2_prefetch]") {
  if (!gpu_ready()) return;
  if (!hopper() || !cuda_pdl::enabled()) {
    WARN("L2 prefetch tests skipped: the device is below sm_90 or PDL is off (the prefetch needs both)");
    return;
  }
  cuda::set_l2_prefetch_override(1);
  cudaStream_t s;
  cuda_check::ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  // A GEMM long enough that a successor starting early would find the poison: 512 x 4096 x 4096.
  const int64_t M = 512, K = 4096, N = 4096;
  const auto A = cuda_check::random_values(DType::Float16, M * K, -1.f, 1.f);
  const auto W = cuda_check::random_values(DType::Float16, K * N, -1.f, 1.f);
  const auto W2 = cuda_check::random_values(DType::Float16, K * N, -1.f, 1.f);
  cuda_check::DevBuf dA(M * K * 2), dW(K * N * 2), dW2(K * N * 2), dY(M * N * 2), dZ(M * N * 4), ws(32u << 20);
  cuda_check::upload(DType::Float16, dA.p, A);
  cuda_check::upload(DType::Float16, dW.p, W);
  cuda_check::upload(DType::Float16, dW2.p, W2);
  cuda_fused::GemmDesc d;
  d.dtype = DType::Float16;
  d.M = M;
  d.N = N;
  d.K = K;
  void* wsp = ws.p;
  auto scratch = [wsp](size_t) { return wsp; };
  auto chain = [&] {
    cuda_check::ck(cudaMemsetAsync(dY.p, 0xff, M * N * 2, s), "poison");
    cuda_fused::gemm(d, dA.p, dW.p, dY.p, s, scratch);
    REQUIRE(cuda::launch_l2_prefetch(dW2.p, K * N * 2, s));
    // PDL-launched: it starts as soon as the prefetch kernel lets it and relies on that
    // kernel's completion implying the GEMM's.
    REQUIRE(cuda::launch_float_convert(dZ.p, DType::Float, dY.p, DType::Float16, M * N, s));
  };
  chain();
  cuda_check::ck(cudaStreamSynchronize(s), "eager");
  const auto y = cuda_check::download(DType::Float16, dY.p, M * N);
  const auto z = cuda_check::download(DType::Float, dZ.p, M * N);
  size_t bad = 0;
  for (size_t i = 0; i < y.size(); ++i)
    if (!(z[i] == y[i]) || std::isnan(z[i])) ++bad;
  CHECK(bad == 0);
  // Spot-check the GEMM itself (row 0 and the last row, a few columns) in fp64.
  for (int64_t m : {int64_t(0), M - 1})
    for (int64_t n : {int64_t(0), int64_t(1777), N - 1}) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[m * K + k]) * W[k * N + n];
      CHECK(std::fabs(z[m * N + n] - acc) <= 0.02 * std::sqrt(double(K)) + 1e-2 * std::fabs(acc));
    }
  // Captured and replayed: the same order inside the graph.
  cudaGraph_t graph = nullptr;
  cuda_check::ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  chain();
  cuda_check::ck(cudaStreamEndCapture(s, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  cuda_check::ck(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  for (int rep = 0; rep < 3; ++rep) {
    cuda_check::ck(cudaMemsetAsync(dZ.p, 0xff, M * N * 4, s), "poison z");
    cuda_check::ck(cudaGraphLaunch(exec, s), "replay");
    cuda_check::ck(cudaStreamSynchronize(s), "replay");
    const auto zr = cuda_check::download(DType::Float, dZ.p, M * N);
    CHECK(std::memcmp(zr.data(), z.data(), z.size() * sizeof(float)) == 0);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cuda::set_l2_prefetch_override(-1);
}
