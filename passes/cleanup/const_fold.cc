// Constant folding.
// - Constant nodes become initializers.
// - A node whose inputs are all constants is evaluated once with the CPU
//   kernels (eval_node_cpu) and replaced by its results, unless a result would
//   be large (weights stay as they are: folding a Cast or Expand of a weight
//   would only bloat the file) or the op is random or has no CPU kernel.
// - The exporters' shape subgraphs: Shape/Size of a value whose dims are all
//   known folds; and any small integer value whose every element shape
//   inference knows (Shape -> Gather/Slice/Unsqueeze/Concat/... where the dims
//   selected are static, even when other dims are symbolic) folds too: that is
//   the partial folding of shape computations.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "ir/shape_inference.h"
#include "pass/pass.h"
#include "runtime/eval_node.h"
#include "util/error.h"

namespace fuseopt {
namespace {

constexpr int64_t kMaxFoldedElements = int64_t(1) << 20;  // ~1M elements

bool is_random(const Node& n) {
  static const std::set<std::string> ops = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "Multinomial", "Bernoulli"};
  return n.domain.empty() && ops.count(n.op_type);
}

// Ops whose output can be much larger than their inputs.
bool may_grow(const Node& n) {
  static const std::set<std::string> ops = {"Expand", "ConstantOfShape", "Tile", "Range", "Resize", "Pad",
                                            "Upsample", "OneHot", "EyeLike", "MatMul", "Gemm", "Einsum"};
  return ops.count(n.op_type) != 0;
}

std::optional<int64_t> static_numel(const Value* v) {
  if (!v || !v->shape) return std::nullopt;
  int64_t n = 1;
  for (const Dim& d : *v->shape) {
    if (!d.known()) return std::nullopt;
    n *= d.value;
  }
  return n;
}

std::optional<Tensor> constant_node_value(const Node& n) {
  for (const Attribute& a : n.attrs) {
    switch (a.kind) {
      case Attribute::Kind::Tensor:
        if (a.name == "value" && a.t) return *a.t;
        break;
      case Attribute::Kind::Float:
        if (a.name == "value_float") return Tensor::scalar_float(a.f);
        break;
      case Attribute::Kind::Floats:
        if (a.name == "value_floats") return Tensor::from_floats(a.floats, {static_cast<int64_t>(a.floats.size())});
        break;
      case Attribute::Kind::Int:
        if (a.name == "value_int") return Tensor::from_ints({a.i}, {});
        break;
      case Attribute::Kind::Ints:
        if (a.name == "value_ints") return Tensor::from_ints(a.ints, {static_cast<int64_t>(a.ints.size())});
        break;
      case Attribute::Kind::String:
        if (a.name == "value_string") {
          Tensor t(DType::String, {});
          t.strings = {a.s};
          return t;
        }
        break;
      case Attribute::Kind::Strings:
        if (a.name == "value_strings") {
          Tensor t(DType::String, {static_cast<int64_t>(a.strings.size())});
          t.strings = a.strings;
          return t;
        }
        break;
      default: break;  // sparse_value and the like: left alone
    }
  }
  return std::nullopt;
}

// Shape (with opset-15 start/end) and Size of a value whose selected dims are known.
std::optional<Tensor> fold_shape_of(const Node& n) {
  const Value* in = n.input(0);
  if (!in || !in->shape) return std::nullopt;
  const Shape& s = *in->shape;
  int64_t rank = static_cast<int64_t>(s.size());
  if (n.op_type == "Size") {
    int64_t total = 1;
    for (const Dim& d : s) {
      if (!d.known()) return std::nullopt;
      total *= d.value;
    }
    return Tensor::from_ints({total}, {});
  }
  int64_t start = n.attr_int("start", 0), end = n.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) {
    if (!s[i].known()) return std::nullopt;
    dims.push_back(s[i].value);
  }
  return Tensor::from_ints(dims, {static_cast<int64_t>(dims.size())});
}

// A small integer value whose every element is known from shape inference.
std::optional<Tensor> fold_known_ints(const Value* v, const ShapeInferenceResult& si) {
  if (!v || (v->dtype != DType::Int64 && v->dtype != DType::Int32)) return std::nullopt;
  auto numel = static_numel(v);
  if (!numel || *numel > 64) return std::nullopt;
  auto ints = si.symbolic_ints(v);
  if (!ints || static_cast<int64_t>(ints->size()) != *numel) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : *v->shape) dims.push_back(d.value);
  Tensor t(v->dtype, dims);
  for (int64_t i = 0; i < *numel; ++i) {
    if (v->dtype == DType::Int64) t.data<int64_t>()[i] = (*ints)[i];
    else t.data<int32_t>()[i] = static_cast<int32_t>((*ints)[i]);
  }
  return t;
}

