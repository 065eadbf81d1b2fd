// Shape functions of the ops that create tensors: Constant, ConstantOfShape, Range (split from
// shape_ops.cc by job). They also give their outputs' symbolic contents where known.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

using Elem = std::optional<SymExpr>;

// --- creation ops ------------------------------------------------------------------------------------------
void constant_fn(ShapeContext& c) {
  for (const Attribute& a : c.node().attrs) {
    if (a.name == "value" && a.t) {
      Shape s;
      for (int64_t d : a.t->dims) s.push_back(Dim::of(d));
      c.set_output(0, a.t->dtype, s);
      if ((dtype_is_integer(a.t->dtype) || a.t->dtype == DType::Bool) && a.t->numel() <= 64 &&
          a.t->bytes.size() >= static_cast<size_t>(a.t->numel()) * dtype_size(a.t->dtype)) {
        SymbolicContents v;
        for (int64_t i = 0; i < a.t->numel(); ++i) v.push_back(SymExpr::constant(a.t->as_int(i)));
        c.set_output_contents(0, std::move(v));
      }
      return;
    }
    const int64_t n = static_cast<int64_t>(a.name == "value_floats" ? a.floats.size()
                                           : a.name == "value_strings" ? a.strings.size()
                                                                        : a.ints.size());
    if (a.name == "value_float") c.set_output(0, DType::Float, {});
    else if (a.name == "value_floats") c.set_output(0, DType::Float, {Dim::of(n)});
    else if (a.name == "value_string") c.set_output(0, DType::String, {});
    else if (a.name == "value_strings") c.set_output(0, DType::String, {Dim::of(n)});
    else if (a.name == "value_int") {
      c.set_output(0, DType::Int64, {});
      c.set_output_contents(0, {SymExpr::constant(a.i)});
    } else if (a.name == "value_ints") {
      c.set_output(0, DType::Int64, {Dim::of(n)});
      SymbolicContents v;
      for (int64_t x : a.ints) v.push_back(SymExpr::constant(x));
      c.set_output_contents(0, std::move(v));
    } else {
      continue;
    }
    return;
  }
}

void constant_of_shape_fn(ShapeContext& c) {
  const Attribute* value = c.node().attr("value");
  const Tensor* fill = value && value->t ? value->t.get() : nullptr;
  c.set_output_dtype(0, fill ? fill->dtype : DType::Float);
  auto target = elems_operand(c, "", 0);
  if (!target) {
    if (auto n = operand_length(c, 0)) c.set_output_shape(0, Shape(static_cast<size_t>(*n)));
    return;
  }
  for (const Elem& e : *target)
    if (auto k = e ? e->constant_value() : std::nullopt; k && *k < 0) c.fail("negative size in the shape");
  const Shape out = dims_of(*target);
  c.set_output_shape(0, out);
  auto n = known_numel(c, out);
  if (!n || *n > 64) return;
  int64_t fill_value = 0;
  if (fill) {
    if (fill->numel() != 1 || !tensor_ok(fill)) return;
    const double d = fill->as_double(0);
    if (d != std::floor(d) || std::fabs(d) > 9e15) return;
    fill_value = static_cast<int64_t>(d);
  }
  c.set_output_contents(0, SymbolicContents(static_cast<size_t>(*n), SymExpr::constant(fill_value)));
}

Elem scalar_operand(const ShapeContext& c, size_t i) {
  const SymbolicContents* v = c.input_contents(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

void range_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  // start, limit and delta are scalars (ONNX's inference: "Input to 'Range' op should be
  // scalars"; mutate_models.py seed 13 m189: Shape(end=-2) gave an empty [0] start, folded
  // into an initializer that the checker then saw).
  static const char* const kNames[] = {"start", "limit", "delta"};
  for (int i = 0; i < 3; ++i)
    if (const Shape* s = shape_of(c, i); s && !s->empty())
      c.fail(std::string(kNames[i]) + " is " + shp(*s) + "; it is a scalar");
  const Tensor* ts = c.input_const(0);
  const Tensor* tl = c.input_const(1);
  const Tensor* td = c.input_const(2);
  if (tensor_ok(ts) && tensor_ok(tl) && tensor_ok(td) && ts->numel() == 1 && tl->numel() == 1 && td->numel() == 1 &&
      dtype_is_float(ts->dtype)) {
    const double start = ts->as_double(0), limit = tl->as_double(0), delta = td->as_double(0);
    if (delta == 0) c.fail("delta is 0");
    const double n = std::ceil((limit - start) / delta);
    if (!std::isfinite(n) || n > 9e15) c.fail("Range has no finite length");
    c.set_output_shape(0, {Dim::of(n <= 0 ? 0 : static_cast<int64_t>(n))});
    return;
  }
  const Elem start = scalar_operand(c, 0), limit = scalar_operand(c, 1), delta = scalar_operand(c, 2);
  auto sc = start ? start->constant_value() : std::nullopt;
  auto lc = limit ? limit->constant_value() : std::nullopt;
  auto dc = delta ? delta->constant_value() : std::nullopt;
  if (dc && *dc == 0) c.fail("delta is 0");
  if (sc && lc && dc) {
    // In 128 bits: start, limit and delta near INT64's ends overflow 64.
    const __int128 span = static_cast<__int128>(*lc) - *sc, d = *dc;
    const __int128 len = d > 0 ? (span + d - 1) / d : (-span - d - 1) / -d;
    if (len > std::numeric_limits<int64_t>::max()) c.fail("Range has more than 2^63 elements");
    const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(len));
    c.set_output_shape(0, {Dim::of(n)});
    if (n <= 64 && !dtype_is_float(c.input_dtype(0))) {
      SymbolicContents v;
      for (int64_t i = 0; i < n; ++i) v.push_back(SymExpr::constant(*sc + i * *dc));
      c.set_output_contents(0, std::move(v));
    }
    return;
  }
  Dim len = Dim::unknown();
  if (start && limit && dc && *dc > 0) {
    const SymExpr span = *limit - *start;
    if (*dc == 1) len = span.to_dim();
    else if (auto q = span.exact_div(SymExpr::constant(*dc))) len = q->to_dim();
  }
  c.set_output_shape(0, {len});
}

}  // namespace

FUSEOPT_SHAPE_FN("", "Constant", constant_fn);
FUSEOPT_SHAPE_FN("", "ConstantOfShape", constant_of_shape_fn);
FUSEOPT_SHAPE_FN("", "Range", range_fn);

}  // namespace fuseopt::shape_ops
