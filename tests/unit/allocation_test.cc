// Resource errors (src/util/allocation.h): an input or a node output too big
// for the machine is one line naming the tensor and the bytes, never a bare
// std::bad_alloc; a byte count past 64 bits never wraps to a small buffer.
#include <catch2/catch.hpp>

#include "cli/model_inputs.h"
#include "support/graph_builder.h"
#include "util/allocation.h"

using namespace fuseopt;
using fuseopt::test::GraphBuilder;
using Catch::Contains;

TEST_CASE("allocation: sizes in messages") {
  CHECK(byte_size_text(512) == "512 bytes");
  CHECK(byte_size_text(1536) == "1.5 KiB (1536 bytes)");
  CHECK(byte_size_text(uint64_t(8) << 40) == "8 TiB (8796093022208 bytes)");
  CHECK(byte_size_text(uint64_t(3) << 30, false) == "3 GiB");
  auto what = [] { return std::string("input 'x'"); };
  CHECK(tensor_bytes_checked({2, 3}, 4, what) == 24);
  CHECK(tensor_bytes_checked({int64_t(1) << 62, 0}, 4, what) == 0);
  REQUIRE_THROWS_WITH(tensor_bytes_checked({int64_t(1) << 40, int64_t(1) << 40}, 4, what),
                      "input 'x': more bytes than 64 bits can count");
  REQUIRE_THROWS_WITH(tensor_bytes_checked({2, -1}, 4, what), "input 'x': negative dimension -1");
  CHECK_THROWS_AS(with_allocation_context(16, "host", what, []() -> int { throw std::bad_alloc(); }), AllocationError);
  REQUIRE_THROWS_WITH(with_allocation_context(16, "host", what, []() -> int { throw std::bad_alloc(); }),
                      "input 'x': cannot allocate 16 bytes of host memory");
}

TEST_CASE("allocation: a generated input of 2^40 elements names the input and the bytes") {
  GraphBuilder b;
  Value* x = b.input("input_ids", DType::Int64, {-1, -1}, {"batch", "seq"});
  b.output(b.op("Identity", {x}));
  std::map<std::string, std::vector<int64_t>> shapes{{"input_ids", {1, int64_t(1) << 40}}};
  REQUIRE_THROWS_WITH(cli::generate_inputs(b.graph(), shapes, 1),
                      Contains("input 'input_ids' [1,1099511627776] int64: 8 TiB (8796093022208 bytes) is more than "
                               "this machine's memory"));
  shapes["input_ids"] = {int64_t(1) << 62, 8};
  REQUIRE_THROWS_WITH(cli::generate_inputs(b.graph(), shapes, 1),
                      "input 'input_ids' [4611686018427387904,8] int64: more bytes than 64 bits can count");
}

TEST_CASE("allocation: a node output too big for the machine names the node, the value and the bytes") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {1});
  Value* shape = b.constant("shape", Tensor::from_ints({int64_t(1) << 40}, {1}));
  b.output(b.op("Expand", {x, shape}, {}, "expand"));
  Session s(b.graph());
  REQUIRE_THROWS_WITH(s.run({{"x", Tensor::from_floats({1.0f}, {1})}}),
                      Contains("Expand 'expand': output 0 'expand_y' [1099511627776] float32: ") &&
                          Contains("4 TiB (4398046511104 bytes) is more than this machine's memory"));
}
