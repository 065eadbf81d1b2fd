// Shape functions: ops that move or index data and the shape-tensor ops
// exporters chain together (Shape, Gather, Unsqueeze, Concat, Slice, Reshape,
// Expand, ...). These also propagate symbolic contents. The ops that create
// tensors (Constant, ConstantOfShape, Range) are in creation.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

using Elem = std::optional<SymExpr>;

// Values at or beyond this mean "to the end" in Slice (exporters write INT64_MAX
// or INT32_MAX).
constexpr int64_t kToEnd = int64_t{1} << 30;


void pass_contents(ShapeContext& c, size_t in = 0, size_t out = 0) {
  if (const SymbolicContents* v = c.input_contents(in)) c.set_output_contents(out, *v);
}

// --- Shape, Size --------------------------------------------------------------------------------
void shape_fn(ShapeContext& c) {
  c.set_output_dtype(0, DType::Int64);
  const Shape* s = shape_of(c, 0);
  if (!s) {
    c.set_output_shape(0, {Dim::unknown()});
    return;
  }
  const int64_t r = static_cast<int64_t>(s->size());
  auto clamp = [r](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  const int64_t start = clamp(c.node().attr_int("start", 0));
  const int64_t end = std::max(start, clamp(c.node().attr_int("end", r)));
  c.set_output_shape(0, {Dim::of(end - start)});
  SymbolicContents v;
  for (int64_t i = start; i < end; ++i) v.push_back(SymExpr::from_dim((*s)[i]));
  c.set_output_contents(0, std::move(v));
}

void size_fn(ShapeContext& c) {
  c.set_output(0, DType::Int64, {});
  if (const Shape* s = shape_of(c, 0)) {
    const Dim n = dims_product(*s, 0, s->size());
    c.set_output_contents(0, {SymExpr::from_dim(n)});
  }
}

// --- Reshape ------------------------------------------------------------------------------------
// Reshape's shape, Expand's shape and Tile's repeats are 1-D (ONNX's inference refuses others).
void require_1d(ShapeContext& c, size_t i, const char* what) {
  if (auto r = c.input_rank(i); r && *r != 1)
    c.fail(std::string(what) + " must be a 1-D tensor; it has rank " + std::to_string(*r));
}

void reshape_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  require_1d(c, 1, "the shape input");
  const Shape* in = shape_of(c, 0);
  const bool allowzero = c.node().attr_int("allowzero", 0) != 0;
  std::optional<SymbolicContents> target;
  if (const Attribute* a = c.node().attr("shape")) {  // opset < 5
    target.emplace();
    for (int64_t v : a->ints) target->push_back(SymExpr::constant(v));
  } else {
    target = elems_operand(c, "", 1);
  }
  if (!target) {
    if (auto n = operand_length(c, 1)) c.set_output_shape(0, Shape(static_cast<size_t>(*n)));
    return;
  }
  Shape out;
  int infer_at = -1;
  for (size_t i = 0; i < target->size(); ++i) {
    const Elem& e = (*target)[i];
    auto k = e ? e->constant_value() : std::nullopt;
    if (k && *k == 0 && !allowzero) {
      if (in && i >= in->size()) c.fail("shape entry " + std::to_string(i) + " is 0 but the input " + shp(*in) + " has no such dim");
      out.push_back(in ? (*in)[i] : Dim::unknown());
    } else if (k && *k == -1) {
      if (infer_at >= 0) c.fail("more than one -1 in the target shape");
      infer_at = static_cast<int>(i);
      out.push_back(Dim::unknown());
    } else if (k && *k < -1) {
      c.fail("invalid target shape entry " + std::to_string(*k));
    } else {
      out.push_back(e ? e->to_dim() : Dim::unknown());
    }
  }
  if (in) {
    const Dim total = dims_product(*in, 0, in->size());
    if (infer_at >= 0) {
      Shape rest = out;
      rest.erase(rest.begin() + infer_at);
      const Dim others = dims_product(rest, 0, rest.size());
      // ONNX's inference: "Product cannot be 0 in combination with -1", and ONNX Runtime
      // refuses it when it runs (the -1 could be anything). A batch of 0 reached it through
      // shape arithmetic: the input passed the checker, the written model, whose target
      // fuseopt had folded into a constant, did not.
      if (others.known() && others.value == 0) {
        std::string t;
        for (size_t i = 0; i < out.size(); ++i) {
          const std::string d = shp(Shape{out[i]});  // "[x]"
          t += (i ? "," : "") + (static_cast<int>(i) == infer_at ? std::string("-1") : d.substr(1, d.size() - 2));
        }
        c.fail("cannot reshape " + shp(*in) + " to [" + t + "]: the other dims' product is 0, so the -1 is not determined");
      }
      if (total.known() && others.known() && others.value != 0 && total.value % others.value != 0)
        c.fail("cannot reshape " + shp(*in) + " to " + shp(out) + " (" + std::to_string(total.value) +
               " elements not divisible by " + std::to_string(others.value) + ")");
      out[infer_at] = dim_div_exact(total, others);
    } else {
      const Dim prod = dims_product(out, 0, out.size());
      if (dims_conflict(total, prod)) c.fail("cannot reshape " + shp(*in) + " to " + shp(out));
    }
  }
  c.set_output_shape(0, out);
  pass_contents(c);
}

