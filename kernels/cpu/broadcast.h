// Numpy-style broadcasting for CPU kernels: the broadcast output shape of
// several inputs, each input's strides as seen from that output (0 on a
// broadcast dim), and a loop that walks the output once with one running
// offset per input, so a kernel never recomputes multi-indices.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "util/error.h"

namespace fuseopt::cpu {

// Right-aligned numpy broadcast of `shapes`; throws Error naming `node` and
// every shape when two dims differ and neither is 1.
inline std::vector<int64_t> broadcast_shape(const std::vector<std::vector<int64_t>>& shapes,
                                            const Node& node) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    const size_t lead = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[lead + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) { o = d; continue; }
      std::string all;
      for (const auto& t : shapes) all += (all.empty() ? "" : " vs ") + shape_str(t);
      throw Error(node.label() + ": shapes cannot be broadcast: " + all);
    }
  }
  return out;
}

// Strides (in elements) of a dense tensor of shape `in` read as if it had the
// broadcast shape `out`: right-aligned, 0 where `in` is 1 (or missing).
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& out) {
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

// Calls f(out_index, offsets) for every element of `out_shape` in row-major
// order; offsets[k] is the element offset into input k (whose broadcast
// strides are strides[k]).
template <size_t N, class F>
inline void for_each_broadcast(const std::vector<int64_t>& out_shape,
                               const std::array<std::vector<int64_t>, N>& strides, F&& f) {
  const int64_t total = shape_numel(out_shape);
  if (total <= 0) return;
  const size_t rank = out_shape.size();
  std::array<int64_t, N> off{};
  if (rank == 0) { f(int64_t{0}, off); return; }
  const int64_t inner = out_shape[rank - 1];
  std::array<int64_t, N> inner_stride{};
  for (size_t k = 0; k < N; ++k) inner_stride[k] = strides[k][rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (int64_t o = 0; o < total; o += inner) {
    std::array<int64_t, N> cur = off;
    for (int64_t i = 0; i < inner; ++i) {
      f(o + i, static_cast<const std::array<int64_t, N>&>(cur));
      for (size_t k = 0; k < N; ++k) cur[k] += inner_stride[k];
    }
    for (int d = static_cast<int>(rank) - 2; d >= 0; --d) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += strides[k][d];
      if (idx[d] < out_shape[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= strides[k][d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace fuseopt::cpu
