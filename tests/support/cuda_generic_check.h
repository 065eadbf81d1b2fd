// Header-only harness for the generic CUDA kernel tests (every dtype, host
// inputs, views): runs one registered CUDA kernel through the CUDA
// BackendImpl (the same allocator and stream the Session uses) and the CPU
// kernel of the same node (eval_node_cpu), then compares.
//
//   if (!cuda_generic::gpu_ready()) return;    // WARN "CUDA tests skipped: <why>"
//   cuda_generic::Case c("Add", 2);            // op, input slots[, outputs, domain]
//   c.in(0, cuda_generic::randn({3, 1, 5}));   // fp32 host tensors, any dtype
//   c.in(1, cuda_generic::randn({4, 5}));
//   c.check(DType::Float16);                   // fp32 inputs stored as fp16 on the GPU
//
// Every output buffer is poisoned before the kernel runs (NaN bytes for float
// types, 0xA5 bytes otherwise), so an element the kernel forgets fails.
// Float outputs: fp32 elementwise |got - want| <= atol + rtol*|want|; fp16 and
// bf16 norm-wise ||got - want|| / ||want|| (DESIGN.md numerics). Other dtypes
// must match bit for bit. NaN passes only where the CPU result is NaN.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/backend.h"
#include "runtime/eval_node.h"
#include "runtime/kernel.h"
#include "util/error.h"

namespace fuseopt::cuda_generic {

// True when the CUDA backend can run here; otherwise a visible notice.
inline bool gpu_ready() {
  std::string why;
  if (backend_available(Backend::CUDA, &why)) return true;
  WARN("CUDA tests skipped: " << why);
  return false;
}

inline BackendImpl& backend() {
  static std::unique_ptr<BackendImpl> b = make_backend(Backend::CUDA);
  return *b;
}

inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());
  return g;
}

inline Tensor randn(std::vector<int64_t> dims, float scale = 1.f, float offset = 0.f) {
  Tensor t(DType::Float, std::move(dims));
  std::normal_distribution<float> n(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = offset + scale * n(rng());
  return t;
}
inline Tensor uniform(std::vector<int64_t> dims, float lo, float hi) {
  Tensor t(DType::Float, std::move(dims));
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng());
  return t;
}
// Integers in [lo, hi] of dtype dt (Int64, Int32, Int8, UInt8 or Bool).
inline Tensor randint(std::vector<int64_t> dims, int64_t lo, int64_t hi, DType dt = DType::Int64) {
  Tensor t(dt, std::move(dims));
  std::uniform_int_distribution<int64_t> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = u(rng());
    switch (dt) {
      case DType::Int64: t.data<int64_t>()[i] = v; break;
      case DType::Int32: t.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DType::Int8: t.data<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DType::UInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
      default: FAIL("randint: unsupported dtype");
    }
  }
  return t;
}
inline Tensor ints(std::vector<int64_t> v, std::vector<int64_t> dims) { return Tensor::from_ints(v, std::move(dims)); }
inline Tensor ints1(std::vector<int64_t> v) { return Tensor::from_ints(v, {static_cast<int64_t>(v.size())}); }
inline Tensor scalar_i64(int64_t v) { return Tensor::from_ints({v}, {}); }

// fp32 tensor converted to fp16/bf16 storage, or back (other tensors unchanged).
inline Tensor convert_float(const Tensor& t, DType to) {
  const bool src16 = t.dtype == DType::Float16 || t.dtype == DType::BFloat16;
  if (to == t.dtype || !(t.dtype == DType::Float || src16)) return t;
  Tensor r(to, t.dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = t.dtype == DType::Float ? t.data<float>()[i]
              : t.dtype == DType::Float16 ? half_to_float(t.data<uint16_t>()[i])
                                          : bf16_to_float(t.data<uint16_t>()[i]);
    if (to == DType::Float) r.data<float>()[i] = v;
    else if (to == DType::Float16) r.data<uint16_t>()[i] = float_to_half(v);
    else r.data<uint16_t>()[i] = float_to_bf16(v);
  }
  return r;
}

