// fuseopt.RotaryEmbedding on the CPU reference backend: the opset-23 kernel
// registered under the fuseopt domain, whose caches may also be [1, S, R/2]
// (broadcast over the batch, as the rotary fusion passes them). Expected
// values: the standard op on caches repeated to [B, S, R/2].
#include <catch2/catch.hpp>

#include "support/op_test.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

// [1, S, h] repeated to [B, S, h].
Tensor repeat_batch(const Tensor& t, int64_t b) {
  Tensor r(DType::Float, {b, t.dims[1], t.dims[2]});
  for (int64_t i = 0; i < b; ++i)
    std::copy(t.data<float>(), t.data<float>() + t.numel(), r.data<float>() + i * t.numel());
  return r;
}

std::vector<Tensor> run_rotary(const std::string& domain, const Tensor& x, const Tensor& c, const Tensor& s,
                               std::vector<Attribute> attrs) {
  OpTest t("RotaryEmbedding", domain);
  t.input("x", x).input("cos", c).input("sin", s);
  for (auto& a : attrs) t.attr(a);
  return t.run();
}

void same_as_standard(const Tensor& x, int64_t b, int64_t seq, int64_t half, std::vector<Attribute> attrs) {
  Tensor c = iota({1, seq, half}, 0.07f, -0.4f), s = iota({1, seq, half}, -0.05f, 0.9f);
  auto got = run_rotary("fuseopt", x, c, s, attrs);
  auto want = run_rotary("", x, repeat_batch(c, b), repeat_batch(s, b), attrs);
  REQUIRE(got.size() == 1);
  std::vector<float> w(want[0].data<float>(), want[0].data<float>() + want[0].numel());
  expect_near(got[0], w, x.dims);
}

}  // namespace

TEST_CASE("fuseopt.RotaryEmbedding broadcasts [1, S, R/2] caches over the batch", "[cpu][rotary]") {
  for (int inter = 0; inter < 2; ++inter) {
    // 4-D [B, H, S, D], full and partial rotary.
    same_as_standard(iota({2, 3, 5, 8}, 0.1f, -1.0f), 2, 5, 4, {Attribute::make_int("interleaved", inter)});
    same_as_standard(iota({2, 3, 5, 12}, 0.1f, -1.0f), 2, 5, 4,
                     {Attribute::make_int("interleaved", inter), Attribute::make_int("rotary_embedding_dim", 8)});
    // 3-D [B, S, H*D] with num_heads (GPT-J's layout).
    same_as_standard(iota({3, 4, 2 * 12}, 0.05f, -1.0f), 3, 4, 4,
                     {Attribute::make_int("interleaved", inter), Attribute::make_int("num_heads", 2),
                      Attribute::make_int("rotary_embedding_dim", 8)});
  }
}

TEST_CASE("fuseopt.RotaryEmbedding: per-batch caches still work; the standard op broadcasts [1, S, R/2] too",
          "[cpu][rotary]") {
  Tensor x = iota({2, 1, 3, 4}, 0.3f, -0.5f);
  Tensor c = iota({2, 3, 2}, 0.1f), s = iota({2, 3, 2}, -0.1f, 0.5f);
  auto a = run_rotary("fuseopt", x, c, s, {});
  auto b = run_rotary("", x, c, s, {});
  std::vector<float> w(b[0].data<float>(), b[0].data<float>() + b[0].numel());
  expect_near(a[0], w, x.dims);
  // PyTorch's dynamo exporter writes ONNX RotaryEmbedding (opset 23) with [1, S, R/2] caches:
  // accepted and broadcast as the fuseopt op does (kernels/common/rotary_params.h).
  Tensor c1 = iota({1, 3, 2}, 0.1f), s1 = iota({1, 3, 2}, -0.1f, 0.5f);
  auto bc = run_rotary("", x, c1, s1, {});
  auto rep = run_rotary("", x, repeat_batch(c1, 2), repeat_batch(s1, 2), {});
  std::vector<float> wr(rep[0].data<float>(), rep[0].data<float>() + rep[0].numel());
  expect_near(bc[0], wr, x.dims);
  // Any other batch is still refused.
  Tensor c3 = iota({3, 3, 2}, 0.1f);
  REQUIRE_THROWS_WITH(run_rotary("", x, c3, c3, {}), Catch::Contains("caches must be"));
}
