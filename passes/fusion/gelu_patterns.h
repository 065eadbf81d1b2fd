// The exported spellings of GELU (erf form and tanh form) as patterns over a
// value pattern `y`, shared by FusedMatMul (activation after one GEMM) and
// GatedMatMul (activation on the gate half of a gated MLP). Header-only.
// Captures: erf form "gelu" (root), "gelu_m1", "g_scale", "g_erf", "g_p";
// tanh form "gelu_tanh" (root), "gelu_tanh_m1", "t_cube", "t_sq", "t_c",
// "t_in", "t_k", "t_ky", "t_tanh", "t_p".
#pragma once
#include <string>
#include <utility>

#include "rewrite/pattern.h"

namespace fuseopt::fusion {

// c * x in every commutative spelling.
inline Pattern times(Pattern x, Pattern c) { return Op("Mul", std::move(x), std::move(c)).commutative(); }

// x * 0.5 * p, with the 0.5 attached to either factor or to the product.
inline Pattern half_times(const Pattern& x, const Pattern& p, const std::string& tag) {
  Pattern half = Const().equals(0.5, 1e-6);
  return AnyOf({
      Op("Mul", Op("Mul", x, p).commutative().as(tag + "_m1"), half).commutative().as(tag),
      Op("Mul", Op("Mul", x, half).commutative().as(tag + "_m1"), p).commutative().as(tag),
      Op("Mul", x, Op("Mul", p, half).commutative().as(tag + "_m1")).commutative().as(tag),
  });
}

// 0.5 * y * (1 + erf(y / sqrt(2)))  (Div by 1.4142135 or Mul by 0.70710678)
inline Pattern erf_gelu(const Pattern& y) {
  Pattern scaled = AnyOf({Op("Div", y, Const().equals(1.41421356, 1e-5)).as("g_scale"),
                          times(y, Const().equals(0.70710678, 1e-5)).as("g_scale")});
  Pattern p = Op("Add", Op("Erf", scaled).as("g_erf"), Const().equals(1.0)).commutative().as("g_p");
  return half_times(y, p, "gelu");
}

// 0.5 * y * (1 + tanh(sqrt(2/pi) * (y + 0.044715 * y^3)))  (Pow or Mul spellings,
// and FastGELU's factored form)
inline Pattern tanh_gelu(const Pattern& y) {
  Pattern cube = AnyOf({Op("Pow", y, Const().equals(3.0)).as("t_cube"),
                        Op("Mul", Op("Mul", y, y).as("t_sq"), y).commutative().as("t_cube")});
  Pattern inner = Op("Add", y, times(cube, Const().equals(0.044715, 1e-6)).as("t_c")).commutative().as("t_in");
  // HF FastGELU spells the argument y * 0.7978845608 * (1 + 0.044715 * y * y).
  Pattern fast_inner = Op("Add", times(times(y, Const().equals(0.044715, 1e-6)).as("t_c"), y).as("t_cube"),
                          Const().equals(1.0))
                           .commutative()
                           .as("t_in");
  Pattern arg = AnyOf({times(inner, Const().equals(0.7978845608, 1e-5)).as("t_k"),
                       times(times(y, Const().equals(0.7978845608, 1e-5)).as("t_ky"), fast_inner).as("t_k")});
  Pattern t = Op("Tanh", arg).as("t_tanh");
  Pattern p = Op("Add", t, Const().equals(1.0)).commutative().as("t_p");
  return half_times(y, p, "gelu_tanh");
}

}  // namespace fuseopt::fusion
