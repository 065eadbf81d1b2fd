// Header-only helpers for fusion pass tests: run one pass by name, count ops,
// deterministic random inputs, and "both graphs give the same outputs on the
// CPU Session". Used by tests/passes/*_test.cc of the H4 fusions.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "support/graph_builder.h"

namespace fuseopt::test {

// Runs exactly one registered pass (to its fixed point) on g; _unchecked
// without the up-front strict shape inference (see run_pass_manager).
inline FusionReport run_one_pass(Graph& g, const std::string& pass, PassOptions options = {}) {
  return run_passes(g, {pass}, options);
}

inline FusionReport run_one_pass_unchecked(Graph& g, const std::string& pass, PassOptions options = {}) {
  return run_passes_unchecked(g, {pass}, options);
}

inline int matched(const FusionReport& r, const std::string& pattern) {
  const PatternStats* p = r.pattern(pattern);
  return p ? p->matched : 0;
}

// All rejection reasons of a pattern, joined (for CHECK_THAT(..., Contains(...))).
inline std::string reasons(const FusionReport& r, const std::string& pattern) {
  const PatternStats* p = r.pattern(pattern);
  std::string s;
  if (p)
    for (const auto& x : p->reasons) s += x + "\n";
  return s;
}

// Uniform values in [lo, hi) from a fixed-seed LCG (no <random> distribution
// differences between standard libraries).
inline Tensor rand_tensor(std::vector<int64_t> dims, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(DType::Float, std::move(dims));
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.data<float>()[i] = lo + (hi - lo) * static_cast<float>(s >> 8) / static_cast<float>(1u << 24);
  }
  return t;
}

// Runs both graphs on the CPU Session with `feeds` and requires every output
// to agree within tol (relative to max(1, |want|)); NaN fails.
inline void require_same_outputs(const Graph& before, const Graph& after, const std::map<std::string, Tensor>& feeds,
                                 float tol = 1e-5f) {
  std::vector<Tensor> want = run_cpu(before, feeds);
  std::vector<Tensor> got = run_cpu(after, feeds);
  REQUIRE(want.size() == got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    REQUIRE(got[o].dtype == DType::Float);
    REQUIRE(shape_str(got[o].dims) == shape_str(want[o].dims));
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      const float w = want[o].data<float>()[i], g = got[o].data<float>()[i];
      INFO("output " << o << " element " << i << ": got " << g << ", want " << w);
      REQUIRE(!std::isnan(g));
      REQUIRE(std::fabs(g - w) <= tol * std::max(1.0f, std::fabs(w)));
    }
  }
}

inline int count_domain_op(const Graph& g, const std::string& domain, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type == op && node->domain == domain;
  return n;
}

}  // namespace fuseopt::test
