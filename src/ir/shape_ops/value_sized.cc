// Shape functions: ops whose output size comes from a value operand or a scale —
// Resize/Upsample, DepthToSpace/SpaceToDepth, TopK, OneHot, NonZero (moved out of
// shape_ops.cc, which holds the data-movement and shape-tensor ops).
#include <cmath>

#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

void nonzero_fn(ShapeContext& c) {
  c.set_output_dtype(0, DType::Int64);
  if (auto r = c.input_rank(0)) c.set_output_shape(0, {Dim::of(*r), Dim::unknown()});
}

void topk_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  c.set_output_dtype(1, DType::Int64);
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", -1), static_cast<int64_t>(s->size()));
  Dim k = Dim::unknown();
  if (c.node().has_attr("k")) k = Dim::of(c.node().attr_int("k", 0));
  else if (auto e = elems_operand(c, "", 1); e && e->size() == 1) k = content_dim((*e)[0]);
  Shape out = *s;
  out[axis] = k;
  c.set_output_shape(0, out);
  c.set_output_shape(1, out);
}

void onehot_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(2));
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t out_rank = static_cast<int64_t>(s->size()) + 1;
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", -1), out_rank);
  auto e = elems_operand(c, "", 1);
  Shape out = *s;
  out.insert(out.begin() + axis, e && e->size() == 1 ? content_dim((*e)[0]) : Dim::unknown());
  c.set_output_shape(0, out);
}

// Resize (opset 11+: X, roi, scales, sizes) and Upsample (X, scales).
void resize_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  if (!x) return;
  const bool upsample = c.node().op_type == "Upsample";
  const size_t scales_at = upsample || c.num_inputs() == 2 ? 1 : 2;  // Resize-10 is (X, scales)
  IntList axes_attr = int_list(c, "axes", 99);  // opset 18: sizes/scales for these axes only
  std::vector<int64_t> axes = axes_attr.v.value_or(std::vector<int64_t>{});
  if (!axes_attr.present)
    for (size_t i = 0; i < x->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  Shape out = *x;
  if (!upsample && c.has_input(3)) {
    auto sizes = elems_operand(c, "", 3);
    if (!sizes || sizes->size() != axes.size()) {
      c.set_output_shape(0, Shape(x->size()));
      return;
    }
    const std::string policy = c.node().attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      // One scale for all the axes (the smallest or largest of size / input
      // dim), sizes rounded half up: known when every size and dim is.
      double s = 0;
      bool known = true, first = true;
      for (size_t i = 0; i < axes.size() && known; ++i) {
        const Dim& d = (*x)[c.normalize_axis(axes[i], static_cast<int64_t>(x->size()))];
        const std::optional<int64_t> v = content_int((*sizes)[i]);
        known = v && d.known() && d.value > 0;
        if (!known) break;
        const double si = static_cast<double>(*v) / static_cast<double>(d.value);
        if (first || (policy == "not_larger" ? si < s : si > s)) s = si;
        first = false;
      }
      for (size_t i = 0; i < axes.size(); ++i) {
        Dim& d = out[c.normalize_axis(axes[i], static_cast<int64_t>(x->size()))];
        d = known ? Dim::of(static_cast<int64_t>(s * static_cast<double>(d.value) + 0.5)) : Dim::unknown();
      }
      c.set_output_shape(0, out);
      return;
    }
    for (size_t i = 0; i < axes.size(); ++i)
      out[c.normalize_axis(axes[i], static_cast<int64_t>(x->size()))] = content_dim((*sizes)[i]);
    c.set_output_shape(0, out);
    return;
  }
  const Tensor* scales = c.has_input(scales_at) ? c.input_const(scales_at) : nullptr;
  std::vector<float> sc = c.node().attr_floats("scales");  // Upsample-7 attribute
  if (tensor_ok(scales))
    for (int64_t i = 0; i < scales->numel(); ++i) sc.push_back(static_cast<float>(scales->as_double(i)));
  if (sc.size() != axes.size()) {
    c.set_output_shape(0, Shape(x->size()));
    return;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = c.normalize_axis(axes[i], static_cast<int64_t>(x->size()));
    const Dim& d = (*x)[a];
    const double scaled = d.known() ? std::floor(d.value * static_cast<double>(sc[i])) : 0;
    if (!std::isfinite(sc[i]) || sc[i] < 0 || scaled > 9e15) out[a] = Dim::unknown();
    else if (d.known()) out[a] = Dim::of(static_cast<int64_t>(scaled));
    else if (sc[i] == std::floor(sc[i]) && sc[i] >= 1) out[a] = dim_mul(d, Dim::of(static_cast<int64_t>(sc[i])));
    else out[a] = Dim::unknown();
  }
  c.set_output_shape(0, out);
}

void depth_space_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  if (!x) return;
  if (x->size() != 4) c.fail("input must be 4-D, got " + shp(*x));
  const int64_t b = c.node().attr_int("blocksize", 0);
  if (b <= 0) c.fail("blocksize must be positive");
  const Dim bb = Dim::of(b * b), bd = Dim::of(b);
  if (c.node().op_type == "DepthToSpace")
    c.set_output_shape(0, {(*x)[0], dim_div_exact((*x)[1], bb), dim_mul((*x)[2], bd), dim_mul((*x)[3], bd)});
  else
    c.set_output_shape(0, {(*x)[0], dim_mul((*x)[1], bb), dim_div_exact((*x)[2], bd), dim_div_exact((*x)[3], bd)});
}

}  // namespace

FUSEOPT_SHAPE_FN("", "Resize", resize_fn);
FUSEOPT_SHAPE_FN("", "Upsample", resize_fn);
FUSEOPT_SHAPE_FN("", "DepthToSpace", depth_space_fn);
FUSEOPT_SHAPE_FN("", "SpaceToDepth", depth_space_fn);
FUSEOPT_SHAPE_FN("", "NonZero", nonzero_fn);
FUSEOPT_SHAPE_FN("", "TopK", topk_fn);
FUSEOPT_SHAPE_FN("", "OneHot", onehot_fn);

}  // namespace fuseopt::shape_ops
