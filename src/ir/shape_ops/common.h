// Helpers shared by the shape functions in this folder (not a public API).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/shape_inference.h"

namespace fuseopt::shape_ops {

inline const Shape* shape_of(const ShapeContext& c, size_t i) {
  const auto& s = c.input_shape(i);
  return s ? &*s : nullptr;
}

inline std::string shp(const Shape& s) { return shape_str(s); }

// Output `out` gets input `in`'s shape; dtype = `dtype` or input's dtype.
inline void same_as_input(ShapeContext& c, size_t in = 0, size_t out = 0, DType dtype = DType::Undefined) {
  c.set_output_dtype(out, dtype == DType::Undefined ? c.input_dtype(in) : dtype);
  if (const Shape* s = shape_of(c, in)) c.set_output_shape(out, *s);
}

// Broadcasts the given inputs (omitted ones skipped); fails on a mismatch.
// nullopt when some input's rank is unknown.
inline std::optional<Shape> broadcast_inputs(ShapeContext& c, const std::vector<size_t>& ins) {
  std::optional<Shape> acc = Shape{};
  for (size_t i : ins) {
    if (!c.has_input(i)) continue;
    const Shape* s = shape_of(c, i);
    if (!s) return std::nullopt;
    auto b = broadcast_shapes(*acc, *s);
    if (!b) c.fail("cannot broadcast " + shp(*acc) + " with " + shp(*s) + " (input " + std::to_string(i) + ")");
    acc = b;
  }
  return acc;
}

// An int-list operand that moved from an attribute to an input across opsets
// (axes, split, pads, starts...). The attribute wins when present.
struct IntList {
  bool present = false;                  // given at all (attribute or input)
  std::optional<std::vector<int64_t>> v;  // its values when known
};
inline IntList int_list(const ShapeContext& c, const char* attr, size_t input) {
  IntList r;
  if (const Attribute* a = c.node().attr(attr)) {
    r.present = true;
    r.v = a->ints;
    if (a->kind == Attribute::Kind::Int) r.v = std::vector<int64_t>{a->i};
    return r;
  }
  if (c.has_input(input)) {
    r.present = true;
    r.v = c.input_ints(input);
  }
  return r;
}

// Dim arithmetic through SymExpr; anonymous when an operand is.
inline std::optional<SymExpr> expr(const Dim& d) { return SymExpr::from_dim(d); }
inline Dim dim_add(const Dim& a, int64_t k) {
  auto e = expr(a);
  return e ? (*e + SymExpr::constant(k)).to_dim() : Dim::unknown();
}
inline Dim dim_add(const Dim& a, const Dim& b) {
  auto x = expr(a), y = expr(b);
  return x && y ? (*x + *y).to_dim() : Dim::unknown();
}
inline Dim dim_mul(const Dim& a, const Dim& b) {
  if ((a.known() && a.value == 0) || (b.known() && b.value == 0)) return Dim::of(0);
  auto x = expr(a), y = expr(b);
  return x && y ? (*x * *y).to_dim() : Dim::unknown();
}
inline Dim dim_div_exact(const Dim& a, const Dim& b) {
  auto x = expr(a), y = expr(b);
  if (!x || !y) return Dim::unknown();
  auto q = x->exact_div(*y);
  return q ? q->to_dim() : Dim::unknown();
}
// floor((a) / k) for a window formula; symbolic only when exact.
inline Dim dim_floor_div(const Dim& a, int64_t k, bool ceil_mode = false) {
  if (k <= 0) return Dim::unknown();
  if (a.known()) return Dim::of(ceil_mode ? a.value / k + (a.value % k != 0 ? 1 : 0) : a.value / k);  // no a + k - 1 overflow
  if (k == 1) return a;
  return dim_div_exact(a, Dim::of(k));
}

// Picks the better of two dims that must be equal; sets `conflict` when both
// are known and differ.
inline Dim unify(const Dim& a, const Dim& b, bool& conflict) {
  if (a.known() && b.known()) {
    if (a.value != b.value) conflict = true;
    return a;
  }
  if (a.known()) return a;
  if (b.known()) return b;
  if (!a.symbol.empty()) return a;
  return b;
}

// Element contents helpers.
inline Dim content_dim(const std::optional<SymExpr>& e) { return e ? e->to_dim() : Dim::unknown(); }
inline std::optional<int64_t> content_int(const std::optional<SymExpr>& e) {
  return e ? e->constant_value() : std::nullopt;
}
// Shape contents of a 1-D shape operand as dims; nullopt when untracked.
inline std::optional<std::vector<std::optional<SymExpr>>> shape_operand(const ShapeContext& c, size_t i) {
  if (const SymbolicContents* s = c.input_contents(i)) return *s;
  return std::nullopt;
}

// A tensor whose bytes cover its elements (malformed files can break this).
inline bool tensor_ok(const Tensor* t) {
  return t && t->dtype != DType::String && t->dtype != DType::Undefined && t->numel() >= 0 &&
         t->bytes.size() >= static_cast<size_t>(t->numel()) * dtype_size(t->dtype);
}

// a * b for dims, element counts and strides. A product past int64 (dims
// of 2^40 in a hostile or corrupted file) fails through c.fail, which names
// the node, instead of wrapping around to a small or negative count.
inline int64_t checked_mul(const ShapeContext& c, int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    c.fail(what + " overflows int64 (" + std::to_string(a) + " x " + std::to_string(b) + ")");
  return r;
}

// Numel of a fully known shape; nullopt otherwise. Fails (naming the node)
// when the count does not fit int64; a 0 dim makes it 0 whatever the rest.
inline std::optional<int64_t> known_numel(const ShapeContext& c, const Shape& s) {
  for (const Dim& d : s) {
    if (!d.known()) return std::nullopt;
    if (d.value == 0) return 0;
  }
  int64_t n = 1;
  for (const Dim& d : s) n = checked_mul(c, n, d.value, "the element count of shape " + shp(s));
  return n;
}

inline DType dtype_attr(const ShapeContext& c, const char* name, DType dflt) {
  return c.node().has_attr(name) ? static_cast<DType>(c.node().attr_int(name, 0)) : dflt;
}

// Elementwise map over the symbolic contents of inputs `ins`, broadcast to
// `out` (fully known, small). nullopt when an input is untracked or a shape is
// not fully known. `f` gets one optional<SymExpr> per input.
template <class F>
std::optional<SymbolicContents> map_contents(const ShapeContext& c, const std::vector<size_t>& ins,
                                             const Shape& out, F f) {
  auto n_out = known_numel(c, out);
  if (!n_out || *n_out > 64) return std::nullopt;
  const size_t rank = out.size();
  std::vector<const SymbolicContents*> data;
  std::vector<std::vector<int64_t>> strides;  // per input, per output axis (0 = broadcast)
  for (size_t i : ins) {
    const SymbolicContents* sc = c.input_contents(i);
    const Shape* s = shape_of(c, i);
    const auto n_in = s ? known_numel(c, *s) : std::nullopt;
    if (!sc || !n_in || static_cast<int64_t>(sc->size()) != *n_in || s->size() > rank) return std::nullopt;
    std::vector<int64_t> st(rank, 0);
    int64_t stride = 1;
    for (size_t k = 0; k < s->size(); ++k) {
      const size_t axis_in = s->size() - 1 - k, axis_out = rank - 1 - k;
      st[axis_out] = (*s)[axis_in].value == 1 ? 0 : stride;
      stride = checked_mul(c, stride, (*s)[axis_in].value, "a stride of shape " + shp(*s));
    }
    data.push_back(sc);
    strides.push_back(std::move(st));
  }
  SymbolicContents result;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < *n_out; ++e) {
    std::vector<std::optional<SymExpr>> args;
    for (size_t k = 0; k < data.size(); ++k) {
      int64_t off = 0;
      for (size_t a = 0; a < rank; ++a) off += idx[a] * strides[k][a];
      args.push_back((*data[k])[off]);
    }
    result.push_back(f(args));
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < out[a].value) break;
      idx[a] = 0;
    }
  }
  return result;
}

