// Helpers shared by the attention-family fusions (QKV packing, Attention,
// LayerNormLinear): constants seen through Constant nodes, last dims traced
// through GEMMs, shapes of values. Header-only.
#pragma once
#include <algorithm>
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

// v's dtype, a Constant node's output counted as its `value` tensor (see const_of).
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
// fuseopt.FusedMatMul(x, W, bias?) with a constant 2-D weight. A FusedMatMul that
// already adds a residual (input 3, ResidualMatMul) is not one: neither fused op
// has a slot for it.
inline bool is_gemm(const Node* n) {
  if (!n) return false;
  if (n->is("MatMul")) return n->inputs.size() == 2;
  return n->domain == "fuseopt" && n->op_type == "FusedMatMul" && !n->input(3);
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
  if (p->is("Split")) {
    std::vector<int64_t> sizes = p->has_attr("split") ? p->attr_ints("split") : std::vector<int64_t>{};
    if (sizes.empty() && p->input(1))
      if (const Tensor* t = const_of(p->input(1)); t && dtype_is_integer(t->dtype)) sizes = t->to_int_vector();
    auto r = rank_of(p->input(0));
    int64_t ax = p->attr_int("axis", 0);
    bool last = ax == -1 || (r && ax == *r - 1);
    for (size_t i = 0; last && i < p->outputs.size() && i < sizes.size(); ++i)
      if (p->output(i) == v) return sizes[i];
    return std::nullopt;
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


// Values that provably share x's first two dims ([B, S]): x itself and what it
// is computed from through ops that keep the leading dims (GEMMs on a 2-D
// weight, bias adds, norms, splits of the last axis, unary activations,
// embedding Gathers of a constant table). Used to prove that a Reshape target
// built from Shape(y)[i] copies B and S when shape inference could not name them.
inline std::vector<const Value*> same_leading_dims(const Value* x, size_t limit = 400) {
  std::vector<const Value*> out = {x};
  for (size_t k = 0; k < out.size() && out.size() < limit; ++k) {
    const Node* p = out[k]->producer;
    if (!p) continue;
    std::vector<const Value*> next;
    const std::string& op = p->op_type;
    const bool fo = p->domain == "fuseopt";
    if (fo && (op == "LayerNorm" || op == "RMSNorm" || op == "AddRelu")) next = {p->input(0)};
    else if (fo && op == "SkipLayerNorm") next = {p->input(0), p->input(1)};
    else if (fo && op == "LayerNormLinear") next = {p->input(0)};
    else if (fo && op == "EmbedLayerNorm") {
      // The lookups' indices of the output's leading rank (the token ids [B, S]; not a
      // [1, S] position row, which only broadcasts): what an embedding Gather gives.
      for (size_t i = 3; i < p->inputs.size(); i += 2) {
        const Value* ids = p->input(i);
        if (!ids || !ids->shape || !out[k]->shape || ids->shape->size() + 1 != out[k]->shape->size()) continue;
        bool ones = false;
        for (size_t d = 0; d < std::min<size_t>(2, ids->shape->size()); ++d)
          ones |= (*ids->shape)[d].known() && (*ids->shape)[d].value == 1;
        if (!ones) next.push_back(ids);
      }
    }
    else if (fo && op == "FusedMatMul") next = {p->input(0)};
    else if (fo && op == "Attention") next = {p->input(0)};
    else if (p->domain.empty() && (op == "LayerNormalization" || op == "Identity" || op == "Cast" || op == "Relu" ||
                                   op == "Erf" || op == "Tanh" || op == "Sigmoid" || op == "Neg" || op == "Sqrt" ||
                                   op == "Softmax" || op == "Dropout"))
      next = {p->input(0)};
    else if (p->domain.empty() && op == "MatMul" && const_of(p->input(1)) && const_of(p->input(1))->dims.size() == 2)
      next = {p->input(0)};
    else if (p->domain.empty() && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")) {
      for (int i = 0; i < 2; ++i) {
        const Tensor* c = const_of(p->input(1 - i));
        if (c && c->dims.size() <= 1 && !const_of(p->input(i))) next = {p->input(i)};
      }
    } else if (p->domain.empty() && op == "Split") {
      auto r = rank_of(p->input(0));
      int64_t ax = p->attr_int("axis", 0);
      if (ax == -1 || (r && ax == *r - 1) || (r && *r > 2 && ax >= 2)) next = {p->input(0)};
    } else if (p->domain.empty() && op == "Gather" && const_of(p->input(0)) && p->attr_int("axis", 0) == 0) {
      next = {p->input(1)};  // an embedding lookup: [B, S] indices -> [B, S, D]
    }
    for (const Value* v : next)
      if (v && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Element i of the 1-D shape tensor `t` is provably dim `dim` of x (dim < 0:
// dim i), x's leading dims being shared by the values in `same`.
inline bool shape_entry_is_dim(const Value* t, int i, const Value* x, const std::vector<const Value*>& same,
                               int dim = -1) {
  if (!t || !x) return false;
  const int want = dim < 0 ? i : dim;
  auto sv = symbolic_value(t);
  if (sv && static_cast<int>(sv->size()) > i && x->shape && static_cast<int>(x->shape->size()) > want) {
    const Dim& d = (*sv)[i];
    const Dim& xd = (*x->shape)[want];
    if (d.known() && xd.known() && d.value == xd.value) return true;
    if (!d.symbol.empty() && d.symbol != "-1" && d.symbol == xd.symbol) return true;
  }
  // Structure: Concat(piece, ...) where the piece holding element i is
  // Unsqueeze(Gather(Shape(y), i)) or Shape(y, start=i, end=i+1), y in `same`.
  // Structure: the piece holding element i (t itself, or one input of a Concat) is
  // Unsqueeze(Gather(Shape(y), want)), Gather(Shape(y), [want]) or
  // Shape(y, start=want, end=want+1), with y in `same`.
  const Value* piece = nullptr;
  const Node* c = t->producer;
  if (c && c->is("Concat")) {
    int64_t pos = 0;
    for (const Value* p : c->inputs) {
      int64_t len = 1;
      if (const Tensor* ct = const_of(p)) len = ct->numel();
      else if (p && p->shape && p->shape->size() == 1 && (*p->shape)[0].known()) len = (*p->shape)[0].value;
      if (pos + len <= i) { pos += len; continue; }
      if (len == 1 && pos == i) piece = p;
      break;
    }
  } else if (i == 0) {
    piece = t;
  }
  const Node* n = piece ? piece->producer : nullptr;
  const Value* y = nullptr;
  auto shape_of_gather = [&](const Node* gth) -> const Value* {
    if (!gth || !gth->is("Gather") || gth->attr_int("axis", 0) != 0 || !gth->input(0) || !gth->input(0)->producer) return nullptr;
    const Node* sh = gth->input(0)->producer;
    if (!sh->is("Shape") || sh->attr_int("start", 0) != 0 || sh->has_attr("end")) return nullptr;
    auto j = const_of(gth->input(1));
    return j && j->numel() == 1 && j->as_int(0) == want ? sh->input(0) : nullptr;
  };
  if (n && n->is("Unsqueeze")) {
    y = shape_of_gather(n->input(0) ? n->input(0)->producer : nullptr);
  } else if (n && n->is("Gather")) {
    y = shape_of_gather(n);
  } else if (n && n->is("Shape") && n->attr_int("start", 0) == want && n->attr_int("end", want + 1) == want + 1) {
    y = n->input(0);
  }
  return y && std::find(same.begin(), same.end(), y) != same.end();
}

}  // namespace fuseopt::attn
