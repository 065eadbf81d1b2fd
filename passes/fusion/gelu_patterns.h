// The exported spellings of GELU (erf form and tanh form) as patterns over a
// value pattern `y`, shared by FusedMatMul (activation after one GEMM) and
// GatedMatMul (activation on the gate half of a gated MLP), and ONNX's own Gelu op (opset 20)
// in either form. Header-only.
// Captures (gelu_cap): erf form gelu (root), gelu_m1, g_scale, g_erf, g_p;
// tanh form gelu_tanh (root), gelu_tanh_m1, t_cube, t_sq, t_c, t_in, t_k,
// t_ky, t_tanh, t_p.
#pragma once
#include <string>
#include <utility>

#include "rewrite/pattern.h"

namespace fuseopt::fusion {

// The nodes these patterns capture; the passes read the roots (which form matched).
namespace gelu_cap {
inline const NodeCapture gelu{"gelu"}, gelu_m1{"gelu_m1"}, g_scale{"g_scale"}, g_erf{"g_erf"}, g_p{"g_p"};
inline const NodeCapture gelu_tanh{"gelu_tanh"}, gelu_tanh_m1{"gelu_tanh_m1"}, t_cube{"t_cube"}, t_sq{"t_sq"},
    t_c{"t_c"}, t_in{"t_in"}, t_k{"t_k"}, t_ky{"t_ky"}, t_tanh{"t_tanh"}, t_p{"t_p"};
}  // namespace gelu_cap

// c * x in every commutative spelling.
inline Pattern times(Pattern x, Pattern c) { return Op("Mul", std::move(x), std::move(c)).commutative(); }

// x * 0.5 * p, with the 0.5 attached to either factor or to the product.
inline Pattern half_times(const Pattern& x, const Pattern& p, const NodeCapture& root, const NodeCapture& m1) {
  Pattern half = Const().equals(0.5, 1e-6);
  return AnyOf({
      Op("Mul", Op("Mul", x, p).commutative().as(m1), half).commutative().as(root),
      Op("Mul", Op("Mul", x, half).commutative().as(m1), p).commutative().as(root),
      Op("Mul", x, Op("Mul", p, half).commutative().as(m1)).commutative().as(root),
  });
}

// ONNX's own Gelu (opset 20, what the dynamo exporter writes for F.gelu from opset 20 on):
// approximate "none" is the erf form, "tanh" the tanh form, each exactly the formula below.
inline Pattern gelu_op(const Pattern& y, const std::string& approximate) {
  return Op("Gelu", y).where_node(
      [approximate](const Node& n) { return n.attr_string("approximate", "none") == approximate; },
      "Gelu with approximate = '" + approximate + "'");
}

// 0.5 * y * (1 + erf(y / sqrt(2)))  (Div by 1.4142135 or Mul by 0.70710678), or Gelu(y)
inline Pattern erf_gelu(const Pattern& y) {
  Pattern scaled = AnyOf({Op("Div", y, Const().equals(1.41421356, 1e-5)).as(gelu_cap::g_scale),
                          times(y, Const().equals(0.70710678, 1e-5)).as(gelu_cap::g_scale)});
  Pattern p = Op("Add", Op("Erf", scaled).as(gelu_cap::g_erf), Const().equals(1.0)).commutative().as(gelu_cap::g_p);
  return AnyOf({half_times(y, p, gelu_cap::gelu, gelu_cap::gelu_m1), gelu_op(y, "none").as(gelu_cap::gelu)});
}

// 0.5 * y * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3)))  (Pow or Mul spellings,
// and FastGELU's factored form)
inline Pattern tanh_gelu(const Pattern& y) {
  Pattern cube = AnyOf({Op("Pow", y, Const().equals(3.0)).as(gelu_cap::t_cube),
                        Op("Mul", Op("Mul", y, y).as(gelu_cap::t_sq), y).commutative().as(gelu_cap::t_cube)});
  Pattern inner = Op("Add", y, times(cube, Const().equals(0.044715, 1e-6)).as(gelu_cap::t_c)).commutative().as(gelu_cap::t_in);
  // HF FastGELU spells the argument y * 0.7978845608 * (1 + 0.044715 * y * y).
  Pattern fast_inner = Op("Add", times(times(y, Const().equals(0.044715, 1e-6)).as(gelu_cap::t_c), y).as(gelu_cap::t_cube),
                          Const().equals(1.0))
                           .commutative()
                           .as(gelu_cap::t_in);
  Pattern arg = AnyOf({times(inner, Const().equals(0.7978845608, 1e-5)).as(gelu_cap::t_k),
                       times(times(y, Const().equals(0.7978845608, 1e-5)).as(gelu_cap::t_ky), fast_inner).as(gelu_cap::t_k)});
  Pattern t = Op("Tanh", arg).as(gelu_cap::t_tanh);
  Pattern p = Op("Add", t, Const().equals(1.0)).commutative().as(gelu_cap::t_p);
  return AnyOf({half_times(y, p, gelu_cap::gelu_tanh, gelu_cap::gelu_tanh_m1),
                gelu_op(y, "tanh").as(gelu_cap::gelu_tanh)});
}

}  // namespace fuseopt::fusion
