// Graph pieces the ResidualMatMul pass tests share (residual_matmul_test.cc: the norm roots;
// residual_matmul_add_test.cc: the plain Add root): sizes, the GEMM, the fused GEMMs to inspect,
// and the rejection check.
#pragma once
#include "support/fusion_check.h"

namespace fuseopt::test::residual_matmul {

constexpr int64_t B = 2, S = 3, K = 6, D = 8, F = 5;
inline const char* kPass = "ResidualMatMul";

inline Node* fmm(GraphBuilder& b, Value* a, Value* w, Value* bias, const std::string& act = "none",
                 const std::string& name = "out_proj") {
  std::vector<Value*> in = {a, w};
  if (bias) in.push_back(bias);
  return b.node("FusedMatMul", in, 1,
                {Attribute::make_int("transB", 0), Attribute::make_float("alpha", 1.0f),
                 Attribute::make_string("activation", act)},
                "fuseopt", name);
}

// The FusedMatMuls that took a residual (input 3).
inline std::vector<const Node*> residual_gemms(const Graph& g) {
  std::vector<const Node*> r;
  for (const auto& n : g.nodes())
    if (n->domain == "fuseopt" && n->op_type == "FusedMatMul" && n->input(3)) r.push_back(n.get());
  return r;
}

inline const Node* residual_gemm(const Graph& g) {
  const auto r = residual_gemms(g);
  return r.empty() ? nullptr : r.front();
}

// No match; the report names `rule` and `names`; the graph computes exactly what it did.
inline void check_rejected(GraphBuilder& b, const std::string& rule, const std::string& names,
                           const std::map<std::string, Tensor>& in) {
  auto before = clone_graph(b.graph());
  FusionReport r = run_one_pass(b.graph(), kPass);
  CHECK(matched(r, kPass) == 0);
  CHECK(residual_gemms(b.graph()).empty());
  CHECK_THAT(reasons(r, kPass), Catch::Matchers::Contains(rule) && Catch::Matchers::Contains(names));
  require_same_outputs(*before, b.graph(), in, 0.0f);
}

// After a match: the same numbers as `before` (fp32 on the CPU: acc + bias + residual in the
// unfused graph's order), a second run of the pass finds nothing, and the graph is still a valid
// model with the same numbers after a save and reload.
inline void check_exact_idempotent(const Graph& before, Graph& g, const std::map<std::string, Tensor>& in) {
  require_same_outputs(before, g, in, 1e-5f);
  CHECK(matched(run_one_pass(g, kPass), kPass) == 0);
  require_same_outputs(before, *clone_graph(g), in, 1e-5f);
}

}  // namespace fuseopt::test::residual_matmul
