// Shape functions for ops that had none: GridSample (2-D: [N, C, H, W] and
// grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]) and ONNX Attention (opset 23: Y like
// Q with V's head size, present_key/value [B, Hkv, P + Skv, head size]),
// Sinh/Cosh/Asin/Acos/Asinh/Acosh/Atanh (same shape), STFT, DFT, the window
// generators, QuantizeLinear, DequantizeLinear and AffineGrid (2-D).
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

void grid_sample_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  const Shape* g = shape_of(c, 1);
  if (!x || !g) return;
  if (x->size() != 4 || g->size() != 4) return;  // N-D (opset 20) left unknown
  c.set_output_shape(0, Shape{(*x)[0], (*x)[1], (*g)[1], (*g)[2]});
}

void onnx_attention_fn(ShapeContext& c) {
  const DType t = c.input_dtype(0);
  for (size_t o = 0; o < 3 && o < c.num_outputs(); ++o) c.set_output_dtype(o, t);
  if (c.num_outputs() > 3) c.set_output_dtype(3, t);
  const Shape* q = shape_of(c, 0);
  const Shape* k = shape_of(c, 1);
  const Shape* v = shape_of(c, 2);
  if (!q || !k || !v || q->size() != k->size() || q->size() != v->size()) return;
  const Shape* past = c.has_input(4) ? shape_of(c, 4) : nullptr;
  if (q->size() == 4) {
    c.set_output_shape(0, Shape{(*q)[0], (*q)[1], (*q)[2], (*v)[3]});
    const Dim total = past && past->size() == 4 ? dim_add((*past)[2], (*k)[2]) : (c.has_input(4) ? Dim::unknown() : (*k)[2]);
    if (c.has_output(1)) c.set_output_shape(1, Shape{(*k)[0], (*k)[1], total, (*k)[3]});
    if (c.has_output(2)) c.set_output_shape(2, Shape{(*v)[0], (*v)[1], total, (*v)[3]});
    return;
  }
  if (q->size() != 3) return;
  const int64_t hq = c.node().attr_int("q_num_heads", 0), hkv = c.node().attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0) return;
  const Dim dv = dim_div_exact((*v)[2], Dim::of(hkv));
  c.set_output_shape(0, Shape{(*q)[0], (*q)[1], dim_mul(dv, Dim::of(hq))});
  const Dim total = past && past->size() == 4 ? dim_add((*past)[2], (*k)[1]) : (c.has_input(4) ? Dim::unknown() : (*k)[1]);
  if (c.has_output(1)) c.set_output_shape(1, Shape{(*k)[0], Dim::of(hkv), total, dim_div_exact((*k)[2], Dim::of(hkv))});
  if (c.has_output(2)) c.set_output_shape(2, Shape{(*v)[0], Dim::of(hkv), total, dv});
}

// STFT: [B, L, 1|2] -> [B, frames, bins, 2] when frame_step / frame_length
// (or the window's length) are known.
void stft_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  if (!x || x->size() != 3) return;
  auto step = c.input_ints(1);
  std::optional<int64_t> n;
  if (c.has_input(3)) {
    if (auto v = c.input_ints(3); v && v->size() == 1) n = (*v)[0];
  } else if (const Shape* w = c.has_input(2) ? shape_of(c, 2) : nullptr; w && w->size() == 1 && (*w)[0].known()) {
    n = (*w)[0].value;
  }
  const bool onesided = c.node().attr_int("onesided", 1) != 0;
  Dim frames = Dim::unknown();
  if (n && *n <= 0) n.reset();  // the kernel reports the error
  if (step && step->size() == 1 && (*step)[0] > 0 && n && (*x)[1].known() && (*x)[1].value >= *n)
    frames = Dim::of(1 + ((*x)[1].value - *n) / (*step)[0]);
  const Dim bins = n ? Dim::of(onesided ? *n / 2 + 1 : *n) : Dim::unknown();
  c.set_output_shape(0, Shape{(*x)[0], frames, bins, Dim::of(2)});
}

