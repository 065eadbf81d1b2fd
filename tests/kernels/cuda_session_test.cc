// The CUDA backend through a whole Session: a small graph with dynamic dims,
// host-placed shape math, views and device kernels runs on the GPU and matches
// the CPU backend; CUDA-graph replays are bit-identical to eager runs; a new
// input shape gets its own plan; fp16 stays within 1e-2. Also the backend
// object itself (pool reuse, copies, capture/replay, timing).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "runtime/backend.h"
#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/cuda_session_check.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

namespace {

// x [B, S, 24] -> LayerNorm -> Add bias -> Reshape to heads [B, S, 4, 6] -> Transpose
// -> Softmax -> Transpose back -> Reshape (from Shape/Gather/Concat shape math)
// -> Mul by a mask-derived where -> ReduceMean over last axis.
std::unique_ptr<Graph> build_graph() {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {-1, -1, 24}, {"batch", "seq"});
  Value* mask = b.input("mask", DType::Int64, {-1, -1}, {"batch", "seq"});
  Tensor gamma = uniform({24}, 0.5f, 1.5f), beta = randn({24}), bias = randn({24});
  Value* ln = b.op("LayerNormalization", {x, b.constant("gamma", gamma), b.constant("beta", beta)},
                   {Attribute::make_int("axis", -1), Attribute::make_float("epsilon", 1e-5f)});
  Value* h = b.op("Add", {ln, b.constant("bias", bias)});
  Value* heads = b.op("Reshape", {h, b.constant("heads_shape", Tensor::from_ints({0, 0, 4, 6}, {4}))});
  Value* t = b.op("Transpose", {heads}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  Value* sm = b.op("Softmax", {t}, {Attribute::make_int("axis", -1)});
  Value* back = b.op("Transpose", {sm}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  // Shape math: [B, S, 24] from Shape(x) -> the host.
  Value* shp = b.op("Shape", {x});
  Value* bs = b.op("Slice", {shp, b.constant("s0", Tensor::from_ints({0}, {1})), b.constant("s2", Tensor::from_ints({2}, {1}))});
  Value* full = b.op("Concat", {bs, b.constant("hidden", Tensor::from_ints({24}, {1}))}, {Attribute::make_int("axis", 0)});
  Value* merged = b.op("Reshape", {back, full});
  // Mask: [B, S] int64 -> bool -> [B, S, 1] -> Where(mask, merged, -1).
  Value* keep = b.op("Cast", {mask}, {Attribute::make_int("to", static_cast<int64_t>(DType::Bool))});
  Value* keep3 = b.op("Unsqueeze", {keep, b.constant("ax", Tensor::from_ints({-1}, {1}))});
  Value* masked = b.op("Where", {keep3, merged, b.constant("neg", Tensor::scalar_float(-1.f))});
  Value* red = b.op("ReduceMean", {masked}, {Attribute::make_ints("axes", {-1}), Attribute::make_int("keepdims", 0)});
  b.output(masked);
  b.output(red);
  return b.release();
}

std::map<std::string, Tensor> feeds(int64_t batch, int64_t seq) {
  return {{"x", randn({batch, seq, 24}, 2.f)}, {"mask", randint({batch, seq}, 0, 1)}};
}

}  // namespace

TEST_CASE("cuda backend: pool, copies, capture and replay", "[cuda][backend]") {
  if (!gpu_ready()) return;
  std::unique_ptr<BackendImpl> be = make_backend(Backend::CUDA);
  REQUIRE(be->kind() == Backend::CUDA);
  INFO(be->device_name());
  void* a = be->alloc(1000);
  be->free(a);
  void* b = be->alloc(900);  // same size class: the cached block comes back
  CHECK(a == b);
  std::vector<float> host(250), back(250, 0.f);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  be->copy_from_host(b, host.data(), 1000);
  void* c = be->alloc(1000);
  auto graph = be->capture([&] { be->copy_within(c, b, 1000); });
  REQUIRE(graph);
  be->replay(graph);
  be->copy_to_host(back.data(), c, 1000);
  CHECK(back == host);
  const double ms = be->elapsed_ms([&] { be->replay(graph); });
  CHECK(ms >= 0.0);
  be->free(b);
  be->free(c);
}

TEST_CASE("cuda Session matches the CPU backend; graph replays are bit-identical", "[cuda][session]") {
  std::unique_ptr<Graph> g = build_graph();
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  Session cpu(*g, cpu_o);
  REQUIRE(cpu.run(feeds(2, 5)).size() == 2);  // the test graph itself is valid (runs in CI too)
  if (!gpu_ready()) return;
  SessionOptions eager_o;
  eager_o.backend = Backend::CUDA;
  eager_o.cuda_graphs = false;
  Session eager(*g, eager_o);
  SessionOptions graph_o;
  graph_o.backend = Backend::CUDA;
  Session graphed(*g, graph_o);

  for (auto [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{2, 16}, {3, 37}, {2, 16}}) {
    const auto in = feeds(batch, seq);
    const auto want = cpu.run(in);
    const auto got_eager = eager.run(in);
    std::vector<Tensor> got_graph;
    for (int rep = 0; rep < 3; ++rep) got_graph = graphed.run(in);  // 1st eager, 2nd captured, 3rd replayed
    INFO("batch " << batch << " seq " << seq);
    REQUIRE(got_eager.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      compare(got_eager[i], want[i], DType::Float);
      CHECK(bit_identical(got_graph[i], got_eager[i]));
    }
  }
  CHECK(graphed.profile().graph_replays > 0);
  INFO("capture disabled: " << graphed.profile().capture_disabled_reason);
  CHECK(graphed.profile().capture_possible);
}

TEST_CASE("cuda Session in fp16 and bf16 stays within 1e-2", "[cuda][session]") {
  if (!gpu_ready()) return;
  std::unique_ptr<Graph> g = build_graph();
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  Session cpu(*g, cpu_o);
  for (Precision p : {Precision::FP16, Precision::BF16}) {
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.precision = p;
    Session s(*g, o);
    const auto in = feeds(2, 19);
    const auto want = cpu.run(in);
    // Run 1 eager, 2 captured, 3 replayed: the replay converts the float input
    // to the compute dtype and the outputs back to Float on the device.
    std::vector<Tensor> first, got;
    for (int rep = 0; rep < 3; ++rep) {
      got = s.run(in);
      if (rep == 0) first = got;
    }
    CHECK(s.profile().graph_replays > 0);
    for (size_t i = 0; i < want.size(); ++i) {
      INFO(precision_name(p) << " output " << i);
      CHECK(bit_identical(got[i], first[i]));
      REQUIRE(got[i].dtype == DType::Float);  // returned in the declared dtype
      REQUIRE(got[i].dims == want[i].dims);
      bool nan_ok = true;
      const double err = norm_rel_error(got[i], want[i], &nan_ok);
      INFO("norm-wise relative error " << err);
      CHECK(nan_ok);
      CHECK(err <= 1e-2);
    }
  }
}

// The last norm of an fp16 run writes a float graph output as float itself when nothing else
// reads it (KernelContext::output_delivered_dtype): with fp16-exact inputs the result is then the
// fp32 computation unrounded (within 1e-5 of the CPU), where an fp16 Y converted after the run is
// off by fp16's rounding (~2e-4). When another node reads Y, Y stays fp16 for it (within 1e-2).
TEST_CASE("cuda Session: a norm whose output is a float graph output writes it as float", "[cuda][session][norm]") {
  if (!gpu_ready()) return;
  auto fp16_exact = [](const Tensor& t) { return convert_float(convert_float(t, DType::Float16), DType::Float); };
  for (int also_read = 0; also_read < 2; ++also_read) {
    for (const char* op : {"SkipLayerNorm", "LayerNorm", "RMSNorm"}) {
      INFO(op << (also_read ? ", Y also read by a Relu" : ""));
      GraphBuilder b(17);
      Value* x = b.input("x", DType::Float, {-1, 40}, {"rows"});
      Value* skip = b.input("skip", DType::Float, {-1, 40}, {"rows"});
      Value* gamma = b.constant("gamma", fp16_exact(uniform({40}, 0.5f, 1.5f)));
      Value* beta = b.constant("beta", fp16_exact(randn({40})));
      Value* y = std::string(op) == "SkipLayerNorm" ? b.op(op, {x, skip, gamma, beta}, {}, "", "fuseopt")
                 : std::string(op) == "LayerNorm"   ? b.op(op, {x, gamma, beta}, {}, "", "fuseopt")
                                                    : b.op(op, {x, gamma}, {}, "", "fuseopt");
      b.output(y);
      if (also_read) b.output(b.op("Relu", {y}));
      std::unique_ptr<Graph> g = b.release();
      const std::map<std::string, Tensor> in{{"x", fp16_exact(randn({37, 40}, 2.f))},
                                             {"skip", fp16_exact(randn({37, 40}))}};
      const std::vector<double> errs = float_output_errors(*g, in, Precision::FP16);
      for (size_t i = 0; i < errs.size(); ++i) {
        INFO("output " << i << " norm-wise relative error " << errs[i]);
        CHECK(errs[i] <= (also_read ? 1e-2 : 1e-5));
        if (also_read) CHECK(errs[i] > 1e-5);  // Y went through fp16 (the Relu reads it there)
      }
    }
  }
}

// An odd-N GEMM whose 16-bit output rows are packed (gemm_pack.h; BERT's 30522-word logits) and
// which is a float graph output: the pack writes float (the conversion folded into it). Rows of
// 71 floats start at 4-byte boundaries, of 30522 at 16 and 8 in turn: every store width. When
// another node reads Y it stays 16-bit. FUSEOPT_GEMM_PAD_N=1 splits at any size; with
// FUSEOPT_GEMM_ROW_PHASES=1 the phase GEMMs write the float rows themselves (gemm_row_phases.h).
// With erf-GELU the pass after the GEMM runs on Y in the dtype Y has (it took the 16-bit one).
// phases 2: FUSEOPT_HOPPER_ODD_N=1 (opt-in), our Hopper GEMM writing Y's rows itself, as
// float (gemm_hopper.h); off Hopper it falls back to the padded rows + pack.
TEST_CASE("cuda Session: packed odd-N logits as a float graph output", "[cuda][session][gemm]") {
  if (!gpu_ready()) return;
  setenv("FUSEOPT_GEMM_PAD_N", "1", 1);
  for (int phases = 0; phases < 3; ++phases) {
    setenv("FUSEOPT_GEMM_ROW_PHASES", phases == 1 ? "1" : "0", 1);
    setenv("FUSEOPT_HOPPER_ODD_N", phases == 2 ? "1" : "0", 1);
    for (int also_read = 0; also_read < 4; ++also_read) {
      // 2, 3: erf-GELU, the pass after the GEMM (on the float Y when nothing else reads it)
      const char* act = also_read >= 2 ? "gelu" : "none";
      for (int64_t n : {int64_t{71}, int64_t{30522}}) {
        for (Precision p : {Precision::FP16, Precision::BF16}) {
          INFO((phases == 2 ? "Hopper GEMM by row phase, " : phases ? "row phases, " : "padded rows + pack, ") << "N " << n << " " << precision_name(p)
                                                                  << " activation " << act
                                                                  << (also_read % 2 ? ", Y also read by a Relu" : ""));
          GraphBuilder b(17);
          Value* x = b.input("x", DType::Float, {-1, 64}, {"rows"});
          Value* w = b.constant("w", randn({n, 64}, 0.2f));
          Value* bias = b.constant("bias", randn({n}));
          Value* y = b.op("FusedMatMul", {x, w, bias},
                          {Attribute::make_int("transB", 1), Attribute::make_string("activation", act)}, "", "fuseopt");
          b.output(y);
          if (also_read % 2) b.output(b.op("Relu", {y}));
          std::unique_ptr<Graph> g = b.release();
          const std::map<std::string, Tensor> in{{"x", randn({38, 64})}};
          for (double err : float_output_errors(*g, in, p)) {
            INFO("norm-wise relative error " << err);
            CHECK(err <= 1e-2);
          }
        }
      }
    }
  }
  unsetenv("FUSEOPT_GEMM_ROW_PHASES");
  unsetenv("FUSEOPT_HOPPER_ODD_N");
  unsetenv("FUSEOPT_GEMM_PAD_N");
}

// Resize's scales set the output length (floor(len * scale)): under fp16 and
// bf16 they stay fp32 (fp16(0.3) = 0.2998 would give floor(10 * 0.2998) = 2).
TEST_CASE("cuda Session keeps Resize scales in fp32 under fp16/bf16", "[cuda][session]") {
  GraphBuilder b(13);
  Value* x = b.input("x", DType::Float, {1, 1, 10, 10});
  Tensor scales = Tensor::from_floats({1.f, 1.f, 0.3f, 0.3f}, {4});
  Value* y = b.op("Resize", {x, b.constant("roi", Tensor(DType::Float, {0})), b.constant("scales", scales)},
                  {Attribute::make_string("mode", "nearest")});
  b.output(y);
  std::unique_ptr<Graph> g = b.release();
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  Session cpu(*g, cpu_o);
  const std::map<std::string, Tensor> in{{"x", randn({1, 1, 10, 10}, 1.f)}};
  const auto want = cpu.run(in);
  REQUIRE(want[0].dims == std::vector<int64_t>({1, 1, 3, 3}));
  if (!gpu_ready()) return;
  for (Precision p : {Precision::FP16, Precision::BF16}) {
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.precision = p;
    Session s(*g, o);
    const auto got = s.run(in);
    INFO(precision_name(p));
    CHECK(got[0].dims == want[0].dims);
  }
}

namespace {

// Host tensors copied into device memory of `be` (the "framework's" tensors).
struct DeviceFeeds {
  BackendImpl& be;
  std::vector<void*> blocks;
  std::map<std::string, RtTensor> views;
  DeviceFeeds(BackendImpl& backend, const std::map<std::string, Tensor>& host) : be(backend) {
    for (const auto& [name, t] : host) {
      void* p = be.alloc(t.bytes.size());
      be.copy_from_host(p, t.bytes.data(), t.bytes.size());
      blocks.push_back(p);
      views.emplace(name, RtTensor{t.dtype, t.dims, p, Backend::CUDA});
    }
    be.synchronize();
  }
  ~DeviceFeeds() {
    for (void* p : blocks) be.free(p);
  }
};

Tensor to_host(BackendImpl& be, const DeviceTensor& d) {
  Tensor t(d.dtype, d.shape);
  be.copy_to_host(t.bytes.data(), d.data, t.bytes.size());
  return t;
}

}  // namespace

// Session::run_device: device inputs in, caller-owned device outputs out, no
// copy through the host (the profile's upload/download counters stay 0), the
// same bytes as the host path over first / captured / replayed runs, outputs
// that outlive the Session; fp16 converts on the device and returns Float.
TEST_CASE("cuda Session run_device: device views in, owned device outputs out", "[cuda][session]") {
  if (!gpu_ready()) return;
  std::unique_ptr<Graph> g = build_graph();
  std::unique_ptr<BackendImpl> other = make_backend(Backend::CUDA);  // reads outputs after the Session is gone
  const auto in = feeds(2, 16);
  std::vector<DeviceTensor> kept;
  for (Precision prec : {Precision::FP32, Precision::FP16}) {
    INFO(precision_name(prec));
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.precision = prec;
    Session s(*g, o);
    const auto want = s.run(in);
    CHECK(s.profile().input_upload_bytes > 0);  // the host path does copy: the counters can fail
    CHECK(s.profile().output_download_bytes > 0);
    DeviceFeeds dev(s.backend(), in);
    s.reset_profile();
    for (int rep = 0; rep < 3; ++rep) {  // plan already ran once: captured at rep 0, replayed after
      std::vector<DeviceTensor> got = s.run_device(dev.views);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("run " << rep << " output " << i);
        CHECK(got[i].device == s.backend().device_ordinal());
        CHECK(got[i].owner.get() == got[i].data);
        CHECK(bit_identical(to_host(s.backend(), got[i]), want[i]));
      }
      kept = std::move(got);
    }
    CHECK(s.profile().graph_replays >= 2);
    CHECK(s.profile().input_upload_bytes == 0);
    CHECK(s.profile().output_download_bytes == 0);
    CHECK(s.profile().device_to_host_copies == 0);
    // Host outputs from device inputs (run_views) also work.
    const auto mixed = s.run_views(dev.views);
    for (size_t i = 0; i < want.size(); ++i) CHECK(bit_identical(mixed[i], want[i]));
  }
  // The last outputs outlive their Session and its backend.
  REQUIRE(kept.size() == 2);
  CHECK(to_host(*other, kept[0]).dims == std::vector<int64_t>{2, 16, 24});
}

