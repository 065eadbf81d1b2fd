// CUDA kernels that used to disagree with the CPU reference (which matches
// ONNX Runtime): Einsum with upper-case letters next to "..." and implicit
// outputs with upper-case letters; Pad opset < 11 with a non-integral `value`
// on int64 / int32 / bool data; Gather-family kernels with an out-of-range
// index, which must raise an Error naming the node (eager runs and CUDA-graph
// replays) instead of silently yielding zeros.
#include <catch2/catch.hpp>

#include <iterator>
#include <map>
#include <string>

#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;
using fuseopt::test::GraphBuilder;

TEST_CASE("cuda Einsum with upper-case letters, ellipsis and implicit outputs", "[cuda][einsum]") {
  if (!gpu_ready()) return;
  struct E {
    std::string eq;
    std::vector<std::vector<int64_t>> shapes;
  };
  const E cases[] = {
      {"...Ab,...bC->...AC", {{2, 3, 4}, {2, 4, 5}}},
      {"...AB,...BC->...AC", {{2, 3, 4, 5}, {2, 3, 5, 6}}},  // 2 ellipsis dims next to A and B
      {"...Ab,bZ", {{2, 3, 4}, {4, 2}}},                     // implicit: ...AZ
      {"zA", {{2, 3}}},                                      // implicit: Az (ASCII order)
      {"bA,bc", {{2, 3}, {2, 4}}},                           // implicit: Ac
      {"iJ,Jk", {{3, 4}, {4, 2}}},
      {"A...j,...j->A...", {{2, 3, 4}, {3, 4}}},
      {"Ba,aB->B", {{3, 2}, {2, 3}}},
      {"...a,...a", {{2, 1, 3}, {4, 3}}},  // ellipses of different ranks broadcast
      {"BA...,A...C->...BC", {{3, 4, 2}, {4, 2, 5}}},
  };
  for (const E& e : cases)
    for (DType dt : {DType::Float, DType::Float16}) {
      Case c("Einsum", e.shapes.size());
      c.attr(Attribute::make_string("equation", e.eq));
      for (size_t i = 0; i < e.shapes.size(); ++i) c.in(i, randn(e.shapes[i]));
      INFO(e.eq << " " << dtype_name(dt));
      c.check(dt);
    }
}

TEST_CASE("cuda Pad opset 2/10 value attribute on int64, int32 and bool data", "[cuda][pad]") {
  if (!gpu_ready()) return;
  for (DType dt : {DType::Int64, DType::Int32, DType::Bool})
    for (float value : {-2.7f, 0.5f, 3.9f, 2.0f, -0.25f}) {
      Case c("Pad", 1);
      c.attr(Attribute::make_ints("pads", {1, 0, 2, 1})).attr(Attribute::make_float("value", value));
      c.in(0, randint({3, 4}, dt == DType::Bool ? 0 : -9, dt == DType::Bool ? 1 : 9, dt));
      INFO(dtype_name(dt) << " value " << value);
      c.check();  // integers and bools bit for bit (a bool byte must be 0 or 1)
    }
  // Opset 1 spelling (`paddings`), same value rule.
  Case p1("Pad", 1);
  p1.attr(Attribute::make_ints("paddings", {0, 2, 1, 0})).attr(Attribute::make_float("value", -1.5f));
  p1.in(0, randint({2, 3}, -5, 5, DType::Int32));
  p1.check();
}