// --- Transpose ------------------------------------------------------------------------------------
void transpose_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t r = static_cast<int64_t>(s->size());
  std::vector<int64_t> perm = c.node().attr_ints("perm");
  if (!c.node().has_attr("perm"))
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    c.fail("perm has " + std::to_string(perm.size()) + " entries for input " + shp(*s));
  Shape out;
  std::set<int64_t> seen;
  for (int64_t p : perm) {
    // ONNX's perm is a permutation of 0..rank-1: no negative entries.
    if (p < 0 || p >= r) c.fail("perm entry " + std::to_string(p) + " is not an axis of input " + shp(*s));
    const int64_t a = p;
    if (!seen.insert(a).second) c.fail("perm repeats axis " + std::to_string(a));
    out.push_back((*s)[a]);
  }
  c.set_output_shape(0, out);
}

// --- Unsqueeze / Squeeze / Flatten ---------------------------------------------------------------------
void unsqueeze_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  pass_contents(c);
  const Shape* s = shape_of(c, 0);
  IntList axes = int_list(c, "axes", 1);
  if (!s) return;
  if (!axes.v) {
    if (auto n = operand_length(c, 1)) c.set_output_shape(0, Shape(s->size() + *n));
    return;
  }
  const int64_t out_rank = static_cast<int64_t>(s->size() + axes.v->size());
  std::set<int64_t> at;
  for (int64_t a : *axes.v)
    if (!at.insert(c.normalize_axis(a, out_rank)).second) c.fail("axes repeat " + std::to_string(a));
  Shape out;
  size_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(at.count(i) ? Dim::of(1) : (*s)[k++]);
  c.set_output_shape(0, out);
}

void squeeze_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  pass_contents(c);
  const Shape* s = shape_of(c, 0);
  IntList axes = int_list(c, "axes", 1);
  if (!s || (axes.present && !axes.v)) return;
  const int64_t r = static_cast<int64_t>(s->size());
  std::set<int64_t> drop;
  if (axes.present) {
    for (int64_t a : *axes.v) {
      const int64_t n = c.normalize_axis(a, r);
      if ((*s)[n].known() && (*s)[n].value != 1)
        c.fail("cannot squeeze axis " + std::to_string(a) + " of " + shp(*s) + " (size " + (*s)[n].str() + ")");
      drop.insert(n);
    }
  } else {
    for (int64_t i = 0; i < r; ++i) {
      if (!(*s)[i].known()) return;  // might or might not be 1
      if ((*s)[i].value == 1) drop.insert(i);
    }
  }
  Shape out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop.count(i)) out.push_back((*s)[i]);
  c.set_output_shape(0, out);
}

void flatten_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  pass_contents(c);
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t r = static_cast<int64_t>(s->size());
  int64_t axis = c.node().attr_int("axis", 1);
  if (axis < -r || axis > r) c.fail("axis " + std::to_string(axis) + " is out of range for " + shp(*s));
  if (axis < 0) axis += r;
  c.set_output_shape(0, {dims_product(*s, 0, axis), dims_product(*s, axis, r)});
}

