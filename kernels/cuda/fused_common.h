// Host-side helpers shared by the GEMM and fused-op CUDA kernels (H6b):
// error checking that turns CUDA/cuBLASLt failures into fuseopt::Error, and
// small utilities for reading the float tensors those kernels accept.
// Usable from .cc (g++) and .cu (nvcc) files alike.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda_fused {

#define FUSED_CUDA_CHECK(expr, where)                                                          \
  do {                                                                                         \
    cudaError_t fused_err_ = (expr);                                                           \
    FUSE_CHECK(fused_err_ == cudaSuccess, where << ": " #expr " failed: "                      \
                                                << cudaGetErrorString(fused_err_));            \
  } while (0)

// After a launch: a bad configuration shows up here, not at the launch.
#define FUSED_LAUNCH_CHECK(where)                                                              \
  do {                                                                                         \
    cudaError_t fused_err_ = cudaGetLastError();                                               \
    FUSE_CHECK(fused_err_ == cudaSuccess, where << ": kernel launch failed: "                  \
                                                << cudaGetErrorString(fused_err_));            \
  } while (0)

inline bool is_gpu_float(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16;
}

inline cudaStream_t stream_of(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// Product of dims [0, end).
inline int64_t prod(const std::vector<int64_t>& s, size_t end) {
  int64_t p = 1;
  for (size_t i = 0; i < end && i < s.size(); ++i) p *= s[i];
  return p;
}

// Checks that an optional per-feature vector (gamma, beta, bias) has D elements.
inline void check_vector(const KernelContext& ctx, const RtTensor* t, int64_t d, const char* what) {
  if (!t) return;
  FUSE_CHECK(t->numel() == d, ctx.node().label() << ": " << what << " has shape " << shape_str(t->shape)
                                                 << ", expected " << d << " elements");
}

inline void check_same_dtype(const KernelContext& ctx, const RtTensor* t, DType dt, const char* what) {
  if (!t) return;
  FUSE_CHECK(t->dtype == dt, ctx.node().label() << ": " << what << " is " << dtype_name(t->dtype)
                                                << " but the op runs in " << dtype_name(dt));
}

// Numpy broadcast of two shapes; throws Error naming the node.
inline std::vector<int64_t> broadcast2(const Node& n, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = a.size() > b.size() ? a.size() : b.size();
  std::vector<int64_t> out(r, 1);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    FUSE_CHECK(da == db || da == 1 || db == 1,
               n.label() << ": shapes " << shape_str(a) << " and " << shape_str(b) << " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// True when `s` without its leading 1s equals the trailing dims of `out`:
// then its rows repeat with period numel(s)/D along the flattened rows of out
// (what the norm kernel's skip_rows handles: [S, D] or [1, S, D] against [B, S, D]).
inline bool is_suffix_of(const std::vector<int64_t>& s, const std::vector<int64_t>& out) {
  size_t lead = 0;
  while (lead < s.size() && s[lead] == 1) ++lead;
  const size_t len = s.size() - lead;
  if (len > out.size()) return false;
  for (size_t k = 0; k < len; ++k)
    if (s[lead + k] != out[out.size() - len + k]) return false;
  return true;
}

}  // namespace fuseopt::cuda_fused
