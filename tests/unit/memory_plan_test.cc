// The memory plan: buffers are released after their last consumer and
// reused, so a deep chain's peak is a few live buffers, not the sum; the
// same shapes reuse the pool without new backend allocations.
#include <catch2/catch.hpp>

#include <cmath>

#include "runtime/backend.h"
#include "runtime/memory_plan.h"
#include "runtime/session.h"
#include "support/graph_builder.h"

using namespace fuseopt;
using namespace fuseopt::test;

TEST_CASE("BufferPool reuses released blocks by best fit", "[memory]") {
  auto cpu = make_backend(Backend::CPU);
  BufferPool pool(*cpu);
  void* a = pool.acquire(1000);
  void* b = pool.acquire(5000);
  CHECK(pool.backend_allocations() == 2);
  pool.release(a);
  pool.release(b);
  CHECK(pool.live_bytes() == 0);
  // 900 bytes fits the 1024-byte block, not the 5120-byte one.
  CHECK(pool.acquire(900) == a);
  CHECK(pool.acquire(4000) == b);
  CHECK(pool.backend_allocations() == 2);
  // A tiny request does not pin a much larger free block.
  pool.release(b);
  void* c = pool.acquire(256);
  CHECK(c != b);
  CHECK(pool.backend_allocations() == 3);
  CHECK(pool.peak_bytes() >= 1024 + 5120);
}

TEST_CASE("a deep chain's peak memory is a few live buffers, not the sum", "[memory][session]") {
  const int depth = 64;
  const int64_t n = 256 * 256;  // 256 KiB of floats per value
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {256, 256});
  Value* v = x;
  for (int i = 0; i < depth; ++i) v = b.op(i % 2 ? "Abs" : "Neg", {v});
  b.output(v);
  Session s(b.graph());
  Tensor in(DType::Float, {256, 256});
  for (int64_t i = 0; i < n; ++i) in.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  std::vector<Tensor> out = s.run({{"x", in}});
  const size_t one = static_cast<size_t>(n) * 4;
  INFO("peak " << s.peak_bytes() << " bytes, one buffer " << one);
  CHECK(s.peak_bytes() >= one);
  CHECK(s.peak_bytes() <= 3 * one);
  CHECK(s.reserved_bytes() <= 3 * one);
  // The result is still right: each (Neg, Abs) pair gives |x|.
  for (int64_t i = 0; i < 14; ++i) CHECK(out[0].data<float>()[i] == std::fabs(in.data<float>()[i]));
  // A second run with the same shapes allocates nothing new.
  size_t reserved = s.reserved_bytes();
  s.run({{"x", in}});
  CHECK(s.reserved_bytes() == reserved);
}

TEST_CASE("a value read by a later node stays live until then", "[memory][session]") {
  // y = Add(Relu(x), Neg(Neg(Neg(x)))) with the Relu result read last: it
  // must not be overwritten by the buffers of the Neg chain.
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {4});
  Value* r = b.op("Relu", {x});
  Value* n = b.op("Neg", {b.op("Neg", {b.op("Neg", {x})})});
  b.output(b.op("Add", {r, n}));
  Session s(b.graph());
  std::vector<Tensor> out = s.run({{"x", Tensor::from_floats({-1, 2, -3, 4}, {4})}});
  // relu(x) - x
  std::vector<float> want = {1, 0, 3, 0};
  for (int i = 0; i < 4; ++i) CHECK(out[0].data<float>()[i] == want[i]);
}