// --- Concat / Split ----------------------------------------------------------------------------------
void concat_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* first = nullptr;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (const Shape* s = shape_of(c, i); s && !first) first = s;
  if (!first) return;
  const int64_t r = static_cast<int64_t>(first->size());
  if (!c.node().has_attr("axis")) c.fail("missing attribute 'axis'");
  if (r == 0) c.fail("a scalar input: Concat's inputs have rank 1 or more");
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", 0), r);
  Shape out = *first;
  std::optional<SymExpr> sum = SymExpr::constant(0);
  bool all_known = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const Shape* s = shape_of(c, i);
    if (!s) {
      all_known = false;
      continue;
    }
    if (static_cast<int64_t>(s->size()) != r)
      c.fail("input " + std::to_string(i) + " " + shp(*s) + " has a different rank than " + shp(*first));
    for (int64_t d = 0; d < r; ++d) {
      if (d == axis) continue;
      bool conflict = false;
      out[d] = unify(out[d], (*s)[d], conflict);
      if (conflict) c.fail("input " + std::to_string(i) + " " + shp(*s) + " does not match " + shp(*first) + " off the axis");
    }
    auto e = SymExpr::from_dim((*s)[axis]);
    if (sum && e) sum = *sum + *e;
    else sum.reset();
  }
  out[axis] = all_known && sum ? sum->to_dim() : Dim::unknown();
  c.set_output_shape(0, out);
  if (axis == 0) {  // row-major: concatenating along axis 0 appends
    SymbolicContents v;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      if (!c.has_input(i)) continue;
      const SymbolicContents* p = c.input_contents(i);
      if (!p) return;
      v.insert(v.end(), p->begin(), p->end());
    }
    c.set_output_contents(0, std::move(v));
  }
}

void split_fn(ShapeContext& c) {
  const size_t n = c.num_outputs();
  for (size_t i = 0; i < n; ++i) c.set_output_dtype(i, c.input_dtype(0));
  const Shape* s = shape_of(c, 0);
  if (!s || n == 0) return;
  const int64_t r = static_cast<int64_t>(s->size());
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", 0), r);
  const Dim d = (*s)[axis];
  IntList split = int_list(c, "split", 1);
  std::vector<Dim> parts;
  if (split.present) {
    if (!split.v) {
      for (size_t i = 0; i < n; ++i) parts.push_back(Dim::unknown());
    } else {
      if (split.v->size() != n)
        c.fail("split has " + std::to_string(split.v->size()) + " entries for " + std::to_string(n) + " outputs");
      int64_t total = 0;
      for (int64_t v : *split.v) {
        if (v < 0) c.fail("negative split size " + std::to_string(v));
        total += v;
        parts.push_back(Dim::of(v));
      }
      if (d.known() && d.value != total)
        c.fail("split sizes add up to " + std::to_string(total) + ", axis has " + d.str());
    }
  } else {
    const int64_t k = static_cast<int64_t>(n);
    const bool uneven_ok = c.node().has_attr("num_outputs");  // opset 18: last chunk may be smaller
    if (d.known()) {
      if (!uneven_ok && d.value % k != 0)
        c.fail("axis size " + d.str() + " does not split evenly into " + std::to_string(k) + " outputs");
      const int64_t chunk = (d.value + k - 1) / k;
      for (int64_t i = 0; i < k; ++i) parts.push_back(Dim::of(std::max<int64_t>(0, std::min(chunk, d.value - i * chunk))));
    } else {
      const Dim chunk = dim_div_exact(d, Dim::of(k));
      for (int64_t i = 0; i < k; ++i) parts.push_back(chunk);
    }
  }
  const SymbolicContents* v = r == 1 ? c.input_contents(0) : nullptr;
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    Shape o = *s;
    o[axis] = parts[i];
    c.set_output_shape(i, o);
    if (v && parts[i].known() && offset + parts[i].value <= static_cast<int64_t>(v->size())) {
      c.set_output_contents(i, SymbolicContents(v->begin() + offset, v->begin() + offset + parts[i].value));
      offset += parts[i].value;
    } else {
      v = nullptr;
    }
  }
}

