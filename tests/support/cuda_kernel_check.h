// Header-only harness for CUDA kernel tests (ggml test-backend-ops style):
// run one registered CUDA kernel on device copies of host inputs, with every
// output poisoned (all-ones bytes = NaN in fp32/fp16/bf16) first, and compare
// with the CPU kernel of the same node (eval_node_cpu) or a hand reference.
//
//   if (!cuda_check::gpu_ready()) return;   // prints WARN "CUDA tests skipped: ..."
//   cuda_check::OpCase c("fuseopt", "AddRelu", 2, 1);
//   c.node.set_attr(...);
//   c.inputs = {&a, &b};                    // fp32 host tensors (nullptr = omitted)
//   auto out = c.run_cuda(DType::Float16);  // fp32 host copies of the outputs
//   auto ref = c.run_cpu();                 // inputs rounded to fp16 first
//   REQUIRE(cuda_check::rel_error(out[0], ref[0]) < 1e-2);
#pragma once
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/eval_node.h"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda_check {

// True when a CUDA device is usable; otherwise WARNs once per test case.
inline bool gpu_ready() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    (void)cudaGetLastError();
    WARN("CUDA tests skipped: " << why);
    return false;
  }
  return true;
}

// Compute capability 9.0 (H100 / H200): where the Hopper kernels run, so tests that count their
// launches expect them there.
inline bool device_is_hopper() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major == 9 && minor == 0;
}

inline void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA test harness: ") + what + ": " + cudaGetErrorString(e));
}

// Host -> device copy that has landed when it returns. A plain cudaMemcpy from
// pageable memory may return once the bytes are staged, before the DMA reaches
// the device, and it is ordered only on the legacy stream: a kernel then launched
// on a non-blocking stream can read the old contents (seen under GPU load as
// whole outputs wrong). The device synchronisation closes both gaps.
inline void upload_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  ck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
  ck(cudaDeviceSynchronize(), "upload (synchronize)");
}

inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

inline Tensor random_tensor(std::vector<int64_t> dims, float lo = -1.f, float hi = 1.f) {
  Tensor t(DType::Float, std::move(dims));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng());
  return t;
}

// fp32 value rounded through the storage type (so CPU and GPU see the same inputs).
inline float round_to(DType dt, float v) {
  if (dt == DType::Float16) return half_to_float(float_to_half(v));
  if (dt == DType::BFloat16) return bf16_to_float(float_to_bf16(v));
  return v;
}

inline Tensor rounded(const Tensor& t, DType dt) {
  if (t.dtype != DType::Float) return t;
  Tensor r = t;
  for (int64_t i = 0; i < r.numel(); ++i) r.data<float>()[i] = round_to(dt, r.data<float>()[i]);
  return r;
}

// Host fp32 tensor -> bytes of `dt` (non-float tensors are copied as they are).
inline std::vector<uint8_t> to_device_bytes(const Tensor& t, DType dt) {
  if (t.dtype != DType::Float || dt == DType::Float) return std::vector<uint8_t>(t.bytes.begin(), t.bytes.end());
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * 2);
  auto* p = reinterpret_cast<uint16_t*>(out.data());
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = dt == DType::Float16 ? float_to_half(t.data<float>()[i]) : float_to_bf16(t.data<float>()[i]);
  return out;
}