// A KernelContext whose tensors live in CUDA memory from the backend's pool.
class BackendContext final : public KernelContext {
 public:
  BackendContext(const Node& n, BackendImpl& be, const std::vector<const Tensor*>& host) : node_(n), be_(be), host_(host) {
    for (const Tensor* t : host) {
      RtTensor d, h;
      if (t) {
        d.dtype = h.dtype = t->dtype;
        d.shape = h.shape = t->dims;
        d.where = Backend::CUDA;
        h.where = Backend::CPU;
        d.data = alloc(t->bytes.size());
        be_.copy_from_host(d.data, t->bytes.data(), t->bytes.size());
        h.data = const_cast<uint8_t*>(t->bytes.data());
      }
      dev_.push_back(d);
      hostv_.push_back(h);
    }
    outs_.resize(n.outputs.size());
  }
  ~BackendContext() override {
    be_.synchronize();
    for (void* p : allocs_) be_.free(p);
  }
  const Node& node() const override { return node_; }
  Backend backend() const override { return Backend::CUDA; }
  Precision precision() const override { return Precision::FP32; }
  size_t num_inputs() const override { return dev_.size(); }
  const RtTensor* input(size_t i) const override { return i < dev_.size() && host_[i] ? &dev_[i] : nullptr; }
  const RtTensor* host_input(size_t i) override { return i < hostv_.size() && host_[i] ? &hostv_[i] : nullptr; }
  size_t num_outputs() const override { return outs_.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override {
    FUSE_CHECK(i < outs_.size(), node_.label() << ": kernel wrote undeclared output " << i);
    RtTensor& r = outs_[i];
    r.dtype = dtype;
    r.shape = shape;
    r.where = Backend::CUDA;
    r.data = alloc(r.nbytes());
    const bool is_float = dtype == DType::Float || dtype == DType::Float16 || dtype == DType::BFloat16 ||
                          dtype == DType::Double;
    std::vector<uint8_t> poison(r.nbytes(), is_float ? 0xFF : 0xA5);
    be_.copy_from_host(r.data, poison.data(), poison.size());
    be_.synchronize();  // the poison buffer goes out of scope
    return &r;
  }
  RtTensor* alias_output(size_t i, size_t j, const std::vector<int64_t>& shape) override {
    const RtTensor* in = input(j);
    FUSE_CHECK(in && i < outs_.size(), node_.label() << ": bad alias");
    FUSE_CHECK(shape_numel(shape) == in->numel(), node_.label() << ": alias changes the size");
    outs_[i] = *in;
    outs_[i].shape = shape;
    return &outs_[i];
  }
  void* scratch(size_t bytes) override { return alloc(bytes); }
  void* stream() const override { return be_.stream(); }

  Tensor download(size_t i) {
    be_.synchronize();
    const RtTensor& r = outs_[i];
    if (!r.data && r.dtype == DType::Undefined) return Tensor();
    Tensor t(r.dtype, r.shape);
    be_.copy_to_host(t.bytes.data(), r.data, t.bytes.size());
    return t;
  }

 private:
  void* alloc(size_t bytes) {
    void* p = be_.alloc(bytes ? bytes : 1);
    allocs_.push_back(p);
    return p;
  }
  const Node& node_;
  BackendImpl& be_;
  std::vector<const Tensor*> host_;
  std::vector<RtTensor> dev_, hostv_, outs_;
  std::vector<void*> allocs_;
};

// `floor`: differences at most this large count as none -- a value below the storage type's
// normal range can only be held to its subnormal step (fp16: 2^-24), so a tensor of such
// values has a large relative error that is only the type's rounding.
inline double norm_rel_error(const Tensor& got, const Tensor& want, bool* nan_ok, double floor = 0) {
  double num = 0, den = 0;
  *nan_ok = true;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    if (std::isnan(w)) {
      if (!std::isnan(g)) *nan_ok = false;
      continue;
    }
    if (std::isnan(g) || (std::isinf(g) && g != w)) {
      *nan_ok = false;
      continue;
    }
    if (std::isinf(w)) continue;
    if (std::fabs(double(g) - w) > floor) num += (double(g) - w) * (double(g) - w);
    den += double(w) * w;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// got/want: any dtype; `float_dt` the storage dtype of the GPU run.
inline void compare(const Tensor& got_in, const Tensor& want, DType float_dt, double atol = 1e-5, double rtol = 1e-4) {
  REQUIRE(shape_str(got_in.dims) == shape_str(want.dims));
  if (want.dtype == DType::Float) {
    const Tensor got = convert_float(got_in, DType::Float);
    REQUIRE(got.dtype == DType::Float);
    if (float_dt == DType::Float) {
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const float g = got.data<float>()[i], w = want.data<float>()[i];
        const bool ok = std::isnan(w) ? std::isnan(g)
                        : std::isinf(w) ? g == w
                                        : (!std::isnan(g) && std::fabs(double(g) - w) <= atol + rtol * std::fabs(w));
        if (!ok && bad++ == 0) first = i;
      }
      INFO("first mismatch at " << first << ": got " << (first >= 0 ? got.data<float>()[first] : 0.f) << ", want "
                                << (first >= 0 ? want.data<float>()[first] : 0.f));
      CHECK(bad == 0);
    } else {
      bool nan_ok = true;
      const double err = norm_rel_error(got, want, &nan_ok, float_dt == DType::Float16 ? 0x1p-24 : 0.0);
      INFO("norm-wise relative error " << err);
      CHECK(nan_ok);
      CHECK(err <= (float_dt == DType::BFloat16 ? 1e-2 : 5e-3));
    }
    return;
  }
  REQUIRE(dtype_name(got_in.dtype) == std::string(dtype_name(want.dtype)));
  if (want.dtype == DType::Float16 || want.dtype == DType::BFloat16) {  // exact values; any NaN matches NaN
    const Tensor g = convert_float(got_in, DType::Float), w = convert_float(want, DType::Float);
    int64_t bad = -1;
    for (int64_t i = 0; i < w.numel() && bad < 0; ++i) {
      const float a = g.data<float>()[i], b = w.data<float>()[i];
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) bad = i;
    }
    INFO("first mismatch at element " << bad);
    CHECK(bad < 0);
    return;
  }
  REQUIRE(got_in.bytes.size() == want.bytes.size());
  int64_t bad = -1;
  const size_t es = dtype_size(want.dtype);
  for (int64_t i = 0; i < want.numel() && bad < 0; ++i) {
    if (want.dtype == DType::Bool) {
      if ((got_in.bytes[i] != 0) != (want.bytes[i] != 0) || got_in.bytes[i] > 1) bad = i;
    } else if (std::memcmp(got_in.bytes.data() + i * es, want.bytes.data() + i * es, es) != 0) {
      bad = i;
    }
  }
  INFO("first mismatch at element " << bad << (bad >= 0 ? ": got " + std::to_string(got_in.as_int(bad)) + ", want " +
                                                             std::to_string(want.as_int(bad))
                                                       : std::string()));
  CHECK(bad < 0);
}