class ConstFold : public Pass {
 public:
  std::string name() const override { return "const_fold"; }
  std::string description() const override {
    return "Constant nodes -> initializers; evaluate nodes with constant inputs; fold static shape computations";
  }

  int run(Rewriter& rw, PassContext& ctx) override {
    ShapeInferenceResult si = rw.infer_shapes();
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes()) order.push_back(n.get());
    int folded = 0;
    for (Node* n : order) {
      if (!rw.alive(n) || n->has_subgraph() || !n->implicit_inputs.empty() || is_random(*n)) continue;
      std::vector<std::optional<Tensor>> results = fold(*n, si);
      if (results.empty()) continue;
      for (size_t i = 0; i < n->outputs.size(); ++i) {
        Value* o = n->outputs[i];
        if (!o || !results[i] || (o->uses.empty() && !o->is_graph_output)) continue;
        rw.replace_with_constant(o, std::move(*results[i]));
        if (!rw.alive(n)) break;
      }
      if (rw.alive(n)) rw.erase_dead({n});
      ++folded;
    }
    return folded;
  }

 private:
  // One result per output (all present), or empty when the node stays.
  std::vector<std::optional<Tensor>> fold(const Node& n, const ShapeInferenceResult& si) {
    std::vector<std::optional<Tensor>> r(n.outputs.size());
    bool std_domain = n.domain.empty() || n.domain == "ai.onnx";
    if (std_domain && n.op_type == "Constant") {
      if (n.outputs.size() != 1) return {};
      r[0] = constant_node_value(n);
      if (!r[0]) return {};
      return r;
    }
    if (std_domain && (n.op_type == "Shape" || n.op_type == "Size") && n.outputs.size() == 1) {
      if (auto t = fold_shape_of(n)) {
        r[0] = std::move(*t);
        return r;
      }
    }
    if (all_inputs_constant(n)) return evaluate(n);
    // Partial folding of shape computations: every output a known small int tensor.
    bool all = true;
    for (size_t i = 0; i < n.outputs.size() && all; ++i) {
      if (!n.outputs[i]) continue;
      r[i] = fold_known_ints(n.outputs[i], si);
      all = r[i].has_value();
    }
    return all ? r : std::vector<std::optional<Tensor>>{};
  }

  static bool all_inputs_constant(const Node& n) {
    bool any = false;
    for (const Value* v : n.inputs) {
      if (!v) continue;
      if (!v->is_const()) return false;
      any = true;
    }
    return any;  // no inputs at all (e.g. generators): not folded
  }

  std::vector<std::optional<Tensor>> evaluate(const Node& n) {
    int64_t largest_input = 0;
    std::vector<const Tensor*> ins;
    for (const Value* v : n.inputs) {
      ins.push_back(v ? v->const_data.get() : nullptr);
      if (v) largest_input = std::max(largest_input, v->const_data->numel());
    }
    // Size guard before running anything: known output sizes, else input sizes.
    for (const Value* o : n.outputs) {
      if (!o) continue;
      // Shape inference (run by the PassManager) understood this node; a node it
      // could not type (unknown op, malformed arity) is not handed to a kernel.
      if (o->dtype == DType::Undefined || !o->shape) return {};
      auto numel = static_numel(o);
      if (numel && *numel > kMaxFoldedElements) return {};
      if (!numel && may_grow(n)) return {};
    }
    if (largest_input > kMaxFoldedElements) return {};
    for (const Tensor* t : ins)
      if (t && t->dtype == DType::String) return {};
    if (!has_cpu_kernel(n, ins)) return {};
    std::vector<Tensor> outs;
    try {
      outs = eval_node_cpu(n, ins);
    } catch (const std::exception& e) {
      spdlog::debug("const_fold: {} not folded: {}", n.label(), e.what());
      return {};
    }
    std::vector<std::optional<Tensor>> r(n.outputs.size());
    for (size_t i = 0; i < n.outputs.size() && i < outs.size(); ++i) {
      if (!n.outputs[i]) continue;
      if (outs[i].numel() > kMaxFoldedElements || outs[i].dtype == DType::Undefined) return {};
      r[i] = std::move(outs[i]);
    }
    return r;
  }
};

}  // namespace
// First: every other pass then sees Constant nodes as initializers and shape
// computations folded to constants.
FUSEOPT_REGISTER_PASS(ConstFold, PassCategory::Cleanup, 100);
}  // namespace fuseopt
