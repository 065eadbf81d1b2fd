// Shape functions of the fused ops (domain "fuseopt", see DESIGN.md's
// catalogue and the CPU kernels in kernels/cpu/fused_*.cc for the layouts).
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

// B as the kernel reads it: [..., K, N] (transB swaps the last two dims).
std::optional<Shape> oriented_b(const ShapeContext& c, size_t input, bool trans_b) {
  const Shape* b = shape_of(c, input);
  if (!b) return std::nullopt;
  Shape s = *b;
  if (trans_b) {
    if (s.size() < 2) c.fail("transB needs B of rank >= 2, got " + shp(s));
    std::swap(s[s.size() - 1], s[s.size() - 2]);
  }
  return s;
}

// A bias [N] or [1, ..., 1, N] must match the output's last dim N.
void check_bias(const ShapeContext& c, size_t input, const Dim& n) {
  const Shape* bias = shape_of(c, input);
  if (!bias || !c.has_input(input) || bias->empty()) return;
  if (dims_conflict(bias->back(), n)) c.fail("bias " + shp(*bias) + " does not match N = " + n.str());
}

void check_param(const ShapeContext& c, size_t input, const Dim& d, const char* what) {
  const Shape* p = shape_of(c, input);
  if (!p || !c.has_input(input) || p->empty()) return;
  if (dims_conflict(p->back(), d)) c.fail(std::string(what) + " " + shp(*p) + " does not match the normalized dim " + d.str());
}

void add_relu_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (auto s = broadcast_inputs(c, {0, 1})) c.set_output_shape(0, *s);
}

void fused_matmul_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.has_input(3)) {
    const DType ra = c.input_dtype(0), rr = c.input_dtype(3);
    if (ra != DType::Undefined && rr != DType::Undefined && ra != rr)
      c.fail(std::string("residual is ") + dtype_name(rr) + ", A is " + dtype_name(ra));
  }
  const Shape* a = shape_of(c, 0);
  auto b = oriented_b(c, 1, c.node().attr_int("transB", 0) != 0);
  if (!a || !b) return;
  const Shape out = matmul_shape(c, *a, *b);
  if (!out.empty()) check_bias(c, 2, out.back());
  // residual (input 3) is read row-major as Y's shape: only its element count must match.
  if (c.has_input(3))
    if (const Shape* r = shape_of(c, 3)) {
      const auto nr = known_numel(c, *r), ny = known_numel(c, out);
      if (nr && ny && *nr != *ny)
        c.fail("residual " + shp(*r) + " has " + std::to_string(*nr) + " elements, Y " + shp(out) + " has " +
               std::to_string(*ny));
    }
  c.set_output_shape(0, out);
}

// GatedMatMul: A [..., K], W [K, 2N], bias [2N]? -> Y [..., N] (gate half times up half).
void gated_matmul_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* a = shape_of(c, 0);
  const Shape* w = shape_of(c, 1);
  if (!a || !w) return;
  if (w->size() != 2) c.fail("GatedMatMul needs W [K, 2N], got " + shp(*w));
  if (a->empty()) c.fail("GatedMatMul needs A of rank >= 1");
  if (dims_conflict(a->back(), (*w)[0])) c.fail("A " + shp(*a) + " and W " + shp(*w) + " differ in K");
  const Dim two_n = (*w)[1];
  if (two_n.known() && two_n.value % 2 != 0) c.fail("W " + shp(*w) + " has an odd column count, not [K, 2N]");
  check_bias(c, 2, two_n);
  Shape out = *a;
  out.back() = two_n.known() ? Dim::of(two_n.value / 2) : Dim::unknown();
  c.set_output_shape(0, out);
}

// LayerNorm / RMSNorm: normalization over the last axis; Y has X's shape.
void norm_fn(ShapeContext& c) {
  same_as_input(c);
  if (const Shape* x = shape_of(c, 0); x && !x->empty()) {
    check_param(c, 1, x->back(), "gamma");
    check_param(c, 2, x->back(), "beta");
  }
}

