#include "runtime/eval_node.h"

#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_map>

#include "ir/shape_inference.h"
#include "runtime/kernel.h"
#include "runtime/precision.h"
#include "util/error.h"

namespace fuseopt {

namespace {

DType dispatch_dtype(const KernelInfo* k, const Node& n, const std::vector<const Tensor*>& inputs, int idx) {
  if (idx >= 0 && static_cast<size_t>(idx) < inputs.size() && inputs[idx]) return inputs[idx]->dtype;
  for (const Tensor* t : inputs)
    if (t) return t->dtype;
  return DType::Undefined;
}

const KernelInfo* lookup(const Node& n, const std::vector<const Tensor*>& inputs) {
  // The dispatch input is a property of the kernel; try input 0 first, then
  // each registered kernel's own dispatch index.
  DType dt = dispatch_dtype(nullptr, n, inputs, 0);
  const KernelInfo* k = find_kernel(n.domain, n.op_type, Backend::CPU, dt);
  if (k && k->dispatch_input != 0) {
    DType d2 = dispatch_dtype(k, n, inputs, k->dispatch_input);
    const KernelInfo* k2 = find_kernel(n.domain, n.op_type, Backend::CPU, d2);
    if (k2) k = k2;
  }
  return k;
}

// A KernelContext over host Tensors: outputs are owned Tensors, aliases copy.
class HostEvalContext final : public KernelContext {
 public:
  HostEvalContext(const Node& n, const std::vector<const Tensor*>& inputs) : node_(n) {
    views_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      RtTensor& v = views_[i];
      v.dtype = inputs[i]->dtype;
      v.shape = inputs[i]->dims;
      v.data = const_cast<uint8_t*>(inputs[i]->bytes.data());
      v.where = Backend::CPU;
    }
    present_.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) present_[i] = inputs[i] != nullptr;
    outs_.resize(n.outputs.size());
    out_views_.resize(n.outputs.size());
  }
  const Node& node() const override { return node_; }
  Backend backend() const override { return Backend::CPU; }
  Precision precision() const override { return Precision::FP32; }
  size_t num_inputs() const override { return views_.size(); }
  const RtTensor* input(size_t i) const override {
    return i < views_.size() && present_[i] ? &views_[i] : nullptr;
  }
  const RtTensor* host_input(size_t i) override { return input(i); }
  size_t num_outputs() const override { return outs_.size(); }
  RtTensor* output(size_t i, DType dtype, const std::vector<int64_t>& shape) override {
    FUSE_CHECK(i < outs_.size(), node_.label() << ": kernel wrote output " << i << " but the node declares "
                                              << outs_.size());
    for (int64_t d : shape) FUSE_CHECK(d >= 0, node_.label() << ": negative output dim in " << shape_str(shape));
    outs_[i] = Tensor(dtype, shape);
    // Poison float outputs so a kernel that forgets an element is caught by tests.
    if (dtype == DType::Float) {
      float nan = std::numeric_limits<float>::quiet_NaN();
      float* p = outs_[i].data<float>();
      for (int64_t k = 0; k < outs_[i].numel(); ++k) p[k] = nan;
    }
    RtTensor& v = out_views_[i];
    v.dtype = dtype;
    v.shape = shape;
    v.data = outs_[i].bytes.data();
    v.where = Backend::CPU;
    return &v;
  }
  RtTensor* alias_output(size_t i, size_t j, const std::vector<int64_t>& shape) override {
    const RtTensor* in = input(j);
    FUSE_CHECK(in, node_.label() << ": alias of omitted input " << j);
    FUSE_CHECK(shape_numel(shape) == in->numel(), node_.label() << ": alias of " << shape_str(in->shape)
                                                                << " as " << shape_str(shape) << " changes the size");
    RtTensor* o = output(i, in->dtype, shape);
    if (in->nbytes()) std::memcpy(o->data, in->data, in->nbytes());
    return o;
  }
  void* scratch(size_t bytes) override {
    scratch_.emplace_back(new uint8_t[bytes + 64]);
    return scratch_.back().get();
  }
  void* stream() const override { return nullptr; }

  std::vector<Tensor> take_outputs() { return std::move(outs_); }

 private:
  const Node& node_;
  std::vector<RtTensor> views_;
  std::vector<bool> present_;
  std::vector<Tensor> outs_;
  std::vector<RtTensor> out_views_;
  std::vector<std::unique_ptr<uint8_t[]>> scratch_;
};