// --- Slice --------------------------------------------------------------------------------------------
struct SliceRange {
  int64_t start, end, step, count;
};

// Numeric slice of a known size (ONNX clamping rules).
SliceRange slice_known(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (dim <= 0 || step == 0) return {0, 0, step, 0};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  const int64_t span = step > 0 ? end - start : start - end;
  const int64_t astep = step > 0 ? step : -step;
  const int64_t count = span <= 0 ? 0 : (span + astep - 1) / astep;
  return {start, end, step, count};
}

// Length of one sliced axis. Symbolic starts/ends/dims assume the indices are
// in range (what the exporters' x[:, :seq] chains mean).
Dim slice_dim(const Dim& dim, const Elem& start, const Elem& end, int64_t step) {
  auto sc = start ? start->constant_value() : std::nullopt;
  auto ec = end ? end->constant_value() : std::nullopt;
  if (dim.known() && sc && ec) return Dim::of(slice_known(dim.value, *sc, *ec, step).count);
  if (!start || !end) return Dim::unknown();
  // x[:, :seq] of a size-1 (broadcast) axis keeps it: 1, not seq (MPT's ALiBi [H, 1, S_max]
  // sliced [:, :seq, :seq]). The in-range assumption below is for tables at least that long.
  if (dim.known() && dim.value == 1 && step == 1 && sc && *sc == 0 && !ec && !end->all_terms_negative())
    return Dim::of(1);
  auto d = SymExpr::from_dim(dim);
  if (step < 0) {
    // Only the full reversal x[::-1] is understood symbolically.
    if (sc && ec && *sc == -1 && *ec <= -kToEnd && step == -1) return dim;
    return Dim::unknown();
  }
  std::optional<SymExpr> s, e;
  if (sc) {
    if (*sc >= 0) s = SymExpr::constant(dim.known() ? std::min(*sc, dim.value) : *sc);
    else if (d) s = *d + SymExpr::constant(*sc);
  } else if (start->all_terms_negative()) {
    if (d) s = *d + *start;  // x[:, -seq:] counts from the end
  } else {
    s = *start;
  }
  if (ec) {
    if (*ec >= kToEnd) e = d;
    else if (*ec >= 0) e = SymExpr::constant(dim.known() ? std::min(*ec, dim.value) : *ec);
    else if (d) e = *d + SymExpr::constant(*ec);
  } else if (end->all_terms_negative()) {
    if (d) e = *d + *end;
  } else {
    e = *end;
  }
  if (!s || !e) return Dim::unknown();
  const SymExpr len = *e - *s;
  if (auto k = len.constant_value()) return Dim::of(std::max<int64_t>(0, (*k + step - 1) / step));
  if (step == 1) return len.to_dim();
  auto q = len.exact_div(SymExpr::constant(step));
  return q ? q->to_dim() : Dim::unknown();
}

void slice_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t r = static_cast<int64_t>(s->size());
  const bool attr_form = c.node().has_attr("starts");  // opset < 10
  auto starts = elems_operand(c, "starts", 1);
  auto ends = elems_operand(c, "ends", 2);
  IntList axes = attr_form ? int_list(c, "axes", 99) : int_list(c, "", 3);
  IntList steps = attr_form ? IntList{} : int_list(c, "", 4);
  Shape out = *s;
  std::optional<size_t> count;
  if (starts) count = starts->size();
  else if (ends) count = ends->size();
  else if (auto n = operand_length(c, 1)) count = static_cast<size_t>(*n);
  if ((axes.present && !axes.v) || (steps.present && !steps.v) || !count) {
    // Which axes are sliced is unknown: every dim may change.
    c.set_output_shape(0, Shape(s->size()));
    return;
  }
  std::vector<int64_t> ax = axes.v.value_or(std::vector<int64_t>{});
  if (!axes.present) {
    if (*count > s->size()) c.fail(std::to_string(*count) + " starts for input " + shp(*s));
    for (size_t i = 0; i < *count; ++i) ax.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> st = steps.v.value_or(std::vector<int64_t>(ax.size(), 1));
  if ((starts && starts->size() != ax.size()) || (ends && ends->size() != ax.size()) || st.size() != ax.size())
    c.fail("starts/ends/axes/steps have different lengths");
  std::set<int64_t> seen;
  for (size_t i = 0; i < ax.size(); ++i) {
    const int64_t a = c.normalize_axis(ax[i], r);
    if (!seen.insert(a).second) c.fail("axes repeat " + std::to_string(ax[i]));
    if (st[i] == 0) c.fail("step 0");
    out[a] = slice_dim((*s)[a], starts ? (*starts)[i] : Elem{}, ends ? (*ends)[i] : Elem{}, st[i]);
  }
  c.set_output_shape(0, out);

  // Contents of a sliced 1-D tracked tensor.
  const SymbolicContents* v = c.input_contents(0);
  if (!v || r != 1 || ax.size() != 1 || !starts || !ends) return;
  auto s0 = (*starts)[0] ? (*starts)[0]->constant_value() : std::nullopt;
  auto e0 = (*ends)[0] ? (*ends)[0]->constant_value() : std::nullopt;
  if (!s0 || !e0) return;
  const SliceRange sr = slice_known(static_cast<int64_t>(v->size()), *s0, *e0, st[0]);
  SymbolicContents o;
  for (int64_t k = 0, i = sr.start; k < sr.count; ++k, i += sr.step) o.push_back((*v)[i]);
  c.set_output_contents(0, std::move(o));
}

