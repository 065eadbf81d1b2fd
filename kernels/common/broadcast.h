// Numpy broadcasting on the host, the one implementation every backend uses:
// the CPU reference kernels (kernels/cpu/broadcast.h adds the loop over the
// output), the generic CUDA kernels (cuda_common.cuh turns the strides into a
// by-value index) and the fused CUDA kernels (AddRelu, SkipLayerNorm,
// LayerNormLinear). Plain C++: compiles from a .cc and from a .cu.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "util/error.h"

namespace fuseopt::dm {

// Right-aligned numpy broadcast of `shapes`; throws Error naming `node` and
// every shape when two dims differ and neither is 1.
inline std::vector<int64_t> broadcast_shape(const std::vector<std::vector<int64_t>>& shapes, const Node& node) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t lead = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[lead + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " vs ") + shape_str(t);
      throw Error(node.label() + ": shapes cannot be broadcast: " + all);
    }
  }
  return out;
}

// Strides (in elements) of a dense tensor of shape `in` read as if it had the
// broadcast shape `out`: right-aligned, 0 where `in` is 1 (or missing).
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t i = in.size() - 1 - k;
    const size_t o = out.size() - 1 - k;
    strides[o] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

}  // namespace fuseopt::dm