// Numpy matmul shape (matmul.cc); fails on known, different inner dims.
Shape matmul_shape(const ShapeContext& c, const Shape& a, const Shape& b);

// A list operand given as an ints attribute (older opsets) or as input `input`
// with known symbolic contents; nullopt when neither is known.
inline std::optional<SymbolicContents> elems_operand(const ShapeContext& c, const char* attr, size_t input) {
  if (const Attribute* a = c.node().attr(attr)) {
    SymbolicContents r;
    for (int64_t v : a->ints) r.push_back(SymExpr::constant(v));
    return r;
  }
  if (!c.has_input(input)) return std::nullopt;
  if (const SymbolicContents* s = c.input_contents(input)) return *s;
  return std::nullopt;
}

// Length of a 1-D operand that may be untracked (from its shape).
// Capped: the length becomes a rank, and no real tensor has a rank this large.
constexpr int64_t kMaxRank = 1024;
inline std::optional<int64_t> operand_length(const ShapeContext& c, size_t input) {
  if (const SymbolicContents* s = c.input_contents(input)) return static_cast<int64_t>(s->size());
  if (const Shape* s = shape_of(c, input); s && s->size() == 1 && (*s)[0].known() && (*s)[0].value <= kMaxRank)
    return (*s)[0].value;
  return std::nullopt;
}

// The dims a shape tensor's symbolic contents describe (content_dim of each element).
inline Shape dims_of(const SymbolicContents& v) {
  Shape s;
  for (const auto& e : v) s.push_back(content_dim(e));
  return s;
}

}  // namespace fuseopt::shape_ops
