// Shape functions: convolution, pooling and normalization ops.
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

// Output size of one spatial axis of a sliding window.
Dim window_out(const Dim& in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_total,
               const std::string& auto_pad, bool ceil_mode) {
  if (stride <= 0) return Dim::unknown();
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return dim_floor_div(dim_add(in, stride - 1), stride);
  if (auto_pad == "VALID") pad_total = 0;
  const int64_t span = dilation * (kernel - 1) + 1;
  const Dim numer = dim_add(in, pad_total - span);
  if (numer.known()) {
    const int64_t v = ceil_mode ? (numer.value + stride - 1) / stride : numer.value / stride;
    return Dim::of(v + 1);
  }
  if (stride == 1) return dim_add(numer, 1);
  const Dim q = dim_div_exact(numer, Dim::of(stride));
  return q.known() || !q.symbol.empty() ? dim_add(q, 1) : Dim::unknown();
}

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
};

// window_out for a node: a window larger than the padded input gives no output, which ONNX refuses.
Dim checked_window_out(const ShapeContext& c, size_t axis, const Dim& in, int64_t kernel, int64_t stride,
                       int64_t dilation, int64_t pad_total, const std::string& auto_pad, bool ceil_mode) {
  const bool explicit_pads = auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER";
  const int64_t pads = auto_pad == "VALID" ? 0 : pad_total;
  if (explicit_pads && in.known() && kernel > 0 && static_cast<__int128>(in.value) + pads < static_cast<__int128>(dilation) * (kernel - 1) + 1)
    c.fail("spatial axis " + std::to_string(axis) + ": the window (kernel " + std::to_string(kernel) + ", dilation " +
           std::to_string(dilation) + ") does not fit the input's " + in.str() + " plus pads " +
           std::to_string(pads));
  return window_out(in, kernel, stride, dilation, pad_total, auto_pad, ceil_mode);
}

Window window_attrs(const ShapeContext& c, size_t spatial, const std::vector<int64_t>& kernel) {
  Window w;
  w.kernel = kernel;
  w.strides = c.node().attr_ints("strides", std::vector<int64_t>(spatial, 1));
  w.dilations = c.node().attr_ints("dilations", std::vector<int64_t>(spatial, 1));
  w.pads = c.node().attr_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  w.auto_pad = c.node().attr_string("auto_pad", "NOTSET");
  if (w.kernel.size() != spatial || w.strides.size() != spatial || w.dilations.size() != spatial ||
      w.pads.size() != 2 * spatial)
    c.fail("kernel_shape/strides/dilations/pads do not match " + std::to_string(spatial) + " spatial dims");
  // ONNX's ranges (kernel -1: not known, read from a weight of unknown dims); the
  // 2^31 cap keeps the window arithmetic in 64 bits.
  constexpr int64_t kCap = int64_t(1) << 31;
  auto check = [&](const std::vector<int64_t>& v, const char* what, int64_t lo, bool minus_one_ok) {
    for (int64_t x : v)
      if ((x < lo && !(minus_one_ok && x == -1)) || x > kCap)
        c.fail(std::string(what) + " entry " + std::to_string(x) + " is out of range [" +
               (lo == -kCap ? std::string("-2^31") : std::to_string(lo)) + ", 2^31]");
  };
  check(w.kernel, "kernel_shape", 1, true);
  check(w.strides, "strides", 1, false);
  check(w.dilations, "dilations", 1, false);
  check(w.pads, "pads", -kCap, false);
  return w;
}

