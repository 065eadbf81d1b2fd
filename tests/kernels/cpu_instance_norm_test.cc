// InstanceNormalization; expected values from numpy:
//   m = x.mean(axis=(2..), keepdims=True); v = ((x - m)**2).mean(...)
//   y = g[c] * (x - m) / sqrt(v + eps) + b[c]
#include <catch2/catch.hpp>

#include <cmath>

#include "support/op_test.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {
Tensor instance_norm(Tensor x, Tensor g, Tensor b, float eps = -1.f) {
  OpTest t("InstanceNormalization");
  t.input("x", std::move(x)).input("scale", std::move(g)).input("B", std::move(b));
  if (eps >= 0) t.attr(Attribute::make_float("epsilon", eps));
  return t.run()[0];
}
}  // namespace

TEST_CASE("InstanceNormalization 3-D: per (n, c) statistics, constant instance, large offset", "[cpu][instance_norm]") {
  Tensor x = floats({1, 2, 3, -4, 0, 10, 0.5f, 0.5f, 0.5f, 100, 101, 103}, {2, 2, 3});
  expect_near(instance_norm(x, floats({1.5f, -0.5f}, {2}), floats({0.1f, 2.f}, {2})),
              {-1.7371035f, 0.1f, 1.9371035f, 2.5095246f, 2.1698415f, 1.3206339f, 0.1f, 0.1f, 0.1f, 2.5345208f,
               2.1336302f, 1.331849f},
              {2, 2, 3}, 2e-5f, 1e-5f);
  // A common offset of 1e4 must not change the result (two-pass variance).
  Tensor shifted = floats({10001, 10002, 10003}, {1, 1, 3});
  expect_near(instance_norm(shifted, floats({1.5f}, {1}), floats({0.1f}, {1})), {-1.7371035f, 0.1f, 1.9371035f},
              {1, 1, 3}, 2e-5f, 1e-5f);
}

TEST_CASE("InstanceNormalization 4-D with epsilon 1e-3", "[cpu][instance_norm]") {
  Tensor x(DType::Float, {1, 2, 2, 4});
  for (int i = 0; i < 16; ++i) x.data<float>()[i] = std::pow(static_cast<float>(i), 1.5f);
  expect_near(instance_norm(x, floats({2.f, 1.f}, {2}), floats({0.f, -1.f}, {2}), 1e-3f),
              {-2.4571857f, -2.1371465f, -1.5519781f, -0.7942132f, 0.103128f, 1.1209614f, 2.2464108f, 3.4700233f,
               -2.457551f, -2.081639f, -1.6842177f, -1.2663941f, -0.8291196f, -0.373224f, 0.1005612f, 0.5915842f},
              {1, 2, 2, 4}, 2e-5f, 1e-5f);
}

TEST_CASE("InstanceNormalization with one spatial element gives B", "[cpu][instance_norm]") {
  expect_near(instance_norm(floats({5, -7, 3, 9}, {2, 2, 1}), floats({3.f, 4.f}, {2}), floats({0.25f, -2.f}, {2})),
              {0.25f, -2.f, 0.25f, -2.f}, {2, 2, 1});
}

TEST_CASE("InstanceNormalization rejects scale/B that do not match the channels", "[cpu][instance_norm]") {
  Tensor x = iota({1, 2, 3});
  REQUIRE_THROWS_WITH(instance_norm(x, floats({1, 1, 1}, {3}), floats({0, 0}, {2})),
                      Catch::Contains("InstanceNormalization_node") && Catch::Contains("scale"));
  REQUIRE_THROWS_WITH(instance_norm(x, floats({1, 1}, {2}), floats({0}, {1})),
                      Catch::Contains("InstanceNormalization_node") && Catch::Contains("B"));
  REQUIRE_THROWS_AS(instance_norm(iota({4}), floats({1}, {1}), floats({0}, {1})), Error);
}

namespace {
Tensor group_norm(Tensor x, int64_t groups, Tensor g, Tensor b, float eps = 1e-5f) {
  OpTest t("GroupNormalization");
  t.input("x", std::move(x)).input("scale", std::move(g)).input("bias", std::move(b));
  t.attr(Attribute::make_int("num_groups", groups)).attr(Attribute::make_float("epsilon", eps));
  return t.run()[0];
}
// Values from numpy: x.reshape(N, G, -1) normalised, then scale/bias per channel.
Tensor gn_input() { return floats({1, 2, 3, 4, 8, 0, -1, -1, 2, 10, 10.5f, 9}, {1, 4, 3}); }
}  // namespace

TEST_CASE("GroupNormalization: per-channel (opset 21) and per-group (opset 18) scale/bias", "[cpu][instance_norm]") {
  expect_near(group_norm(gn_input(), 2, floats({1, 2, 0.5f, -1}, {4}), floats({0, 1, 0, 2}, {4})),
              {-0.7745961f, -0.387298f, 0.f, 1.774596f, 4.87298f, -1.323788f, -0.5873587f, -0.5873587f, -0.289543f,
               0.9907357f, 0.8914638f, 1.189279f},
              {1, 4, 3}, 2e-5f, 1e-5f);
  expect_near(group_norm(gn_input(), 2, floats({2, -1}, {2}), floats({0.5f, 0}, {2})),
              {-1.049192f, -0.2745961f, 0.5f, 1.274596f, 4.37298f, -1.823788f, 1.174717f, 1.174717f, 0.5790861f,
               -1.009264f, -1.108536f, -0.8107205f},
              {1, 4, 3}, 2e-5f, 1e-5f);
  // 4-D, num_groups == C (instance norm), epsilon 1e-2.
  Tensor x(DType::Float, {2, 4, 1, 2});
  for (int i = 0; i < 16; ++i) x.data<float>()[i] = std::pow(static_cast<float>(i), 1.3f);
  expect_near(group_norm(x, 4, floats({1, 2, 3, 4}, {4}), floats({0, 0, 1, 1}, {4}), 1e-2f),
              {-0.9805807f, 0.9805807f, -1.986442f, 1.986442f, -1.985691f, 3.985691f, -2.984684f, 4.984684f,
               -0.9967381f, 0.9967381f, -1.99425f, 1.99425f, -1.992229f, 3.992229f, -2.990519f, 4.990519f},
              {2, 4, 1, 2}, 2e-5f, 1e-5f);
}

TEST_CASE("GroupNormalization rejects bad num_groups and parameter lengths", "[cpu][instance_norm]") {
  REQUIRE_THROWS_WITH(group_norm(gn_input(), 3, floats({1, 1, 1}, {3}), floats({0, 0, 0}, {3})),
                      Catch::Contains("GroupNormalization_node") && Catch::Contains("num_groups"));
  REQUIRE_THROWS_WITH(group_norm(gn_input(), 2, floats({1, 1, 1}, {3}), floats({0, 0, 0}, {3})),
                      Catch::Contains("GroupNormalization_node") && Catch::Contains("scale"));
  REQUIRE_THROWS_WITH(group_norm(gn_input(), 2, floats({1, 1, 1, 1}, {4}), floats({0, 0}, {2})),
                      Catch::Contains("GroupNormalization_node") && Catch::Contains("bias"));
}
