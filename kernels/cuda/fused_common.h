// The host half of the CUDA helper stack, shared by every CUDA kernel (the
// generic ops through cuda_common.cuh, the GEMM and fused ops directly):
// CUDA errors turned into fuseopt::Error, the stream and SM count, and small
// checks on the float tensors the fused kernels accept. No nvcc needed: it is
// includable from .cc and .cu files alike. The device half is fused_device.cuh;
// broadcasting is kernels/common/broadcast.h.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "kernels/common/broadcast.h"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda_fused {

// Throws Error "<where>: <what>: <CUDA's error string>" for a failed call; every
// CUDA error check in kernels/cuda ends here.
[[noreturn]] inline void throw_cuda_error(cudaError_t e, const std::string& where, const std::string& what) {
  throw Error(where + ": " + what + ": " + cudaGetErrorString(e));
}

// `where` is a stream expression (node.label(), "LayerNorm"), formatted only on failure.
#define FUSED_CUDA_CHECK(expr, where)                                                          \
  do {                                                                                         \
    cudaError_t fused_err_ = (expr);                                                           \
    if (fused_err_ != cudaSuccess) {                                                           \
      std::ostringstream fused_where_;                                                         \
      fused_where_ << where;                                                                   \
      ::fuseopt::cuda_fused::throw_cuda_error(fused_err_, fused_where_.str(), #expr " failed"); \
    }                                                                                          \
  } while (0)

// After a launch: a bad configuration shows up here, not at the launch.
#define FUSED_LAUNCH_CHECK(where)                                                              \
  do {                                                                                         \
    cudaError_t fused_err_ = cudaGetLastError();                                               \
    if (fused_err_ != cudaSuccess) {                                                           \
      std::ostringstream fused_where_;                                                         \
      fused_where_ << where;                                                                   \
      ::fuseopt::cuda_fused::throw_cuda_error(fused_err_, fused_where_.str(), "kernel launch failed"); \
    }                                                                                          \
  } while (0)

inline bool is_gpu_float(DType t) {
  return t == DType::Float || t == DType::Float16 || t == DType::BFloat16;
}

inline cudaStream_t stream_of(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// Multiprocessors of the device current at the first call (132 on an H200;
// also the fallback when the query fails), for sizing grids.
inline int sm_count() {
  static const int sms = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return v;
  }();
  return sms;
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