// Half-precision nodes (runtime/precision.h). The CPU kernels are fp32, so a
// node whose float inputs are all Float16 (or all BFloat16) and that has no
// kernel of its own runs in fp32: those inputs converted up, Cast to the half
// type run as Cast to FLOAT, its float outputs rounded back once to the dtype
// the op's shape function gives them (Cast to FLOAT and LayerNormalization's
// statistics stay float). For + - * / and sqrt that is the correctly rounded
// half result (fp32 carries more than 2*11+2 bits); dot products and reductions
// accumulate in fp32 as DESIGN's numerics ask. Constant folding of half models
// (DeBERTa's 1/sqrt(d * scale) in fp16) depends on it.
struct Widened {
  DType half = DType::Undefined;
  std::unique_ptr<Node> node;
  std::deque<Tensor> owned;
  std::vector<const Tensor*> inputs;
  const KernelInfo* kernel = nullptr;
};

std::unique_ptr<Widened> widen(const Node& n, const std::vector<const Tensor*>& inputs) {
  DType half = DType::Undefined;
  for (const Tensor* t : inputs) {
    if (!t) continue;
    if (t->dtype == DType::Float || t->dtype == DType::Double) return nullptr;
    if (t->dtype != DType::Float16 && t->dtype != DType::BFloat16) continue;
    if (half != DType::Undefined && half != t->dtype) return nullptr;
    half = t->dtype;
  }
  if (half == DType::Undefined) return nullptr;
  auto w = std::make_unique<Widened>();
  w->half = half;
  w->node = node_in_compute_dtypes(n, [half](DType d) { return d == half ? DType::Float : d; });
  if (!w->node) w->node = std::make_unique<Node>(n);
  for (const Tensor* t : inputs) {
    if (!t || t->dtype != half) {
      w->inputs.push_back(t);
      continue;
    }
    w->owned.push_back(convert_float(*t, DType::Float));
    w->inputs.push_back(&w->owned.back());
  }
  w->kernel = lookup(*w->node, w->inputs);
  return w->kernel ? std::move(w) : nullptr;
}

// The outputs of a widened node back to the dtypes the op gives them with
// its half inputs (the half dtype where the shape function does not say).
std::vector<Tensor> narrow(std::vector<Tensor> outs, const Node& n, const std::vector<const Tensor*>& inputs,
                           DType half) {
  std::unordered_map<const Value*, DType> in_dtypes;
  for (size_t i = 0; i < n.inputs.size() && i < inputs.size(); ++i)
    if (n.inputs[i] && inputs[i]) in_dtypes[n.inputs[i]] = inputs[i]->dtype;
  const std::vector<DType> implied = infer_output_dtypes(n, nullptr, [&](const Value* v) {
    auto it = in_dtypes.find(v);
    return it == in_dtypes.end() ? v->dtype : it->second;
  });
  for (size_t i = 0; i < outs.size(); ++i) {
    const DType want = i < implied.size() && implied[i] != DType::Undefined ? implied[i] : half;
    const DType to = declared_target(outs[i].dtype, want);
    if (to != DType::Undefined && outs[i].dtype == DType::Float)
      outs[i] = convert_float(outs[i], to, HalfOverflow::Ieee);
  }
  return outs;
}

}  // namespace

bool has_cpu_kernel(const Node& n, const std::vector<const Tensor*>& inputs) {
  return lookup(n, inputs) != nullptr || widen(n, inputs) != nullptr;
}

std::vector<Tensor> eval_node_cpu(const Node& n, const std::vector<const Tensor*>& inputs) {
  const KernelInfo* k = lookup(n, inputs);
  if (!k) {
    if (std::unique_ptr<Widened> w = widen(n, inputs)) {
      HostEvalContext ctx(*w->node, w->inputs);
      w->kernel->fn(ctx);
      return narrow(ctx.take_outputs(), n, inputs, w->half);
    }
    DType dt = dispatch_dtype(nullptr, n, inputs, 0);
    throw Error("no cpu kernel for " + n.label() + " (dtype " + dtype_name(dt) + ")");
  }
  HostEvalContext ctx(n, inputs);
  k->fn(ctx);
  return ctx.take_outputs();
}

}  // namespace fuseopt