// EmbedLayerNorm: gamma, beta?, then (table [V, D], ids) pairs -> Y = the ids'
// broadcast + [D], gamma's dtype.
void embed_layer_norm_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.num_inputs() < 6 || c.num_inputs() % 2 != 0)
    c.fail("EmbedLayerNorm needs gamma, beta? and 2 or 3 (table, ids) pairs, got " + std::to_string(c.num_inputs()) +
           " inputs");
  Dim d = Dim::unknown();
  if (const Shape* g = shape_of(c, 0); g && !g->empty()) d = g->back();
  std::vector<size_t> ids;
  for (size_t i = 2; i + 1 < c.num_inputs(); i += 2) {
    if (!c.has_input(i) || !c.has_input(i + 1)) c.fail("EmbedLayerNorm: lookup " + std::to_string(i / 2) + " is incomplete");
    if (const Shape* t = shape_of(c, i)) {
      if (t->size() != 2) c.fail("EmbedLayerNorm: table " + shp(*t) + " is not [V, D]");
      if (dims_conflict((*t)[1], d)) c.fail("EmbedLayerNorm: table " + shp(*t) + " does not match D = " + d.str());
      if (!d.known()) d = (*t)[1];
    }
    ids.push_back(i + 1);
  }
  check_param(c, 1, d, "beta");
  auto s = broadcast_inputs(c, ids);
  if (!s) return;
  s->push_back(d);
  c.set_output_shape(0, *s);
}

// SkipLayerNorm: X, skip, gamma, beta?, bias? -> Y, Sum? (both the broadcast shape).
void skip_layer_norm_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.has_output(1)) c.set_output_dtype(1, c.input_dtype(0));
  auto s = broadcast_inputs(c, {0, 1});
  if (!s) return;
  if (!s->empty()) {
    check_param(c, 2, s->back(), "gamma");
    check_param(c, 3, s->back(), "beta");
    check_param(c, 4, s->back(), "bias");
  }
  c.set_output_shape(0, *s);
  if (c.has_output(1)) c.set_output_shape(1, *s);
}

// LayerNormLinear: X, gamma, beta?, W, bias?, skip? -> Y [..., N], Sum? (X's shape).
void layer_norm_linear_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (c.has_output(1)) c.set_output_dtype(1, c.input_dtype(0));
  auto z = broadcast_inputs(c, {0, 5});
  if (!z) return;
  if (z->empty()) c.fail("X must have rank >= 1");
  check_param(c, 1, z->back(), "gamma");
  check_param(c, 2, z->back(), "beta");
  if (c.has_output(1)) c.set_output_shape(1, *z);
  auto w = oriented_b(c, 3, c.node().attr_int("transB", 0) != 0);
  if (!w) return;
  if (w->size() != 2) c.fail("W must be 2-D, got " + shp(*shape_of(c, 3)));
  const Shape out = matmul_shape(c, *z, *w);
  check_bias(c, 4, out.back());
  c.set_output_shape(0, out);
}

