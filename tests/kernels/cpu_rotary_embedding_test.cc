// ONNX RotaryEmbedding (opset 23) on the CPU reference backend; expected
// values from the onnx package's reference implementation
// (onnx.reference.ops.op_rotary_embedding). onnxruntime comparisons:
// tests/py/test_extra_ops_ort.py.
#include <catch2/catch.hpp>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor rotary(int interleaved, std::vector<int64_t> positions = {1, 0}) {
  OpTest t("RotaryEmbedding");
  t.input("x", floats({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4}));
  t.input("cos", floats({1, 0, 0.5f, 0.8f}, {2, 2})).input("sin", floats({0, 1, 0.6f, -0.2f}, {2, 2}));
  t.input("pos", ints(positions, {1, 2}));
  t.attr(Attribute::make_int("interleaved", interleaved));
  return t.run()[0];
}
}  // namespace

TEST_CASE("RotaryEmbedding halves and interleaved pairs with position ids", "[cpu][rotary]") {
  expect_near(rotary(0), {-1.3f, 2.4f, 2.1f, 2.8f, 5, -8, 7, 6}, {1, 1, 2, 4});
  expect_near(rotary(1), {-0.7f, 1.6f, 3.2f, 2.6f, 5, 6, -8, 7}, {1, 1, 2, 4});
}

TEST_CASE("RotaryEmbedding rejects an out-of-range position id and a bad cache", "[cpu][rotary]") {
  REQUIRE_THROWS_WITH(rotary(0, {1, 2}), Catch::Contains("RotaryEmbedding_node") && Catch::Contains("position id 2"));
  OpTest bad("RotaryEmbedding");
  bad.input("x", iota({1, 1, 2, 4})).input("cos", iota({2, 3})).input("sin", iota({2, 3})).input("pos", ints({0, 1}, {1, 2}));
  REQUIRE_THROWS_WITH(bad.run(), Catch::Contains("RotaryEmbedding_node") && Catch::Contains("cache"));
}
