// Session placement on a device backend: shape math runs on the host
// (profile marks it), a device kernel that needs device data on the host
// copies it, the profile records the copy, and graph capture is turned off
// with the reason while the results stay right. Runs only with a GPU.
#include <catch2/catch.hpp>

#include "ir/shape_inference.h"
#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

TEST_CASE("cuda Session keeps shape math on the host", "[cuda][session][placement]") {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {-1, -1, 8}, {"batch", "seq"});
  Value* shp = b.op("Shape", {x}, {}, "shape_of_x");
  Value* seq = b.op("Gather", {shp, b.constant("one", Tensor::from_ints({1}, {}))}, {}, "take_seq");
  Value* seq1 = b.op("Unsqueeze", {seq, b.constant("ax0", Tensor::from_ints({0}, {1}))}, {}, "seq_1d");
  Value* shape = b.op("Concat", {b.constant("m1", Tensor::from_ints({-1}, {1})), seq1, b.constant("eight", Tensor::from_ints({8}, {1}))},
                      {Attribute::make_int("axis", 0)}, "new_shape");
  Value* y = b.op("Reshape", {b.op("Relu", {x}, {}, "relu"), shape}, {}, "reshape");
  b.output(y);
  Graph& g = b.graph();
  if (!gpu_ready()) return;
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.profile = true;
  Session s(g, o);
  Tensor in = randn({2, 5, 8});
  std::vector<Tensor> out = s.run({{"x", in}});
  SessionOptions co;
  Session cpu(g, co);
  compare(out[0], cpu.run({{"x", in}})[0], DType::Float);
  for (const NodeProfile& n : s.profile().nodes) {
    INFO(n.name);
    bool host = n.name == "shape_of_x" || n.name == "take_seq" || n.name == "seq_1d" || n.name == "new_shape";
    CHECK(n.on_host == host);
  }
  CHECK(s.profile().device_to_host_copies == 0);
}

TEST_CASE("a value-dependent host read is recorded and disables capture", "[cuda][session][placement]") {
  // n = ReduceMax(lengths) computed on the device; Range(0, n) needs it on the host.
  GraphBuilder b(17);
  Value* lengths = b.input("lengths", DType::Int64, {-1}, {"batch"});
  Value* n = b.op("ReduceMax", {lengths}, {Attribute::make_int("keepdims", 0)}, "max_len");
  Value* r = b.op("Range", {b.constant("zero", Tensor::from_ints({0}, {})), n, b.constant("step", Tensor::from_ints({1}, {}))}, {}, "positions");
  b.output(b.op("Cast", {r}, {Attribute::make_int("to", static_cast<int64_t>(DType::Float))}, "as_float"));
  Graph& g = b.graph();
  if (!gpu_ready()) return;
  SessionOptions o;
  o.backend = Backend::CUDA;
  Session s(g, o);
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<Tensor> out = s.run({{"lengths", Tensor::from_ints({3, 6, 2}, {3})}});
    REQUIRE(out[0].dims == std::vector<int64_t>{6});
    for (int i = 0; i < 6; ++i) CHECK(out[0].data<float>()[i] == static_cast<float>(i));
  }
  CHECK(s.profile().device_to_host_copies + (s.profile().capture_disabled_reason.empty() ? 0 : 1) >= 1);
  CHECK(s.profile().graph_replays == 0);
  INFO(s.profile().capture_disabled_reason);
  CHECK(s.profile().capture_disabled_reason.find("positions") != std::string::npos);
  // A different value with the same shapes still gives the right answer (no stale replay).
  std::vector<Tensor> out = s.run({{"lengths", Tensor::from_ints({3, 4, 2}, {3})}});
  CHECK(out[0].dims == std::vector<int64_t>{4});
}

TEST_CASE("cuda Session runs shape-derived masks on the device", "[cuda][session][placement]") {
  // A causal mask built from Range over the sequence length ([1, 1, S, S] bool,
  // as the dynamo exporter writes it) is data, not shape math: only the
  // rank-1 Range stays on the host.
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {1, 1, -1, -1}, {"", "", "seq", "seq"});
  Value* shp = b.op("Shape", {x}, {}, "shape_of_x");
  Value* seq = b.op("Gather", {shp, b.constant("two", Tensor::from_ints({2}, {}))}, {}, "take_seq");
  Value* r = b.op("Range", {b.constant("zero", Tensor::from_ints({0}, {})), seq, b.constant("step", Tensor::from_ints({1}, {}))},
                  {}, "positions");
  Value* q = b.op("Unsqueeze", {r, b.constant("ax_q", Tensor::from_ints({0, 1, 3}, {3}))}, {}, "q_idx");
  Value* k = b.op("Unsqueeze", {r, b.constant("ax_k", Tensor::from_ints({0, 1, 2}, {3}))}, {}, "kv_idx");
  Value* keep = b.op("LessOrEqual", {k, q}, {}, "causal");
  Value* y = b.op("Where", {keep, x, b.constant("fill", Tensor::from_floats({-1e30f}, {}))}, {}, "masked");
  b.output(y);
  Graph& g = b.graph();
  infer_shapes(g);  // as fuserun does at load: placement reads the inferred ranks
  if (!gpu_ready()) return;
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.profile = true;
  Session s(g, o);
  Tensor in = randn({1, 1, 70, 70});
  std::vector<Tensor> out = s.run({{"x", in}});
  SessionOptions co;
  Session cpu(g, co);
  compare(out[0], cpu.run({{"x", in}})[0], DType::Float);
  for (const NodeProfile& n : s.profile().nodes) {
    INFO(n.name);
    bool host = n.name == "shape_of_x" || n.name == "take_seq" || n.name == "positions";
    CHECK(n.on_host == host);
  }
}