void conv_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  const Shape* w = shape_of(c, 1);
  if (x && x->size() < 3) c.fail("input " + shp(*x) + " must be [N, C, spatial...]");
  if (w && x && w->size() != x->size()) c.fail("weight " + shp(*w) + " and input " + shp(*x) + " differ in rank");
  if (!x) return;
  const size_t spatial = x->size() - 2;
  const int64_t group = c.node().attr_int("group", 1);
  std::vector<int64_t> kernel = c.node().attr_ints("kernel_shape");
  if (c.node().attr("kernel_shape") && kernel.size() != spatial)
    c.fail("kernel_shape has " + std::to_string(kernel.size()) + " entries; the input has " + std::to_string(spatial) +
           " spatial dims");
  if (kernel.empty() && w)
    for (size_t i = 0; i < spatial; ++i) kernel.push_back((*w)[i + 2].known() ? (*w)[i + 2].value : -1);
  Shape out{(*x)[0], w ? (*w)[0] : Dim::unknown()};
  if (w && (*x)[1].known() && (*w)[1].known() &&
      (*x)[1].value != checked_mul(c, (*w)[1].value, group, "weight channels x group"))
    c.fail("input channels " + (*x)[1].str() + " != weight channels " + (*w)[1].str() + " x group " + std::to_string(group));
  if (kernel.size() != spatial) {
    c.set_output_shape(0, Shape(x->size()));
    return;
  }
  const Window win = window_attrs(c, spatial, kernel);
  for (size_t i = 0; i < spatial; ++i)
    out.push_back(kernel[i] < 0 ? Dim::unknown()
                                : checked_window_out(c, i, (*x)[i + 2], kernel[i], win.strides[i], win.dilations[i],
                                             win.pads[i] + win.pads[i + spatial], win.auto_pad, false));
  c.set_output_shape(0, out);
}

void conv_transpose_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  const Shape* w = shape_of(c, 1);
  if (!x || x->size() < 3) return;
  if (w && w->size() != x->size()) c.fail("weight " + shp(*w) + " and input " + shp(*x) + " differ in rank");
  const size_t spatial = x->size() - 2;
  const int64_t group = c.node().attr_int("group", 1);
  Shape out{(*x)[0], w ? dim_mul((*w)[1], Dim::of(group)) : Dim::unknown()};
  std::vector<int64_t> output_shape = c.node().attr_ints("output_shape");
  if (output_shape.size() == spatial) {
    for (int64_t d : output_shape) out.push_back(Dim::of(d));
    c.set_output_shape(0, out);
    return;
  }
  std::vector<int64_t> kernel = c.node().attr_ints("kernel_shape");
  if (kernel.empty() && w)
    for (size_t i = 0; i < spatial; ++i) kernel.push_back((*w)[i + 2].known() ? (*w)[i + 2].value : -1);
  if (kernel.size() != spatial) return;
  const Window win = window_attrs(c, spatial, kernel);
  const auto out_pad = c.node().attr_ints("output_padding", std::vector<int64_t>(spatial, 0));
  for (size_t i = 0; i < spatial; ++i) {
    if (kernel[i] < 0 || win.auto_pad != "NOTSET" || out_pad.size() != spatial) {
      out.push_back(Dim::unknown());
      continue;
    }
    // stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pads
    const Dim scaled = dim_mul(dim_add((*x)[i + 2], -1), Dim::of(win.strides[i]));
    out.push_back(dim_add(scaled, out_pad[i] + (kernel[i] - 1) * win.dilations[i] + 1 - win.pads[i] - win.pads[i + spatial]));
  }
  c.set_output_shape(0, out);
}

void pool_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.has_output(1)) c.set_output_dtype(1, DType::Int64);
  const Shape* x = shape_of(c, 0);
  if (!x) return;
  if (x->size() < 3) c.fail("input " + shp(*x) + " must be [N, C, spatial...]");
  const size_t spatial = x->size() - 2;
  const std::vector<int64_t> kernel = c.node().attr_ints("kernel_shape");
  if (kernel.size() != spatial) c.fail("kernel_shape must have " + std::to_string(spatial) + " entries");
  const Window win = window_attrs(c, spatial, kernel);
  const bool ceil_mode = c.node().attr_int("ceil_mode", 0) != 0;
  Shape out{(*x)[0], (*x)[1]};
  for (size_t i = 0; i < spatial; ++i)
    out.push_back(checked_window_out(c, i, (*x)[i + 2], kernel[i], win.strides[i], win.dilations[i],
                             win.pads[i] + win.pads[i + spatial], win.auto_pad, ceil_mode));
  c.set_output_shape(0, out);
  if (c.has_output(1)) c.set_output_shape(1, out);
}