namespace {

// table[ids] by a Gather named "embeddings/Gather", GatherElements and
// GatherND on their own index inputs, and a ScatterND.
std::unique_ptr<Graph> gather_graph(const Tensor& table, const Tensor& ge_data, const Tensor& nd_data,
                                    const Tensor& sc_data, const Tensor& sc_upd) {
  GraphBuilder b(17);
  Value* ids = b.input("ids", DType::Int64, {-1, -1}, {"batch", "seq"});
  Value* pos = b.input("pos", DType::Int64, {4, 3});
  Value* nd = b.input("nd", DType::Int64, {3, 2});
  Value* sc = b.input("sc", DType::Int64, {2, 1});
  Value* emb = b.op("Gather", {b.constant("table", table), ids}, {Attribute::make_int("axis", 0)}, "embeddings/Gather");
  Value* ge = b.op("GatherElements", {b.constant("ge_data", ge_data), pos}, {Attribute::make_int("axis", 1)},
                   "pos/GatherElements");
  Value* gn = b.op("GatherND", {b.constant("nd_data", nd_data), nd}, {}, "nd/GatherND");
  Value* sn = b.op("ScatterND", {b.constant("sc_data", sc_data), sc, b.constant("sc_upd", sc_upd)}, {}, "upd/ScatterND");
  b.output(emb);
  b.output(ge);
  b.output(gn);
  b.output(sn);
  return b.release();
}

struct Feeds {
  std::map<std::string, Tensor> m;
  Feeds() {
    // In range, negative ones included (they count from the end).
    m["ids"] = ints({0, 49, -1, -50, 7, -13}, {2, 3});
    m["pos"] = ints({0, 4, -5, 1, -1, 2, 3, 3, -2, 0, 1, 4}, {4, 3});
    m["nd"] = ints({0, 1, -1, -6, 3, 5}, {3, 2});
    m["sc"] = ints({-1, 0}, {2, 1});  // distinct rows: a scatter with repeats has no defined order
  }
  Feeds& set(const std::string& name, size_t i, int64_t v) {
    m[name].data<int64_t>()[i] = v;
    return *this;
  }
};

bool same_bits(const Tensor& a, const Tensor& b) { return a.dtype == b.dtype && a.dims == b.dims && a.bytes == b.bytes; }

}  // namespace

TEST_CASE("cuda Gather-family out-of-range index is an Error naming the node, eager and replayed",
          "[cuda][gather][index_error]") {
  const Tensor table = randn({50, 8}), ge_data = randn({4, 5}), nd_data = randn({4, 6, 3}), sc_data = randn({3, 4}),
               sc_upd = randn({2, 4});
  std::unique_ptr<Graph> g = gather_graph(table, ge_data, nd_data, sc_data, sc_upd);
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  Session cpu(*g, cpu_o);
  const std::vector<Tensor> want = cpu.run(Feeds().m);  // the graph and feeds are valid (runs in CI too)
  REQUIRE(want.size() == 4);
  CHECK_THROWS_WITH(cpu.run(Feeds().set("ids", 4, 50).m), Catch::Contains("embeddings/Gather"));
  if (!gpu_ready()) return;

  struct Bad {
    const char* input;
    size_t at;
    int64_t value;
    const char* message;
  };
  const Bad bad[] = {
      {"ids", 4, 50, "Gather 'embeddings/Gather': index 50 out of range [-50, 49]"},
      {"ids", 0, -51, "Gather 'embeddings/Gather': index -51 out of range [-50, 49]"},
      {"ids", 5, 30522, "Gather 'embeddings/Gather': index 30522 out of range [-50, 49]"},
      {"pos", 7, 5, "GatherElements 'pos/GatherElements': index 5 out of range [-5, 4]"},
      {"nd", 3, 6, "GatherND 'nd/GatherND': index 6 out of range [-6, 5]"},
      {"nd", 0, -5, "GatherND 'nd/GatherND': index -5 out of range [-4, 3]"},
      {"sc", 1, 3, "ScatterND 'upd/ScatterND': index 3 out of range [-3, 2]"},
  };
  for (bool graphs : {false, true}) {
    SessionOptions o;
    o.backend = Backend::CUDA;
    o.cuda_graphs = graphs;
    Session s(*g, o);
    INFO((graphs ? "CUDA graphs (runs after the 2nd replay a captured graph)" : "eager"));
    for (int rep = 0; rep < 3; ++rep) {  // with graphs: eager, captured, replayed
      const std::vector<Tensor> got = s.run(Feeds().m);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("output " << i << " run " << rep);
        CHECK(same_bits(got[i], want[i]));  // gathers and scatters copy values: bit-identical
      }
    }
    for (const Bad& b : bad) {
      INFO(b.input << "[" << b.at << "] = " << b.value);
      CHECK_THROWS_WITH(s.run(Feeds().set(b.input, b.at, b.value).m), Catch::Equals(b.message));
      // The report does not stick: the next run with good indices works.
      const std::vector<Tensor> again = s.run(Feeds().m);
      for (size_t i = 0; i < want.size(); ++i) CHECK(same_bits(again[i], want[i]));
    }
    if (graphs) {
      INFO("capture disabled: " << s.profile().capture_disabled_reason);
      CHECK(s.profile().graph_replays >= static_cast<int64_t>(2 * std::size(bad)));
    }
  }
}