// One node with `num_inputs` slots and `num_outputs` declared outputs.
struct Case {
  std::deque<Value> values;
  Node node;
  std::vector<Tensor> inputs;  // Undefined = omitted
  std::vector<bool> float_data;  // converted to the run's float dtype on the GPU

  Case(const std::string& op, size_t num_inputs, size_t num_outputs = 1, const std::string& domain = "") {
    node.op_type = op;
    node.domain = domain;
    node.name = op + "_under_test";
    inputs.resize(num_inputs);
    float_data.assign(num_inputs, true);
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
  Case& attr(Attribute a) {
    node.set_attr(std::move(a));
    return *this;
  }
  // Input i; `as_float_dt` = false keeps an fp32 tensor fp32 in 16-bit runs.
  Case& in(size_t i, Tensor t, bool as_float_dt = true) {
    inputs[i] = std::move(t);
    float_data[i] = as_float_dt;
    return *this;
  }
  Case& outputs_dtype(size_t i, DType dt) {
    values[inputs.size() + i].dtype = dt;
    return *this;
  }

  std::vector<Tensor> device_inputs(DType float_dt) const {
    std::vector<Tensor> r;
    for (size_t i = 0; i < inputs.size(); ++i)
      r.push_back(inputs[i].dtype == DType::Float && float_data[i] ? convert_float(inputs[i], float_dt) : inputs[i]);
    return r;
  }

  std::vector<Tensor> run_cuda(DType float_dt) {
    std::vector<Tensor> dev = device_inputs(float_dt);
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < dev.size(); ++i) {
      node.inputs[i] = dev[i].dtype == DType::Undefined ? nullptr : &values[i];
      ptrs.push_back(dev[i].dtype == DType::Undefined ? nullptr : &dev[i]);
    }
    DType dt = DType::Undefined;
    for (const Tensor* t : ptrs)
      if (t) {
        dt = t->dtype;
        break;
      }
    const KernelInfo* k = find_kernel(node.domain, node.op_type, Backend::CUDA, dt);
    FUSE_CHECK(k, "no CUDA kernel for " << node.op_type << " (" << dtype_name(dt) << ")");
    if (k->dispatch_input != 0 && ptrs.size() > static_cast<size_t>(k->dispatch_input) && ptrs[k->dispatch_input])
      if (const KernelInfo* k2 = find_kernel(node.domain, node.op_type, Backend::CUDA, ptrs[k->dispatch_input]->dtype)) k = k2;
    BackendContext ctx(node, backend(), ptrs);
    k->fn(ctx);
    std::vector<Tensor> outs;
    for (size_t i = 0; i < node.outputs.size(); ++i) outs.push_back(node.outputs[i] ? ctx.download(i) : Tensor());
    return outs;
  }

  // The CPU kernel on the inputs the GPU saw (rounded to float_dt), in fp32.
  std::vector<Tensor> run_cpu(DType float_dt) {
    std::vector<Tensor> held;
    for (const Tensor& t : device_inputs(float_dt)) held.push_back(convert_float(t, DType::Float));
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < held.size(); ++i) {
      node.inputs[i] = held[i].dtype == DType::Undefined ? nullptr : &values[i];
      ptrs.push_back(held[i].dtype == DType::Undefined ? nullptr : &held[i]);
    }
    return eval_node_cpu(node, ptrs);
  }

  // Runs both and compares every declared output.
  void check(DType float_dt = DType::Float, double atol = 1e-5, double rtol = 1e-4) {
    std::vector<Tensor> want = run_cpu(float_dt);
    std::vector<Tensor> got = run_cuda(float_dt);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (!node.outputs[i]) continue;
      INFO(node.op_type << " output " << i << " (" << dtype_name(float_dt) << " run), shape " << shape_str(want[i].dims));
      compare(got[i], want[i], float_dt, atol, rtol);
    }
  }
};

inline std::string dims_str(const std::vector<int64_t>& d) { return shape_str(d); }

}  // namespace fuseopt::cuda_generic