void global_pool_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  if (!x) return;
  if (x->size() < 2) c.fail("input " + shp(*x) + " must be [N, C, ...]");
  Shape out{(*x)[0], (*x)[1]};
  out.resize(x->size(), Dim::of(1));
  c.set_output_shape(0, out);
}

// Checks that a per-channel parameter has C entries.
void check_channels(const ShapeContext& c, size_t input, const Dim& channels, const char* what) {
  const Shape* p = shape_of(c, input);
  if (!p || !c.has_input(input)) return;
  if (p->size() == 1 && dims_conflict((*p)[0], channels))
    c.fail(std::string(what) + " " + shp(*p) + " does not match " + channels.str() + " channels");
}

void batch_norm_fn(ShapeContext& c) {
  same_as_input(c);
  const Shape* x = shape_of(c, 0);
  const Dim channels = x && x->size() >= 2 ? (*x)[1] : Dim::unknown();
  for (size_t i = 1; i <= 4; ++i) check_channels(c, i, channels, "parameter");
  for (size_t o = 1; o < c.num_outputs(); ++o) {
    c.set_output_dtype(o, c.input_dtype(o == 1 || o == 3 ? 3 : 4));
    c.set_output_shape(o, {channels});
  }
}

void layer_norm_fn(ShapeContext& c) {
  same_as_input(c);
  const Shape* x = shape_of(c, 0);
  const DType stash = dtype_attr(c, "stash_type", DType::Float);
  for (size_t o = 1; o < c.num_outputs(); ++o) c.set_output_dtype(o, stash);
  if (!x) return;
  const int64_t r = static_cast<int64_t>(x->size());
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", -1), r);
  // Scale/bias are multiplied/added by broadcasting (ONNX's function body), so
  // only one that cannot broadcast with x is a contradiction; one of higher
  // rank or over more than x[axis:] is ONNX-valid (the fusions refuse it).
  for (size_t i = 1; i <= 2; ++i) {
    const Shape* p = shape_of(c, i);
    if (!p || !c.has_input(i)) continue;
    if (!broadcast_shapes(*x, *p))
      c.fail((i == 1 ? "scale " : "bias ") + shp(*p) + " does not broadcast with the input " + shp(*x));
  }
  Shape stats(x->begin(), x->begin() + axis);
  stats.resize(x->size(), Dim::of(1));
  for (size_t o = 1; o < c.num_outputs(); ++o) c.set_output_shape(o, stats);
}

void same_shape(ShapeContext& c) { same_as_input(c); }

}  // namespace

FUSEOPT_SHAPE_FN("", "Conv", conv_fn);
FUSEOPT_SHAPE_FN("", "ConvTranspose", conv_transpose_fn);
FUSEOPT_SHAPE_FN("", "MaxPool", pool_fn);
FUSEOPT_SHAPE_FN("", "AveragePool", pool_fn);
FUSEOPT_SHAPE_FN("", "LpPool", pool_fn);
FUSEOPT_SHAPE_FN("", "GlobalAveragePool", global_pool_fn);
FUSEOPT_SHAPE_FN("", "GlobalMaxPool", global_pool_fn);
FUSEOPT_SHAPE_FN("", "GlobalLpPool", global_pool_fn);
FUSEOPT_SHAPE_FN("", "BatchNormalization", batch_norm_fn);
FUSEOPT_SHAPE_FN("", "LayerNormalization", layer_norm_fn);
FUSEOPT_SHAPE_FN("", "InstanceNormalization", same_shape);
FUSEOPT_SHAPE_FN("", "GroupNormalization", same_shape);
FUSEOPT_SHAPE_FN("", "LpNormalization", same_shape);
FUSEOPT_SHAPE_FN("", "MeanVarianceNormalization", same_shape);
FUSEOPT_SHAPE_FN("", "LRN", same_shape);
FUSEOPT_SHAPE_FN("", "RMSNormalization", layer_norm_fn);  // opset 23
FUSEOPT_SHAPE_FN("", "RotaryEmbedding", same_shape);      // opset 23

}  // namespace fuseopt::shape_ops
