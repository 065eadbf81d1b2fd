// Helpers shared by the attention-family fusions (QKV packing, Attention,
// LayerNormLinear): constants seen through Constant nodes, last dims traced
// through GEMMs, shapes of values. Header-only.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "rewrite/pattern.h"

namespace fuseopt::attn {

// Constant data of v: an initializer/folded constant or a Constant node's `value`.
inline const Tensor* const_of(const Value* v) {
  if (!v) return nullptr;
  if (v->const_data) return v->const_data.get();
  if (v->producer && v->producer->is("Constant")) {
    const Attribute* a = v->producer->attr("value");
    if (a && a->kind == Attribute::Kind::Tensor && a->t) return a->t.get();
  }
  return nullptr;
}

// The single element of a constant with one element (any rank).
inline std::optional<double> const_scalar(const Value* v) {
  const Tensor* t = const_of(v);
  if (!t || t->numel() != 1 || t->dtype == DType::String) return std::nullopt;
  return t->as_double(0);
}

inline DType dtype_of(const Value* v) {
  if (!v) return DType::Undefined;
  if (const Tensor* t = const_of(v)) return t->dtype;
  return v->dtype;
}

inline std::optional<int64_t> rank_of(const Value* v) {
  if (const Tensor* t = const_of(v)) return static_cast<int64_t>(t->dims.size());
  if (v && v->shape) return static_cast<int64_t>(v->shape->size());
  return std::nullopt;
}

// Integer contents of a shape-like tensor (constants or tracked symbolically).
inline std::optional<std::vector<int64_t>> const_ints(const Value* v) {
  if (const Tensor* t = const_of(v)) {
    if (!dtype_is_integer(t->dtype)) return std::nullopt;
    return t->to_int_vector();
  }
  auto s = symbolic_value(v);
  if (!s) return std::nullopt;
  std::vector<int64_t> r;
  for (const Dim& d : *s) {
    if (d.known()) { r.push_back(d.value); continue; }
    if (d.symbol == "-1") { r.push_back(-1); continue; }
    return std::nullopt;
  }
  return r;
}

// Dims of v's shape where known (-1 elsewhere); nullopt when the rank is unknown.
inline std::optional<std::vector<int64_t>> known_dims(const Value* v) {
  if (const Tensor* t = const_of(v)) return t->dims;
  if (!v || !v->shape) return std::nullopt;
  std::vector<int64_t> r;
  for (const Dim& d : *v->shape) r.push_back(d.known() ? d.value : -1);
  return r;
}

// A GEMM the QKV / LayerNormLinear fusions understand: MatMul(x, W) or
// fuseopt.FusedMatMul(x, W, bias?) with a constant 2-D weight.
inline bool is_gemm(const Node* n) {
  if (!n) return false;
  if (n->is("MatMul")) return n->inputs.size() == 2;
  return n->domain == "fuseopt" && n->op_type == "FusedMatMul";
}

// The output width N of x when it can be traced: its shape, a GEMM's
// constant weight, a bias Add, a Split's sizes.
inline std::optional<int64_t> last_dim(const Value* v, int depth = 0) {
  if (!v || depth > 6) return std::nullopt;
  if (auto d = known_dims(v); d && !d->empty() && d->back() >= 0) return d->back();
  const Node* p = v->producer;
  if (!p) return std::nullopt;
  if (is_gemm(p) || p->is("Gemm")) {
    const Tensor* w = const_of(p->input(1));
    if (w && w->dims.size() == 2) {
      bool tb = p->attr_int("transB", 0) != 0;
      return tb ? w->dims[0] : w->dims[1];
    }
  }
  if (p->is("Add")) {
    for (int i = 0; i < 2; ++i)
      if (!const_of(p->input(i)))
        if (auto d = last_dim(p->input(i), depth + 1)) return d;
  }
  return std::nullopt;
}

inline bool dims_same(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

}  // namespace fuseopt::attn
