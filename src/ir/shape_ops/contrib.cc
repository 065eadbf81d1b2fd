// Shape functions for the ONNX Runtime contrib ops (domain com.microsoft, and
// SimplifiedLayerNormalization which ORT puts in the default domain) that
// appear in models already optimized by ORT's transformer tools, so such a
// model is shaped too instead of stopping at the first contrib node.
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

constexpr const char* kMs = "com.microsoft";

// Y like input 0, or the broadcast of inputs 0 and 1 when a bias is given.
void gelu_like(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (auto s = broadcast_inputs(c, {0, 1})) c.set_output_shape(0, *s);
}

void ms_fused_matmul(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.node().attr_int("transBatchA", 0) || c.node().attr_int("transBatchB", 0)) return;
  const Shape* a = shape_of(c, 0);
  const Shape* b = shape_of(c, 1);
  if (!a || !b) return;
  Shape a2 = *a, b2 = *b;
  if (c.node().attr_int("transA", 0) && a2.size() >= 2) std::swap(a2[a2.size() - 1], a2[a2.size() - 2]);
  if (c.node().attr_int("transB", 0) && b2.size() >= 2) std::swap(b2[b2.size() - 1], b2[b2.size() - 2]);
  c.set_output_shape(0, matmul_shape(c, a2, b2));
}

// Outputs: Y, mean?, inv_std_var?, (Skip*: input_skip_bias_sum?).
void norm_with_stats(ShapeContext& c, bool has_skip) {
  c.set_output_dtype(0, c.input_dtype(0));
  auto s = has_skip ? broadcast_inputs(c, {0, 1}) : (shape_of(c, 0) ? std::optional<Shape>(*shape_of(c, 0)) : std::nullopt);
  for (size_t o = 1; o < c.num_outputs(); ++o)
    c.set_output_dtype(o, o == 3 ? c.input_dtype(0) : DType::Float);
  if (!s) return;
  c.set_output_shape(0, *s);
  if (s->empty()) return;
  Shape stats = *s;
  stats.back() = Dim::of(1);
  for (size_t o = 1; o < c.num_outputs(); ++o) c.set_output_shape(o, o == 3 ? *s : stats);
}

// SimplifiedLayerNormalization: X, scale -> Y, inv_std_var? (over axis..end).
void simplified_layer_norm(ShapeContext& c) {
  same_as_input(c);
  if (c.has_output(1)) c.set_output_dtype(1, DType::Float);
  const Shape* x = shape_of(c, 0);
  if (!x || !c.has_output(1)) return;
  const int64_t r = static_cast<int64_t>(x->size());
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", -1), r);
  Shape stats(x->begin(), x->begin() + axis);
  stats.resize(x->size(), Dim::of(1));
  c.set_output_shape(1, stats);
}

// Attention (ORT): input [B, S, hidden], weights [hidden, q + k + v] -> [B, S, v].
void ms_attention(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  const Shape* w = shape_of(c, 1);
  if (!x || x->size() != 3) return;
  Dim v = Dim::unknown();
  const auto sizes = c.node().attr_ints("qkv_hidden_sizes");
  if (sizes.size() == 3) v = Dim::of(sizes[2]);
  else if (w && w->size() == 2) v = dim_div_exact((*w)[1], Dim::of(3));
  c.set_output_shape(0, {(*x)[0], (*x)[1], v});
}

// MultiHeadAttention (ORT), separate 3-D query/key/value only.
void ms_multi_head_attention(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* q = shape_of(c, 0);
  const Shape* v = shape_of(c, 2);
  if (!q || q->size() != 3) return;
  c.set_output_shape(0, {(*q)[0], (*q)[1], v && v->size() == 3 ? (*v)[2] : Dim::unknown()});
}

}  // namespace

FUSEOPT_SHAPE_FN(kMs, "Gelu", gelu_like);
FUSEOPT_SHAPE_FN(kMs, "FastGelu", gelu_like);
FUSEOPT_SHAPE_FN(kMs, "BiasGelu", gelu_like);
FUSEOPT_SHAPE_FN(kMs, "QuickGelu", gelu_like);
FUSEOPT_SHAPE_FN(kMs, "BiasAdd", [](ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (auto s = broadcast_inputs(c, {0, 1, 2})) c.set_output_shape(0, *s);
});
FUSEOPT_SHAPE_FN(kMs, "FusedMatMul", ms_fused_matmul);
FUSEOPT_SHAPE_FN(kMs, "SkipLayerNormalization", [](ShapeContext& c) { norm_with_stats(c, true); });
FUSEOPT_SHAPE_FN(kMs, "SkipSimplifiedLayerNormalization", [](ShapeContext& c) { norm_with_stats(c, true); });
FUSEOPT_SHAPE_FN("", "SimplifiedLayerNormalization", simplified_layer_norm);
FUSEOPT_SHAPE_FN(kMs, "SimplifiedLayerNormalization", simplified_layer_norm);
FUSEOPT_SHAPE_FN(kMs, "RotaryEmbedding", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN(kMs, "Attention", ms_attention);
FUSEOPT_SHAPE_FN(kMs, "MultiHeadAttention", ms_multi_head_attention);

}  // namespace fuseopt::shape_ops