// --- Expand / Tile / Pad ---------------------------------------------------------------------------------
void expand_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  require_1d(c, 1, "the shape input");
  const Shape* s = shape_of(c, 0);
  auto target = elems_operand(c, "", 1);
  if (!s) return;
  if (!target) {
    if (auto n = operand_length(c, 1)) c.set_output_shape(0, Shape(std::max<size_t>(s->size(), *n)));
    return;
  }
  for (const Elem& e : *target)
    if (auto k = e ? e->constant_value() : std::nullopt; k && *k < 0) c.fail("negative size in the target shape");
  auto out = broadcast_shapes(*s, dims_of(*target));
  if (!out) c.fail("cannot expand " + shp(*s) + " to " + shp(dims_of(*target)));
  c.set_output_shape(0, *out);
  if (auto v = map_contents(c, {0}, *out, [](const std::vector<Elem>& a) { return a[0]; }))
    c.set_output_contents(0, std::move(*v));
}

void tile_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  require_1d(c, 1, "the repeats input");
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  auto reps = elems_operand(c, "", 1);
  if (!reps) {
    c.set_output_shape(0, Shape(s->size()));
    return;
  }
  if (reps->size() != s->size()) c.fail("repeats has " + std::to_string(reps->size()) + " entries for " + shp(*s));
  Shape out;
  for (size_t i = 0; i < s->size(); ++i) out.push_back(dim_mul((*s)[i], content_dim((*reps)[i])));
  c.set_output_shape(0, out);
}

void pad_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t r = static_cast<int64_t>(s->size());
  auto pads = elems_operand(c, "pads", 1);
  IntList axes = int_list(c, "", 3);
  if (!pads || (axes.present && !axes.v)) {
    c.set_output_shape(0, Shape(s->size()));
    return;
  }
  std::vector<int64_t> ax = axes.v.value_or(std::vector<int64_t>{});
  if (!axes.present)
    for (int64_t i = 0; i < r; ++i) ax.push_back(i);
  if (pads->size() != 2 * ax.size())
    c.fail("pads has " + std::to_string(pads->size()) + " entries for " + std::to_string(ax.size()) + " axes");
  Shape out = *s;
  for (size_t i = 0; i < ax.size(); ++i) {
    const int64_t a = c.normalize_axis(ax[i], r);
    const Elem& b = (*pads)[i];
    const Elem& e = (*pads)[i + ax.size()];
    auto d = SymExpr::from_dim((*s)[a]);
    out[a] = d && b && e ? (*d + *b + *e).to_dim() : Dim::unknown();
  }
  c.set_output_shape(0, out);
}