// Attention: query (packed QKV [B, S, (H + 2·Hkv)·Dh] when key/value are
// omitted, else Q [B, S, H·Dh]), key [B, S_kv, Hkv·Dh]?, value [B, S_kv, Hkv·Dv]?,
// mask?, attn_bias?, past_key [B, Hkv, S_past, Dh]?, past_value [B, Hkv, S_past, Dv]?, sinks [H]?
// -> Y [B, S, H·Dv], present_key [B, Hkv, S_past + S_kv, Dh]?, present_value [.., Dv]?.
void attention_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const int64_t h = c.node().attr_int("num_heads", 0);
  const int64_t hkv = c.node().attr_int("kv_num_heads", h);
  if (h <= 0 || hkv <= 0 || h % hkv != 0)
    c.fail("num_heads " + std::to_string(h) + " must be positive and a multiple of kv_num_heads " + std::to_string(hkv));
  const Shape* q = shape_of(c, 0);
  if (q && q->size() != 3) c.fail("query must be [B, S, hidden], got " + shp(*q));
  if (!q) return;
  const Dim width = (*q)[2];
  Dim y_width = Dim::unknown();
  if (!c.has_input(1)) {
    int64_t packed_heads = 0;  // H + 2·Hkv, both attributes a file may set to anything
    if (__builtin_add_overflow(checked_mul(c, hkv, 2, "2 x kv_num_heads"), h, &packed_heads))
      c.fail("num_heads + 2 x kv_num_heads overflows int64");
    if (width.known() && width.value % packed_heads != 0)
      c.fail("packed QKV width " + width.str() + " is not (num_heads + 2*kv_num_heads) * head_dim");
    y_width = dim_mul(dim_div_exact(width, Dim::of(packed_heads)), Dim::of(h));
  } else {
    const Shape* k = shape_of(c, 1);
    const Shape* v = shape_of(c, 2);
    if (width.known() && width.value % h != 0)
      c.fail("query width " + width.str() + " is not a multiple of num_heads " + std::to_string(h));
    if (k && k->size() != 3) c.fail("key must be [B, S_kv, hidden], got " + shp(*k));
    if (v && v->size() != 3) c.fail("value must be [B, S_kv, hidden], got " + shp(*v));
    if (k && dims_conflict((*k)[0], (*q)[0])) c.fail("key batch " + (*k)[0].str() + " differs from the query's");
    if (k && v && dims_conflict((*k)[1], (*v)[1])) c.fail("key and value sequence lengths differ");
    if (k && width.known() && (*k)[2].known() &&
        checked_mul(c, (*k)[2].value, h, "key width x num_heads") != checked_mul(c, width.value, hkv, "query width x kv_num_heads"))
      c.fail("key width " + (*k)[2].str() + " != kv_num_heads * head_dim");
    if (v) y_width = dim_mul(dim_div_exact((*v)[2], Dim::of(hkv)), Dim::of(h));
  }
  c.set_output_shape(0, {(*q)[0], (*q)[1], y_width});
  // sinks: one float logit per query head (GPT-OSS), [num_heads].
  if (c.has_input(7)) {
    const DType st = c.input_dtype(7);
    if (st != DType::Undefined && !dtype_is_float(st)) c.fail("sinks must be a float tensor, got " + std::string(dtype_name(st)));
    const Shape* sk = shape_of(c, 7);
    if (sk && (sk->size() != 1 || ((*sk)[0].known() && (*sk)[0].value != h)))
      c.fail("sinks must be [num_heads] = [" + std::to_string(h) + "], got " + shp(*sk));
  }
  // KV cache: present = past ++ the new keys along the sequence axis.
  if (c.has_input(5) != c.has_input(6)) c.fail("past_key and past_value must both be given or both be omitted");
  if (!c.has_input(5)) return;
  const Shape* new_k = c.has_input(1) ? shape_of(c, 1) : q;
  for (int i = 0; i < 2; ++i) {
    const size_t out = 1 + i;
    if (c.num_outputs() <= out || !c.has_output(out)) continue;
    c.set_output_dtype(out, c.input_dtype(5 + i));
    const Shape* past = shape_of(c, 5 + i);
    if (past && past->size() != 4) c.fail("past_key/past_value must be [B, kv_num_heads, S_past, D], got " + shp(*past));
    if (!past || !new_k) continue;
    if ((*past)[1].known() && (*past)[1].value != hkv)
      c.fail("past heads " + (*past)[1].str() + " != kv_num_heads " + std::to_string(hkv));
    c.set_output_shape(out, {(*q)[0], Dim::of(hkv), dim_add((*past)[2], (*new_k)[1]), (*past)[3]});
  }
}

}  // namespace

FUSEOPT_SHAPE_FN("fuseopt", "AddRelu", add_relu_fn);
FUSEOPT_SHAPE_FN("fuseopt", "FusedMatMul", fused_matmul_fn);
FUSEOPT_SHAPE_FN("fuseopt", "GatedMatMul", gated_matmul_fn);
FUSEOPT_SHAPE_FN("fuseopt", "LayerNorm", norm_fn);
FUSEOPT_SHAPE_FN("fuseopt", "RMSNorm", norm_fn);
FUSEOPT_SHAPE_FN("fuseopt", "SkipLayerNorm", skip_layer_norm_fn);
FUSEOPT_SHAPE_FN("fuseopt", "EmbedLayerNorm", embed_layer_norm_fn);
FUSEOPT_SHAPE_FN("fuseopt", "LayerNormLinear", layer_norm_linear_fn);
FUSEOPT_SHAPE_FN("fuseopt", "Attention", attention_fn);

}  // namespace fuseopt::shape_ops