// A KernelContext over device memory, for one CUDA kernel call.
class DeviceContext final : public KernelContext {
 public:
  DeviceContext(const Node& n, Precision p) : node_(n), precision_(p) {
    ck(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  ~DeviceContext() override {
    cudaStreamSynchronize(stream_);
    for (void* a : allocs_) cudaFree(a);
    cudaStreamDestroy(stream_);
  }
  void add_input(const Tensor* t, DType float_dt) {
    RtTensor r;
    if (t) {
      std::vector<uint8_t> bytes = to_device_bytes(*t, float_dt);
      r.dtype = t->dtype == DType::Float ? float_dt : t->dtype;
      r.shape = t->dims;
      r.data = device_alloc(bytes.size());
      upload_bytes(r.data, bytes.data(), bytes.size());
      r.where = Backend::CUDA;
    }
    ins_.push_back(r);
    present_.push_back(t != nullptr);
  }
  const Node& node() const override { return node_; }
  Backend backend() const override { return Backend::CUDA; }
  Precision precision() const override { return precision_; }
  size_t num_inputs() const override { return ins_.size(); }
  const RtTensor* input(size_t i) const override { return i < ins_.size() && present_[i] ? &ins_[i] : nullptr; }
  const RtTensor* host_input(size_t i) override { throw Error("host_input not supported by the test context"); }
  // Input i stands for a session constant (an initializer): kernels may read it before their
  // programmatic-launch wait (KernelContext::input_is_constant).
  void mark_constant(size_t i) {
    if (constant_.size() <= i) constant_.resize(i + 1, false);
    constant_[i] = true;
  }
  bool input_is_constant(size_t i) const override { return i < constant_.size() && constant_[i]; }
  // Input i stands for a graph input the run copied in: read before the wait too
  // (KernelContext::input_is_run_stable).
  void mark_run_stable(size_t i) {
    if (stable_.size() <= i) stable_.resize(i + 1, false);
    stable_[i] = true;
  }
  bool input_is_run_stable(size_t i) const override {
    return input_is_constant(i) || (i < stable_.size() && stable_[i]);
  }
  size_t num_outputs() const override { return node_.outputs.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override {
    if (outs_.size() < node_.outputs.size()) outs_.resize(node_.outputs.size());
    FUSE_CHECK(i < outs_.size(), "kernel wrote undeclared output " << i);
    RtTensor& r = outs_[i];
    r.dtype = dtype;
    r.shape = shape;
    r.where = Backend::CUDA;
    r.data = device_alloc(r.nbytes());
    // On the kernel's own stream: the legacy default stream does not order with a
    // non-blocking stream, so a plain cudaMemset could land after a fast kernel's writes.
    ck(cudaMemsetAsync(r.data, 0xFF, r.nbytes(), stream_), "poison");  // NaN in every float type
    return &r;
  }
  RtTensor* alias_output(size_t, size_t, const std::vector<int64_t>&) override {
    throw Error("alias_output not expected from a fused kernel");
  }
  void* scratch(size_t bytes) override {
    void* p = device_alloc(bytes);
    ck(cudaMemsetAsync(p, 0xFF, bytes, stream_), "poison scratch");
    return p;
  }
  // One kernel call is one execution: the caller always fills. Poisoned with 0x01 bytes first:
  // read as the attention's per-batch key counts (0x01010101, past any S_kv: every key kept),
  // a reader that ran before the fill gives a wrong answer wherever the mask pads.
  void* shared_derived(size_t, const char*, size_t bytes, bool* fill) override {
    *fill = true;
    void* p = device_alloc(bytes);
    ck(cudaMemsetAsync(p, 0x01, bytes, stream_), "poison shared_derived");
    return p;
  }
  void* stream() const override { return stream_; }

  // Output i as an fp32 host tensor (Undefined when never written).
  Tensor download(size_t i) {
    ck(cudaStreamSynchronize(stream_), "sync after kernel");
    ck(cudaGetLastError(), "kernel");
    if (i >= outs_.size() || !outs_[i].data) return Tensor();
    const RtTensor& r = outs_[i];
    std::vector<uint8_t> bytes(r.nbytes());
    if (!bytes.empty()) ck(cudaMemcpy(bytes.data(), r.data, bytes.size(), cudaMemcpyDeviceToHost), "download");
    Tensor t(DType::Float, r.shape);
    for (int64_t k = 0; k < t.numel(); ++k) {
      float v;
      if (r.dtype == DType::Float) std::memcpy(&v, bytes.data() + 4 * k, 4);
      else {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * k, 2);
        v = r.dtype == DType::Float16 ? half_to_float(h) : bf16_to_float(h);
      }
      t.data<float>()[k] = v;
    }
    return t;
  }
  void sync() { ck(cudaStreamSynchronize(stream_), "sync"); }

 private:
  std::vector<bool> constant_;
  std::vector<bool> stable_;
  void* device_alloc(size_t bytes) {
    void* p = nullptr;
    ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc");
    allocs_.push_back(p);
    return p;
  }
  const Node& node_;
  Precision precision_;
  cudaStream_t stream_ = nullptr;
  std::vector<RtTensor> ins_;
  std::vector<bool> present_;
  std::vector<RtTensor> outs_;
  std::vector<void*> allocs_;
};

// One node with `num_inputs` input slots and `num_outputs` declared outputs.
struct OpCase {
  std::deque<Value> values;
  Node node;
  std::vector<const Tensor*> inputs;
  std::vector<size_t> constant_inputs;  // inputs that stand for initializers (DeviceContext::mark_constant)
  std::vector<size_t> stable_inputs;    // graph inputs copied in (DeviceContext::mark_run_stable)

  OpCase(const std::string& domain, const std::string& op, size_t num_inputs, size_t num_outputs) {
    node.domain = domain;
    node.op_type = op;
    node.name = op + "_under_test";
    for (size_t i = 0; i < num_inputs; ++i) {
      values.emplace_back();
      values.back().name = "in" + std::to_string(i);
      node.inputs.push_back(&values.back());
    }
    for (size_t i = 0; i < num_outputs; ++i) {
      values.emplace_back();
      values.back().name = "out" + std::to_string(i);
      node.outputs.push_back(&values.back());
    }
  }
  void attr(Attribute a) { node.set_attr(std::move(a)); }

  // Runs the CUDA kernel; inputs that are fp32 are stored as `dt` on the device.
  std::vector<Tensor> run_cuda(DType dt, Precision p = Precision::FP32, int dispatch_input = 0) {
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (i >= inputs.size() || !inputs[i]) node.inputs[i] = nullptr;
    const KernelInfo* k = find_kernel(node.domain, node.op_type, Backend::CUDA, dt);
    FUSE_CHECK(k, "no CUDA kernel for " << node.domain << "." << node.op_type << " " << dtype_name(dt));
    DeviceContext ctx(node, p);
    for (size_t i = 0; i < node.inputs.size(); ++i) ctx.add_input(i < inputs.size() ? inputs[i] : nullptr, dt);
    for (size_t i : constant_inputs) ctx.mark_constant(i);
    for (size_t i : stable_inputs) ctx.mark_run_stable(i);
    k->fn(ctx);
    std::vector<Tensor> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) outs.push_back(ctx.download(i));
    return outs;
  }

  // The CPU kernel on the same inputs rounded to `dt` (fp32 arithmetic).
  std::vector<Tensor> run_cpu(DType dt = DType::Float) {
    std::vector<Tensor> held;
    held.reserve(inputs.size());
    std::vector<const Tensor*> ptrs;
    for (const Tensor* t : inputs) {
      if (!t) {
        ptrs.push_back(nullptr);
        continue;
      }
      held.push_back(rounded(*t, dt));
      ptrs.push_back(&held.back());
    }
    while (ptrs.size() < node.inputs.size()) ptrs.push_back(nullptr);
    return eval_node_cpu(node, ptrs);
  }
};

// ‖out − ref‖ / ‖ref‖ over elements where ref is a number; an element where
// ref is NaN must be NaN in out too, and any other NaN/inf in out fails
// (returns +inf). Shapes must match.
inline double rel_error(const Tensor& out, const Tensor& ref) {
  if (out.dims != ref.dims || out.dtype != DType::Float || ref.dtype != DType::Float) return INFINITY;
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float o = out.data<float>()[i], r = ref.data<float>()[i];
    if (std::isnan(r)) {
      if (!std::isnan(o)) return INFINITY;
      continue;
    }
    if (!std::isfinite(o)) return INFINITY;
    num += (double(o) - r) * (double(o) - r);
    den += double(r) * r;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Default tolerance per storage dtype (DESIGN.md numerics).
inline double tolerance(DType dt, Precision p = Precision::FP32) {
  if (dt == DType::Float) return p == Precision::TF32 ? 5e-3 : 1e-4;
  return dt == DType::BFloat16 ? 1e-2 : 5e-3;
}

inline const char* short_name(DType dt) {
  return dt == DType::Float ? "fp32" : dt == DType::Float16 ? "fp16" : dt == DType::BFloat16 ? "bf16" : "?";
}


// A key-padding mask [B, S_kv] (int64 or bool, 1 = keep) for attention tests:
// each row keeps a random prefix of 1..S_kv keys, except batch 0, which is
// fully masked (the NaN / uniform rows the fused op must reproduce).
inline Tensor random_padding_mask(int64_t B, int64_t Skv, DType dt) {
  Tensor m(dt, {B, Skv});
  std::uniform_int_distribution<int64_t> len(1, Skv);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t keep = b == 0 ? 0 : len(rng());
    for (int64_t j = 0; j < Skv; ++j) {
      const bool k = j < keep;
      if (dt == DType::Int64) m.data<int64_t>()[b * Skv + j] = k;
      else m.data<uint8_t>()[b * Skv + j] = k;
    }
  }
  return m;
}

}  // namespace fuseopt::cuda_check
