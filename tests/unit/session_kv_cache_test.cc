// The KV cache a Session holds (Session::hold_kv_cache) on the CPU backend: the held loop gives
// bit-identical outputs to the ONNX-semantics loop (presents fed back), rewinds reproduce a step,
// the capacity and the cache's emptiness are enforced with messages that say what to do, and
// models whose form a held cache would break are refused naming the node. The CUDA twin is
// tests/kernels/cuda_session_kv_cache_test.cc.
#include <catch2/catch.hpp>

#include "runtime/session.h"
#include "support/kv_cache_loop.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
SessionOptions cpu() {
  SessionOptions o;
  o.backend = Backend::CPU;
  return o;
}
}  // namespace

TEST_CASE("held KV cache: the decode loop matches the copying loop bit for bit", "[session][kv_cache]") {
  KvLoopShape s;
  auto g = kv_attention_graph(s);
  SECTION("one new row a step") { CHECK(check_held_loop_matches_copy(*g, cpu(), s, 6, 1, 1, 0) == s.past + 6); }
  SECTION("a prompt of 5 rows, then 2 rows a step (causal offsets over the held rows)") {
    CHECK(check_held_loop_matches_copy(*g, cpu(), s, 4, 5, 2, 0) == s.past + 5 + 6);
  }
  SECTION("MQA, an empty first past") {
    KvLoopShape m{1, 3, 1, 8, 0};
    auto gm = kv_attention_graph(m);
    CHECK(check_held_loop_matches_copy(*gm, cpu(), m, 3, 4, 1, 0) == 6);
  }
  SECTION("a key-padding mask over the total length (left padding in batch 1)") {
    KvLoopShape m{2, 4, 2, 16, 3, true};
    auto gm = kv_attention_graph(m);
    CHECK(check_held_loop_matches_copy(*gm, cpu(), m, 4, 3, 1, 0) == 9);
  }
}

TEST_CASE("held KV cache: rewinding reruns a step exactly; capacity and emptiness are enforced",
          "[session][kv_cache]") {
  KvLoopShape s;
  auto g = kv_attention_graph(s);
  Session sess(*g, cpu());
  std::mt19937 rng(3);
  std::map<std::string, Tensor> first = kv_step_inputs(s, 1, rng);
  REQUIRE_THROWS_WITH(sess.set_kv_cache_length(0), Catch::Contains("holds no KV cache"));
  sess.hold_kv_cache(s.past + 2);
  // Nothing loaded yet: the first run must pass the pasts.
  REQUIRE_THROWS_WITH(sess.run(first), Catch::Contains("is empty") && Catch::Contains("past_key_values.0.key"));
  std::map<std::string, Tensor> load = first;
  load["past_key_values.0.key"] = kv_random({s.B, s.Hkv, s.past, s.D}, rng);
  REQUIRE_THROWS_WITH(sess.run(load), Catch::Contains("every past input") && Catch::Contains("1 of 2"));
  load["past_key_values.0.value"] = kv_random({s.B, s.Hkv, s.past, s.D}, rng);
  const std::vector<Tensor> a = sess.run(load);
  CHECK(sess.kv_cache_length() == s.past + 1);
  const std::map<std::string, Tensor> second = kv_step_inputs(s, 1, rng);
  const std::vector<Tensor> b = sess.run(second);
  CHECK(sess.kv_cache_length() == s.past + 2);
  // Full: a third step does not fit; the run fails naming the attention node and the cache is unchanged.
  REQUIRE_THROWS_WITH(sess.run(second), Catch::Contains("attn") && Catch::Contains("cannot take"));
  CHECK(sess.kv_cache_length() == s.past + 2);
  // Rewind one step and run it again: the same outputs, bit for bit.
  REQUIRE_THROWS_WITH(sess.set_kv_cache_length(s.past + 3), Catch::Contains("not in [0, 5]"));
  sess.set_kv_cache_length(s.past + 1);
  const std::vector<Tensor> b2 = sess.run(second);
  for (size_t i = 0; i < 3; ++i) CHECK(b2[i].bytes == b[i].bytes);
  // Rewind to the start and replay the first step from the held rows: the same as the loaded run.
  sess.set_kv_cache_length(s.past);
  const std::vector<Tensor> a2 = sess.run(first);
  for (size_t i = 0; i < 3; ++i) CHECK(a2[i].bytes == a[i].bytes);
  // A load longer than the capacity is refused before anything runs.
  std::map<std::string, Tensor> big = first;
  big["past_key_values.0.key"] = kv_random({s.B, s.Hkv, s.past + 3, s.D}, rng);
  big["past_key_values.0.value"] = kv_random({s.B, s.Hkv, s.past + 3, s.D}, rng);
  REQUIRE_THROWS_WITH(sess.run(big), Catch::Contains("holds 6 positions") && Catch::Contains("takes 5"));
  REQUIRE_THROWS_WITH(sess.hold_kv_cache(0), Catch::Contains("must be positive"));
}

TEST_CASE("held KV cache: forms a held cache would break are refused, naming the node", "[session][kv_cache]") {
  KvLoopShape s;
  {
    auto g = kv_attention_graph(s, /*extra_reader=*/true);
    Session sess(*g, cpu());
    REQUIRE_THROWS_WITH(sess.hold_kv_cache(8), Catch::Contains("past input 'past_key_values.0.key' is read by") &&
                                                   Catch::Contains("peek_past") && Catch::Contains("attn"));
    CHECK_FALSE(sess.kv_cache_held());
    CHECK(sess.kv_cache_capacity() == 0);
  }
  {
    auto g = kv_attention_graph(s, false, /*present_read=*/true);
    Session sess(*g, cpu());
    REQUIRE_THROWS_WITH(sess.hold_kv_cache(8),
                        Catch::Contains("present 'present.0.key' is read by") && Catch::Contains("reads_present"));
  }
  {
    GraphBuilder b;
    Value* x = b.input("x", DType::Float, {2, 3});
    b.output(b.op("Relu", {x}));
    Session sess(b.graph(), cpu());
    REQUIRE_THROWS_WITH(sess.hold_kv_cache(8), Catch::Contains("no fused attention"));
  }
}
