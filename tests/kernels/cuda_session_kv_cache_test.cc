// The KV cache a Session holds (Session::hold_kv_cache) on the CUDA backend: the held loop
// matches the ONNX-semantics loop (fp32 and fp16 storage; one new row a step takes the
// one-launch decode kernel writing only that row, several rows the append + attention path
// at the cache's row stride; the tensor-core kernel's early requests of the held past, batch 1's
// 16-split clusters); run_device hands the presents out as views of the cache that
// download() makes dense; rewinding and rerunning one step captures it and replays it
// bit-identically. The CPU twin is tests/unit/session_kv_cache_test.cc.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "runtime/session.h"
#include "support/cuda_generic_check.h"
#include "support/kv_cache_loop.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
SessionOptions cuda(Precision p) {
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.precision = p;
  return o;
}
}  // namespace

TEST_CASE("cuda held KV cache: the decode loop matches the copying loop", "[cuda][session][kv_cache]") {
  if (!cuda_generic::gpu_ready()) return;
  // FUSEOPT_DECODE_MMA: the register decode kernel and the tensor-core one (fp16 rows; fp32
  // stays on the register kernel), each writing its one row in place.
  for (const char* mma : {"0", "1"})
  for (Precision p : {Precision::FP32, Precision::FP16}) {
    setenv("FUSEOPT_DECODE_MMA", mma, 1);
    INFO("precision " << precision_name(p) << ", FUSEOPT_DECODE_MMA=" << mma);
    KvLoopShape s;
    auto g = kv_attention_graph(s);
    CHECK(check_held_loop_matches_copy(*g, cuda(p), s, 6, 1, 1, 1e-6) == s.past + 6);
    CHECK(check_held_loop_matches_copy(*g, cuda(p), s, 4, 5, 2, 1e-6) == s.past + 11);
    // Head dim 64, 8 kv heads over 32 query heads, 700 cached rows: the decode kernel's long-cache plans.
    KvLoopShape big{2, 32, 8, 64, 700};
    auto gb = kv_attention_graph(big);
    CHECK(check_held_loop_matches_copy(*gb, cuda(p), big, 3, 1, 1, 1e-6) == 703);
    // Batch 1 over a long cache (16 splits a kv head in one cluster) and a short one whose new
    // row lies in a tile the tensor-core kernel requests before its launch wait (the held
    // past's early tiles; the new row after the wait).
    KvLoopShape one{1, 32, 8, 64, 2040};
    auto g1 = kv_attention_graph(one);
    CHECK(check_held_loop_matches_copy(*g1, cuda(p), one, 3, 1, 1, 1e-6) == 2043);
    KvLoopShape shortc{1, 8, 8, 128, 5};
    auto gs = kv_attention_graph(shortc);
    CHECK(check_held_loop_matches_copy(*gs, cuda(p), shortc, 3, 1, 1, 1e-6) == 8);
    // A key-padding mask that is a graph input: the tensor-core kernel reads it before its
    // launch wait (KernelContext::input_is_run_stable); left padding in batches 1 and 2.
    for (KvLoopShape m : {KvLoopShape{3, 32, 8, 64, 700, true}, KvLoopShape{1, 32, 8, 64, 2040, true},
                          KvLoopShape{2, 8, 8, 128, 5, true}}) {
      INFO("masked: B " << m.B << ", past " << m.past);
      auto gm = kv_attention_graph(m);
      CHECK(check_held_loop_matches_copy(*gm, cuda(p), m, 3, 1, 1, 1e-6) == m.past + 3);
    }
  }
  unsetenv("FUSEOPT_DECODE_MMA");
}

TEST_CASE("cuda held KV cache: views out of run_device, captured rewound steps", "[cuda][session][kv_cache]") {
  if (!cuda_generic::gpu_ready()) return;
  KvLoopShape s{1, 8, 2, 64, 40};
  auto g = kv_attention_graph(s);
  Session sess(*g, cuda(Precision::FP16));
  std::mt19937 rng(11);
  std::map<std::string, Tensor> load = kv_step_inputs(s, 1, rng);
  load["past_key_values.0.key"] = kv_random({s.B, s.Hkv, s.past, s.D}, rng);
  load["past_key_values.0.value"] = kv_random({s.B, s.Hkv, s.past, s.D}, rng);
  const std::vector<Tensor> want = sess.run(load);  // before holding: ONNX's presents
  sess.hold_kv_cache(64);
  sess.run(load);  // loads the cache, appends the row
  std::map<std::string, RtTensor> views;
  std::map<std::string, Tensor> step = load;
  step.erase("past_key_values.0.key");
  step.erase("past_key_values.0.value");
  for (const auto& [n, t] : step) views[n] = RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU};
  for (int i = 0; i < 4; ++i) {  // the same step over the same rows: run 2 of the plan is captured
    sess.set_kv_cache_length(s.past);
    std::vector<DeviceTensor> out = sess.run_device(views);
    REQUIRE(out[1].seq_capacity == 64);
    REQUIRE(out[1].shape == std::vector<int64_t>{s.B, s.Hkv, s.past + 1, s.D});
    for (size_t j = 0; j < 3; ++j) {
      const Tensor t = sess.download(out[j]);
      INFO("run " << i << " output " << j);
      REQUIRE(t.dtype == want[j].dtype);
      CHECK(t.bytes == want[j].bytes);
    }
  }
  CHECK(sess.profile().graph_replays >= 2);
}
