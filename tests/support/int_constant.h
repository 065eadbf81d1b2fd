// A 1-D int64 constant (Reshape targets, Slice bounds, axes) for tests that build graphs by hand.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "support/graph_builder.h"

namespace fuseopt::test {

inline Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  const int64_t len = static_cast<int64_t>(v.size());
  return b.constant(n, Tensor::from_ints(v, {len}));
}

}  // namespace fuseopt::test