// --- Gather family ---------------------------------------------------------------------------------------
void gather_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* data = shape_of(c, 0);
  const Shape* idx = shape_of(c, 1);
  if (!data) return;
  const int64_t r = static_cast<int64_t>(data->size());
  if (r == 0) c.fail("Gather data must have rank >= 1");
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", 0), r);
  auto indices = c.input_ints(1);
  if (indices && (*data)[axis].known())
    for (int64_t i : *indices)
      if (i < -(*data)[axis].value || i >= (*data)[axis].value)
        c.fail("index " + std::to_string(i) + " is out of range for axis size " + (*data)[axis].str());
  if (!idx) return;
  Shape out(data->begin(), data->begin() + axis);
  out.insert(out.end(), idx->begin(), idx->end());
  out.insert(out.end(), data->begin() + axis + 1, data->end());
  c.set_output_shape(0, out);
  const SymbolicContents* v = c.input_contents(0);
  if (v && r == 1 && indices) {
    SymbolicContents o;
    const int64_t n = static_cast<int64_t>(v->size());
    for (int64_t i : *indices) {
      const int64_t k = i < 0 ? i + n : i;
      if (k < 0 || k >= n) return;
      o.push_back((*v)[k]);
    }
    c.set_output_contents(0, std::move(o));
  }
}

void gather_elements_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* data = shape_of(c, 0);
  const Shape* idx = shape_of(c, 1);
  if (data && idx && data->size() != idx->size())
    c.fail("indices " + shp(*idx) + " and data " + shp(*data) + " differ in rank");
  if (data) c.normalize_axis(c.node().attr_int("axis", 0), static_cast<int64_t>(data->size()));
  if (idx) c.set_output_shape(0, *idx);
}

void gather_nd_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* data = shape_of(c, 0);
  const Shape* idx = shape_of(c, 1);
  if (!data || !idx) return;
  const int64_t b = c.node().attr_int("batch_dims", 0);
  if (idx->empty()) c.fail("indices must have rank >= 1");
  // batch_dims < min(rank(data), rank(indices)), checked before any sum (mutate_models.py
  // seed 14 m497: batch_dims = INT64_MAX overflowed b + last).
  const int64_t r = static_cast<int64_t>(data->size()), q = static_cast<int64_t>(idx->size());
  if (b < 0 || b >= std::min(r, q))
    c.fail("batch_dims " + std::to_string(b) + " is out of range [0, " + std::to_string(std::min(r, q) - 1) +
           "] for data " + shp(*data) + " and indices " + shp(*idx));
  const Dim last = idx->back();
  if (!last.known()) return;
  if (last.value > r - b)
    c.fail("indices " + shp(*idx) + " index past data " + shp(*data) + " with batch_dims " + std::to_string(b));
  Shape out(idx->begin(), idx->end() - 1);
  out.insert(out.end(), data->begin() + b + last.value, data->end());
  c.set_output_shape(0, out);
}

// --- misc ----------------------------------------------------------------------------------------------------

}  // namespace

FUSEOPT_SHAPE_FN("", "Shape", shape_fn);
FUSEOPT_SHAPE_FN("", "Size", size_fn);
FUSEOPT_SHAPE_FN("", "Reshape", reshape_fn);
FUSEOPT_SHAPE_FN("", "Transpose", transpose_fn);
FUSEOPT_SHAPE_FN("", "Unsqueeze", unsqueeze_fn);
FUSEOPT_SHAPE_FN("", "Squeeze", squeeze_fn);
FUSEOPT_SHAPE_FN("", "Flatten", flatten_fn);
FUSEOPT_SHAPE_FN("", "Concat", concat_fn);
FUSEOPT_SHAPE_FN("", "Split", split_fn);
FUSEOPT_SHAPE_FN("", "Slice", slice_fn);
FUSEOPT_SHAPE_FN("", "Expand", expand_fn);
FUSEOPT_SHAPE_FN("", "Tile", tile_fn);
FUSEOPT_SHAPE_FN("", "Pad", pad_fn);
FUSEOPT_SHAPE_FN("", "Gather", gather_fn);
FUSEOPT_SHAPE_FN("", "GatherElements", gather_elements_fn);
FUSEOPT_SHAPE_FN("", "GatherND", gather_nd_fn);
FUSEOPT_SHAPE_FN("", "ScatterND", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "ScatterElements", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Scatter", [](ShapeContext& c) { same_as_input(c); });

}  // namespace fuseopt::shape_ops