TEST_CASE("cuda index kernels report the first out-of-range index to their backend", "[cuda][gather][index_error]") {
  if (!gpu_ready()) return;
  BackendImpl& be = backend();  // the harness's CUDA backend: kernels run on its stream
  struct K {
    const char* op;
    Tensor data, idx;
    int64_t axis;
    const char* message;
  };
  Tensor i32(DType::Int32, {3});
  i32.data<int32_t>()[0] = -4;
  i32.data<int32_t>()[1] = 2;
  i32.data<int32_t>()[2] = -5;  // out of range for dim 4
  const K cases[] = {
      {"Gather", randn({10, 4}), ints({3, 12, -2}, {3}), 0, "Gather 'Gather_under_test': index 12 out of range [-10, 9]"},
      {"Gather", randn({3, 4}), i32, 1, "Gather 'Gather_under_test': index -5 out of range [-4, 3]"},
      {"GatherElements", randn({2, 3}), ints({0, 2, -3, 1, 3, 0}, {2, 3}), 1,
       "GatherElements 'GatherElements_under_test': index 3 out of range [-3, 2]"},
      {"GatherND", randn({2, 3}), ints({1, 2, -3, 0}, {2, 2}), 0,
       "GatherND 'GatherND_under_test': index -3 out of range [-2, 1]"},
  };
  for (const K& k : cases) {
    INFO(k.message);
    be.reset_device_errors();
    Case c(k.op, 2);
    if (std::string(k.op) != "GatherND") c.attr(Attribute::make_int("axis", k.axis));
    c.in(0, k.data).in(1, k.idx);
    c.run_cuda(DType::Float);  // the kernel itself cannot throw
    CHECK_THROWS_WITH(be.raise_device_errors(), Catch::Equals(k.message));
    CHECK_NOTHROW(be.raise_device_errors());  // reported once
  }
  // In range (negative ones included): nothing to report.
  be.reset_device_errors();
  Case good("Gather", 2);
  good.in(0, randn({10, 4})).in(1, ints({-10, 9, -1, 0}, {2, 2}));
  good.check();
  CHECK_NOTHROW(be.raise_device_errors());
  Case se("ScatterElements", 3);
  se.attr(Attribute::make_int("axis", 0)).in(0, randn({4, 2})).in(1, ints({1, -5}, {1, 2})).in(2, randn({1, 2}));
  se.run_cuda(DType::Float);
  CHECK_THROWS_WITH(be.raise_device_errors(),
                    Catch::Equals("ScatterElements 'ScatterElements_under_test': index -5 out of range [-4, 3]"));
  // RotaryEmbedding's position ids past the caches, through both of its kernels (head size 64 in
  // 16-byte vectors; 10, rotary dim 6: the warp-per-row kernel).
  for (int64_t d : {64, 10}) {
    INFO("head size " << d);
    be.reset_device_errors();
    Case rot("RotaryEmbedding", 4);
    if (d == 10) rot.attr(Attribute::make_int("rotary_embedding_dim", 6));
    const int64_t half = d == 10 ? 3 : d / 2;
    rot.in(0, randn({1, 2, 3, d})).in(1, randn({4, half})).in(2, randn({4, half})).in(3, ints({0, 7, 1}, {1, 3}));
    rot.run_cuda(DType::Float16);
    CHECK_THROWS_WITH(be.raise_device_errors(), Catch::Contains("index 7 out of range"));
  }
  be.reset_device_errors();
}
