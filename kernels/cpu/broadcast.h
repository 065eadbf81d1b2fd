// Numpy-style broadcasting for CPU kernels: the broadcast output shape and
// each input's strides as seen from it (kernels/common/broadcast.h, shared
// with CUDA), and a loop that walks the output once with one running offset
// per input, so a kernel never recomputes multi-indices.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "kernels/common/broadcast.h"

namespace fuseopt::cpu {

// The shape and stride helpers are the backends' shared ones (kernels/common/broadcast.h).
using dm::broadcast_shape;
using dm::broadcast_strides;

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
