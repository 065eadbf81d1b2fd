// Weights fetched into L2 ahead of small-row GEMMs (kernels/cuda/l2_prefetch.h and the Session's
// plan in src/runtime/session_step.cc): a chain of MatMuls over constant weights at 128 rows
// issues one prefetch per GEMM after the first, at 4096 rows and with the switch off none;
// outputs are bit-identical with and without prefetching, eager, captured and replayed, and
// match the CPU backend. The backend's fork and join: a prefetch beside a copy and a
// PDL-launched reader, eager and captured (the capture must end with the side stream joined),
// the reader's output NaN-poisoned before every replay.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/l2_prefetch.h"
#include "runtime/backend.h"
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
  if (!hopper()) {
    WARN("L2 prefetch tests skipped: the device is below sm_90 (the bulk prefetch instruction)");
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

TEST_CASE("cuda L2 prefetch beside the stream: joined by capture and by the run, results unchanged",
          "[cuda][l2_prefetch]") {
  if (!gpu_ready()) return;
  if (!hopper()) {
    WARN("L2 prefetch tests skipped: the device is below sm_90 (the bulk prefetch instruction)");
    return;
  }
  cuda::set_l2_prefetch_override(1);
  std::unique_ptr<BackendImpl> be = make_backend(Backend::CUDA);
  const size_t n = 1 << 20, w_bytes = 4u << 20;
  const auto src = cuda_check::random_values(DType::Float16, n, -4.f, 4.f);
  void* w = be->alloc(w_bytes);
  void* x = be->alloc(n * 2);
  void* y = be->alloc(n * 2);
  void* z = be->alloc(n * 4);
  cuda_check::upload(DType::Float16, x, src);
  // x -> y (copy), the prefetch forked beside it, y -> z (a PDL-launched conversion).
  auto body = [&] {
    be->copy_within(y, x, n * 2);
    CHECK(be->prefetch_to_l2(w, w_bytes));
    REQUIRE(be->convert_float(z, DType::Float, y, DType::Float16, static_cast<int64_t>(n)));
  };
  auto check_z = [&] {
    const auto got = cuda_check::download(DType::Float, z, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      if (!(got[i] == src[i])) ++bad;
    CHECK(bad == 0);
  };
  const long long before = cuda::l2_prefetch_launch_count();
  body();
  be->join_prefetches();
  be->synchronize();
  check_z();
  auto graph = be->capture(body);  // ends with the side stream joined, or EndCapture fails
  REQUIRE(graph);
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<uint8_t> nan_bytes(n * 4, 0xff);
    be->copy_from_host(z, nan_bytes.data(), nan_bytes.size());
    be->replay(graph);
    be->synchronize();
    check_z();
  }
  CHECK(cuda::l2_prefetch_launch_count() - before == 2);  // eager and captured; replays launch the graph
  be->free(w);
  be->free(x);
  be->free(y);
  be->free(z);
  cuda::set_l2_prefetch_override(-1);
}