// DFT: the signal axis becomes the bin count, the last dim 2.
void dft_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  if (!x || x->size() < 2) return;
  const int64_t rank = static_cast<int64_t>(x->size());
  std::optional<int64_t> axis;
  if (c.node().has_attr("axis")) axis = c.node().attr_int("axis", 1);
  else if (c.has_input(2)) {
    if (auto v = c.input_ints(2); v && v->size() == 1) axis = (*v)[0];
  } else if (rank <= 3) axis = rank - 2;
  Shape out = *x;
  out.back() = Dim::of(2);
  if (!axis || *axis < -rank || *axis >= rank) {
    for (int64_t d = 0; d + 1 < rank; ++d) out[d] = Dim::unknown();  // which dim changes is unknown
    c.set_output_shape(0, out);
    return;
  }
  const int64_t a = *axis < 0 ? *axis + rank : *axis;
  Dim n = (*x)[a];
  if (c.has_input(1)) {
    auto v = c.input_ints(1);
    n = v && v->size() == 1 && (*v)[0] > 0 ? Dim::of((*v)[0]) : Dim::unknown();
  }
  if (a == rank - 1) return;  // the kernel reports the error
  const bool onesided = c.node().attr_int("onesided", 0) != 0;
  out[a] = !onesided ? n : (n.known() ? Dim::of(n.value / 2 + 1) : Dim::unknown());
  c.set_output_shape(0, out);
}

void window_fn(ShapeContext& c) {
  c.set_output_dtype(0, static_cast<DType>(c.node().attr_int("output_datatype", static_cast<int64_t>(DType::Float))));
  auto size = c.input_ints(0);
  c.set_output_shape(0, Shape{size && size->size() == 1 && (*size)[0] >= 0 ? Dim::of((*size)[0]) : Dim::unknown()});
}

// QuantizeLinear: x's shape, zero_point's dtype (default uint8 or
// output_dtype); DequantizeLinear: x's shape, scale's dtype.
void quantize_fn(ShapeContext& c) {
  DType t = c.has_input(2) ? c.input_dtype(2) : DType::Undefined;
  if (t == DType::Undefined)
    t = static_cast<DType>(c.node().attr_int("output_dtype", static_cast<int64_t>(DType::UInt8)));
  if (t == DType::Undefined) t = DType::UInt8;
  same_as_input(c, 0, 0, t);
}
void dequantize_fn(ShapeContext& c) { same_as_input(c, 0, 0, c.input_dtype(1)); }

// AffineGrid (2-D): [N, H, W, 2] from the size input [N, C, H, W].
void affine_grid_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  auto size = c.input_ints(1);
  if (!size || size->size() != 4) return;
  for (int64_t d : *size)
    if (d < 0) return;
  c.set_output_shape(0, Shape{Dim::of((*size)[0]), Dim::of((*size)[2]), Dim::of((*size)[3]), Dim::of(2)});
}

}  // namespace

FUSEOPT_SHAPE_FN("", "AffineGrid", affine_grid_fn);
FUSEOPT_SHAPE_FN("", "QuantizeLinear", quantize_fn);
FUSEOPT_SHAPE_FN("", "DequantizeLinear", dequantize_fn);
FUSEOPT_SHAPE_FN("", "STFT", stft_fn);
FUSEOPT_SHAPE_FN("", "DFT", dft_fn);
FUSEOPT_SHAPE_FN("", "HannWindow", window_fn);
FUSEOPT_SHAPE_FN("", "HammingWindow", window_fn);
FUSEOPT_SHAPE_FN("", "BlackmanWindow", window_fn);
FUSEOPT_SHAPE_FN("", "GridSample", grid_sample_fn);
FUSEOPT_SHAPE_FN("", "Attention", onnx_attention_fn);
FUSEOPT_SHAPE_FN("", "Sinh", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Cosh", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Asin", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Acos", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Asinh", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Acosh", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "Atanh", [](ShapeContext& c) { same_as_input(c); });

}  // namespace fuseopt::shape_ops
