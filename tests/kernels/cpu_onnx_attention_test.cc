// ONNX Attention (opset 23) on the CPU reference backend; expected values
// from the onnx package's reference implementation
// (onnx.reference.ops.op_attention._compute_attention). onnxruntime
// comparisons over more layouts: tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor q_small() { return floats({1, 0, 0.5f, -1}, {1, 1, 2, 2}); }
Tensor k_small() { return floats({1, 2, -1, 0.5f, 0, 1}, {1, 1, 3, 2}); }
Tensor v_small() { return floats({1, 10, 2, 20, 3, 30}, {1, 1, 3, 2}); }
}  // namespace

TEST_CASE("ONNX Attention: bool mask, a fully masked row gives zeros", "[cpu][onnx_attention]") {
  OpTest t("Attention");
  t.input("q", q_small()).input("k", k_small()).input("v", v_small());
  t.input("m", bools({1, 0, 1, 0, 0, 0}, {1, 1, 2, 3}));
  expect_near(t.run()[0], {1.660477f, 16.60477f, 0, 0}, {1, 1, 2, 2});
}

TEST_CASE("ONNX Attention: causal with an explicit scale", "[cpu][onnx_attention]") {
  OpTest t("Attention");
  t.input("q", q_small()).input("k", k_small()).input("v", v_small());
  t.attr(Attribute::make_int("is_causal", 1)).attr(Attribute::make_float("scale", 0.5f));
  expect_near(t.run()[0], {1, 10, 1.562176f, 15.62177f}, {1, 1, 2, 2});
}

TEST_CASE("ONNX Attention: present_key/value concatenate the past", "[cpu][onnx_attention]") {
  OpTest t("Attention");
  t.input("q", q_small()).input("k", floats({5, 6}, {1, 1, 1, 2})).input("v", floats({7, 8}, {1, 1, 1, 2}));
  t.omitted_input().input("pk", floats({1, 2, 3, 4}, {1, 1, 2, 2})).input("pv", floats({-1, -2, -3, -4}, {1, 1, 2, 2}));
  t.num_outputs(3);
  std::vector<Tensor> out = t.run();
  expect_near(out[1], {1, 2, 3, 4, 5, 6}, {1, 1, 3, 2});
  expect_near(out[2], {-1, -2, -3, -4, 7, 8}, {1, 1, 3, 2});
}

TEST_CASE("ONNX Attention rejects bad shapes and unsupported outputs", "[cpu][onnx_attention]") {
  OpTest no_heads("Attention");  // 3-D without q_num_heads / kv_num_heads
  no_heads.input("q", iota({1, 2, 4})).input("k", iota({1, 3, 4})).input("v", iota({1, 3, 4}));
  REQUIRE_THROWS_WITH(no_heads.run(), Catch::Contains("Attention_node") && Catch::Contains("q_num_heads"));
  OpTest gqa("Attention");  // 3 query heads over 2 kv heads
  gqa.input("q", iota({1, 3, 2, 4})).input("k", iota({1, 2, 3, 4})).input("v", iota({1, 2, 3, 4}));
  REQUIRE_THROWS_WITH(gqa.run(), Catch::Contains("Attention_node") && Catch::Contains("multiple"));
  OpTest qk_out("Attention");
  qk_out.input("q", q_small()).input("k", k_small()).input("v", v_small()).num_outputs(4);
  REQUIRE_THROWS_WITH(qk_out.run(), Catch::Contains("qk_matmul_output"));
  OpTest bad_mask("Attention");
  bad_mask.input("q", q_small()).input("k", k_small()).input("v", v_small()).input("m", iota({3, 3}));
  REQUIRE_THROWS_WITH(bad_mask.run(), Catch::Contains("attn_mask"));
}
