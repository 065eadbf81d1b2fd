// Checks the H4 fusions share (LayerNorm, RMSNorm, SkipLayerNorm, FusedMatMul,
// AddRelu, Conv+BN): dtypes, constant parameter shapes, last-axis reductions.
// Header-only; every function returns a Status whose reason names the DESIGN
// rule and the node, or ok.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/pattern.h"

namespace fuseopt::fusion {

inline std::optional<int64_t> rank_of(const Value* v) {
  if (!v) return std::nullopt;
  if (v->const_data) return static_cast<int64_t>(v->const_data->dims.size());
  if (v->shape) return static_cast<int64_t>(v->shape->size());
  return std::nullopt;
}

// The last dim of v when known (constants always are).
inline std::optional<int64_t> last_dim(const Value* v) {
  if (!v) return std::nullopt;
  if (v->const_data) {
    if (v->const_data->dims.empty()) return std::nullopt;
    return v->const_data->dims.back();
  }
  if (v->shape && !v->shape->empty() && v->shape->back().known()) return v->shape->back().value;
  return std::nullopt;
}

// The shape recorded for v (a constant's dims, else the declared/inferred shape), if any.
inline std::optional<Shape> recorded_shape(const Value* v) {
  if (v->const_data) {
    Shape s;
    for (int64_t d : v->const_data->dims) s.push_back(Dim::of(d));
    return s;
  }
  if (v->shape) return *v->shape;
  return std::nullopt;
}

// The dtype recorded on v: its initializer's, else the declared/inferred one.
// (attn::dtype_of also looks through Constant nodes; the H4 fusions' checks
// never needed that, so this one keeps its own name.)
inline DType value_dtype(const Value* v) {
  if (!v) return DType::Undefined;
  if (v->const_data) return v->const_data->dtype;
  return v->dtype;
}

// Rule 5: every known dtype among `vs` is the same floating type.
inline Status same_float_dtype(const std::vector<const Value*>& vs, const Node* where) {
  DType seen = DType::Undefined;
  const Value* first = nullptr;
  for (const Value* v : vs) {
    const DType t = value_dtype(v);
    if (t == DType::Undefined) continue;
    if (!dtype_is_float(t))
      return Status::reject("rule 5: '", v->name, "' of ", where->label(), " has non-float dtype ", dtype_name(t));
    if (seen == DType::Undefined) {
      seen = t;
      first = v;
    } else if (t != seen) {
      return Status::reject("rule 5: dtypes differ in ", where->label(), ": '", first->name, "' is ",
                            dtype_name(seen), ", '", v->name, "' is ", dtype_name(t));
    }
  }
  return Status::ok();
}

// Rule 2/3: a constant vector of length n along the last axis: [n] or
// [1, ..., 1, n] (n = -1: any length, returned through *len).
inline Status const_last_axis_vector(const Value* v, const char* what, const Node* where, int64_t n,
                                     int64_t* len = nullptr) {
  if (!v || !v->const_data)
    return Status::reject("rule 2: ", what, " '", v ? v->name : "?", "' of ", where->label(), " is not a constant");
  const auto& dims = v->const_data->dims;
  if (dims.empty())
    return Status::reject("rule 3: ", what, " '", v->name, "' of ", where->label(), " is a scalar, not [N]");
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    if (dims[i] != 1)
      return Status::reject("rule 3: ", what, " '", v->name, "' of ", where->label(), " has shape ",
                            shape_str(dims), ": broadcast is not along the last axis only");
  if (n >= 0 && dims.back() != n)
    return Status::reject("rule 2: ", what, " '", v->name, "' of ", where->label(), " has shape ", shape_str(dims),
                          ", expected [", n, "]");
  if (len) *len = dims.back();
  return Status::ok();
}

// Rule 6: a ReduceMean over the last axis only, keepdims=1. `x` is the
// reduced input (for its rank when the axis is given as a positive number).
inline Status reduce_mean_last_axis(const Node* rm, const Value* x) {
  if (rm->attr_int("keepdims", 1) != 1) return Status::reject("rule 6: ", rm->label(), " has keepdims=0");
  std::vector<int64_t> axes;
  if (rm->has_attr("axes")) {
    axes = rm->attr_ints("axes");
  } else if (rm->input(1)) {
    if (!rm->input(1)->const_data)
      return Status::reject("rule 6: axes of ", rm->label(), " are not a constant");
    axes = rm->input(1)->const_data->to_int_vector();
  }
  if (axes.size() != 1)
    return Status::reject("rule 6: ", rm->label(), " reduces ", axes.empty() ? "every axis" : "several axes",
                          ", not the last axis only");
  const int64_t a = axes[0];
  if (a == -1) return Status::ok();
  const auto r = rank_of(x);
  if (r && a == *r - 1) return Status::ok();
  return Status::reject("rule 6: ", rm->label(), " reduces axis ", a, r ? "" : " of an input of unknown rank",
                        ", not the last axis");
}

// Rule 6: epsilon must be a scalar constant; returns it through *eps.
inline Status scalar_epsilon(const Value* v, const Node* where, float* eps) {
  auto s = scalar_value(v);
  if (!s) return Status::reject("rule 6: epsilon '", v ? v->name : "?", "' of ", where->label(),
                                " is not a scalar constant");
  *eps = static_cast<float>(*s);
  return Status::ok();
}

// A copy of a [1, ..., 1, n] constant as [n] (LayerNormalization wants 1-D scale).
inline Tensor as_vector(const Tensor& t) {
  Tensor r = t;
  r.dims = {t.numel()};
  return r;
}

}  // namespace fuseopt::fusion
