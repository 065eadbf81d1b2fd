// Graph pieces the FusedMatMul pass tests share (fused_matmul_test.cc, fused_matmul_relu2_test.cc):
// the linear layer an activation follows, its feeds, and the fused node to inspect.
#pragma once
#include "support/fusion_check.h"

namespace fuseopt::test::fused_matmul {

constexpr int64_t M = 5, K = 6, N = 4;

// a [2, M, K] · W [K, N] (+ bias [N], the exporters' Add with the constant first)
inline Value* linear(GraphBuilder& b, Value* a, bool with_bias = true) {
  Value* y = b.op("MatMul", {a, b.constant("W", rand_tensor({K, N}, 1))}, {}, "mm");
  if (with_bias) y = b.op("Add", {b.constant("bias", rand_tensor({N}, 2)), y}, {}, "bias_add");
  return y;
}

inline std::map<std::string, Tensor> feeds(std::vector<int64_t> dims = {2, M, K}) {
  return {{"a", rand_tensor(std::move(dims), 3, -3.0f, 3.0f)}};
}

// The graph's FusedMatMul node, nullptr when it has none.
inline const Node* only_fused(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "FusedMatMul") return n.get();
  return nullptr;
}

}  // namespace fuseopt::test::fused_matmul
