// Shape function of fuseopt.FusedMatMulLayerNorm (docs/fused_ops.md):
// A [..., K], W [K, N] ([N, K] with transB), bias [N]?, gamma [N], beta [N]?, skip [..., N]?
// -> Y [..., N] in A's dtype (the GEMM's output shape; the norm keeps it). skip is
// added without broadcasting, so it must have Y's shape and A's dtype; with skip
// the activation is none, without it a GELU.
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

// gamma / beta / bias: a vector whose last dim is N.
void check_last(const ShapeContext& c, size_t input, const Dim& n, const char* what) {
  const Shape* p = shape_of(c, input);
  if (!p || !c.has_input(input)) return;
  if (p->empty()) c.fail(std::string(what) + " must be a [N] vector, got a scalar");
  if (dims_conflict(p->back(), n)) c.fail(std::string(what) + " " + shp(*p) + " does not match N = " + n.str());
}

void fused_matmul_layer_norm_fn(ShapeContext& c) {
  const bool skip = c.has_input(5);
  // The function body's defaults: a GELU without skip, none with it.
  const std::string act = c.node().attr_string("activation", skip ? "none" : "gelu");
  if (skip && act != "none")
    c.fail("FusedMatMulLayerNorm: with skip the activation must be none, got '" + act + "'");
  if (!skip && act != "gelu" && act != "gelu_tanh")
    c.fail("FusedMatMulLayerNorm: activation must be gelu or gelu_tanh (none only with skip), got '" + act + "'");
  c.set_output_dtype(0, c.input_dtype(0));
  if (skip && c.input_dtype(5) != DType::Undefined && c.input_dtype(0) != DType::Undefined &&
      c.input_dtype(5) != c.input_dtype(0))
    c.fail(std::string("FusedMatMulLayerNorm skip is ") + dtype_name(c.input_dtype(5)) + ", A is " +
           dtype_name(c.input_dtype(0)));
  const Shape* a = shape_of(c, 0);
  const Shape* w = shape_of(c, 1);
  if (!a || !w) return;
  if (a->empty()) c.fail("FusedMatMulLayerNorm needs A of rank >= 1");
  if (w->size() != 2) c.fail("FusedMatMulLayerNorm needs a 2-D W, got " + shp(*w));
  const bool trans_b = c.node().attr_int("transB", 0) != 0;
  const Dim k = (*w)[trans_b ? 1 : 0], n = (*w)[trans_b ? 0 : 1];
  if (dims_conflict(a->back(), k))
    c.fail("A " + shp(*a) + " and W " + shp(*w) + (trans_b ? " (transB)" : "") + " differ in K");
  check_last(c, 2, n, "bias");
  check_last(c, 3, n, "gamma");
  check_last(c, 4, n, "beta");
  Shape out = *a;
  out.back() = n;
  if (const Shape* sk = skip ? shape_of(c, 5) : nullptr) {
    bool conflict = sk->size() != out.size();
    for (size_t i = 0; !conflict && i < out.size(); ++i) conflict = dims_conflict((*sk)[i], out[i]);
    if (conflict) c.fail("FusedMatMulLayerNorm skip " + shp(*sk) + " is not Y's shape " + shp(out) + " (no broadcast)");
  }
  c.set_output_shape(0, out);
}

}  // namespace

FUSEOPT_SHAPE_FN("fuseopt", "FusedMatMulLayerNorm", fused_matmul_layer_norm_fn);

}  // namespace fuseopt::shape_ops