// A generation loop's runs: a new shape every run, so none is captured. Such a run reads device
// inputs where they are and computes its outputs straight into the blocks it hands out
// (session_io.cc, export_direct); the bytes must be those of the host path, the inputs must
// stay untouched, outputs kept from earlier runs must survive later ones (their blocks are not
// recycled while held), and the second run of a shape (captured) must agree too.
TEST_CASE("cuda Session run_device on new shapes: inputs in place, outputs into the caller's blocks", "[cuda][session]") {
  if (!gpu_ready()) return;
  std::unique_ptr<Graph> g = build_graph();
  for (Precision prec : {Precision::FP32, Precision::FP16}) {
    INFO(precision_name(prec));
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.precision = prec;
    Session ref(*g, o), s(*g, o);
    std::vector<std::pair<std::vector<DeviceTensor>, std::vector<Tensor>>> kept;
    for (int64_t seq : {5, 9, 16, 23, 9}) {  // 9 twice: its second run is captured
      INFO("seq " << seq);
      const auto in = feeds(2, seq);
      const auto want = ref.run(in);
      DeviceFeeds dev(s.backend(), in);
      std::vector<DeviceTensor> got = s.run_device(dev.views);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("output " << i);
        CHECK(got[i].owner.get() == got[i].data);
        CHECK(bit_identical(to_host(s.backend(), got[i]), want[i]));
      }
      for (const auto& [name, t] : in) {  // read in place, never written
        Tensor back(t.dtype, t.dims);
        s.backend().copy_to_host(back.bytes.data(), dev.views.at(name).data, back.bytes.size());
        CHECK(back.bytes == t.bytes);
      }
      kept.emplace_back(std::move(got), want);
    }
    for (const auto& [got, want] : kept)
      for (size_t i = 0; i < want.size(); ++i) CHECK(bit_identical(to_host(s.backend(), got[i]), want[i]));
  }
}

TEST_CASE("cuda Session run_device refuses the CPU backend and host-only misuse", "[session]") {
  std::unique_ptr<Graph> g = build_graph();
  Session cpu(*g);
  const auto in = feeds(1, 3);
  std::map<std::string, RtTensor> views;
  for (const auto& [name, t] : in) views.emplace(name, RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU});
  REQUIRE_THROWS_WITH(cpu.run_device(views), Catch::Contains("outputs on the device need a device backend") &&
                                                 Catch::Contains("cpu backend"));
  CHECK(cpu.run_views(views)[1].bytes == cpu.run(in)[1].bytes);
  views.at("x").where = Backend::CUDA;
  REQUIRE_THROWS_WITH(cpu.run_views(views),
                      Catch::Equals("input 'x' is in cuda memory but the session runs on the cpu backend"));
}
