// Shape functions: unary and broadcasting elementwise ops, Cast, Where, and
// the symbolic arithmetic exporters use on shape tensors.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

using Args = std::vector<std::optional<SymExpr>>;
using Elem = std::optional<SymExpr>;

std::optional<int64_t> cint(const Elem& e) { return e ? e->constant_value() : std::nullopt; }
Elem from_bool(bool b) { return SymExpr::constant(b ? 1 : 0); }

// Same shape and dtype as input 0; contents pass through when `pass`.
void unary(ShapeContext& c, DType dtype = DType::Undefined) { same_as_input(c, 0, 0, dtype); }

// Softmax-like: also validates the axis attribute against the rank.
void unary_with_axis(ShapeContext& c, int64_t default_axis) {
  if (auto r = c.input_rank(0); r && *r > 0) c.normalize_axis(c.node().attr_int("axis", default_axis), *r);
  unary(c);
}

// `arity`: inputs that must be present (the lambdas read that many).
template <class F>
void elementwise(ShapeContext& c, DType out_dtype, size_t arity, F f) {
  for (size_t i = 0; i < arity; ++i)
    if (!c.has_input(i)) c.fail("expects " + std::to_string(arity) + " inputs, input " + std::to_string(i) + " is missing");
  std::vector<size_t> ins;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    if (c.has_input(i)) ins.push_back(i);
  c.set_output_dtype(0, out_dtype);
  auto s = broadcast_inputs(c, ins);
  if (!s) return;
  c.set_output_shape(0, *s);
  if (auto v = map_contents(c, ins, *s, f)) c.set_output_contents(0, std::move(*v));
}

Elem no_contents(const Args&) { return std::nullopt; }

bool is_int_dtype(DType t) { return dtype_is_integer(t) || t == DType::Bool; }

Elem divide(const Elem& a, const Elem& b, bool integer) {
  if (!a || !b) return std::nullopt;
  auto x = a->constant_value(), y = b->constant_value();
  if (x && y) {
    // INT64_MIN / -1 does not fit (and traps on x86): leave it unknown, as for / 0.
    if (*y == 0 || (*y == -1 && *x == std::numeric_limits<int64_t>::min())) return std::nullopt;
    if (integer || *x % *y == 0) return SymExpr::constant(*x / *y);
    return std::nullopt;
  }
  auto q = a->exact_div(*b);
  if (q) return *q;
  return std::nullopt;
}

Elem compare(const Elem& a, const Elem& b, const char* op) {
  if (!a || !b) return std::nullopt;
  const std::string o = op;
  if (o == "==" && *a == *b) return from_bool(true);
  // Decide on the sign of a - b (dims are >= 0, so "seq" != -1 and "seq+1" > 0).
  auto sg = (*a - *b).sign();
  if (!sg) return std::nullopt;
  if (o == "==") return from_bool(*sg == 0);
  if (o == "<") return from_bool(*sg < 0);
  if (o == "<=") return from_bool(*sg <= 0);
  if (o == ">") return from_bool(*sg > 0);
  return from_bool(*sg >= 0);
}

}  // namespace

// --- unary, same shape and dtype --------------------------------------------------------
#define SAME_SHAPE_OP(op) FUSEOPT_SHAPE_FN("", op, [](ShapeContext& c) { unary(c); })
SAME_SHAPE_OP("Sqrt");
SAME_SHAPE_OP("Reciprocal");
SAME_SHAPE_OP("Erf");
SAME_SHAPE_OP("Tanh");
SAME_SHAPE_OP("Exp");
SAME_SHAPE_OP("Log");
SAME_SHAPE_OP("Floor");
SAME_SHAPE_OP("Ceil");
SAME_SHAPE_OP("Round");
SAME_SHAPE_OP("Sign");
SAME_SHAPE_OP("Sin");
SAME_SHAPE_OP("Cos");
SAME_SHAPE_OP("Tan");
SAME_SHAPE_OP("Atan");
SAME_SHAPE_OP("Relu");
SAME_SHAPE_OP("LeakyRelu");
SAME_SHAPE_OP("PRelu");
SAME_SHAPE_OP("Elu");
SAME_SHAPE_OP("Selu");
SAME_SHAPE_OP("Celu");
SAME_SHAPE_OP("Sigmoid");
SAME_SHAPE_OP("HardSigmoid");
SAME_SHAPE_OP("HardSwish");
SAME_SHAPE_OP("Softplus");
SAME_SHAPE_OP("Softsign");
SAME_SHAPE_OP("Mish");
SAME_SHAPE_OP("Gelu");
SAME_SHAPE_OP("ThresholdedRelu");
SAME_SHAPE_OP("Clip");
SAME_SHAPE_OP("Trilu");
SAME_SHAPE_OP("CumSum");
SAME_SHAPE_OP("CumProd");
SAME_SHAPE_OP("Swish");
SAME_SHAPE_OP("Shrink");
#undef SAME_SHAPE_OP

FUSEOPT_SHAPE_FN("", "Softmax", [](ShapeContext& c) { unary_with_axis(c, c.opset() != 0 && c.opset() < 13 ? 1 : -1); });
FUSEOPT_SHAPE_FN("", "LogSoftmax", [](ShapeContext& c) { unary_with_axis(c, c.opset() != 0 && c.opset() < 13 ? 1 : -1); });
FUSEOPT_SHAPE_FN("", "Hardmax", [](ShapeContext& c) { unary_with_axis(c, c.opset() != 0 && c.opset() < 13 ? 1 : -1); });

FUSEOPT_SHAPE_FN("", "Identity", [](ShapeContext& c) {
  unary(c);
  if (const SymbolicContents* v = c.input_contents(0)) c.set_output_contents(0, *v);
});

FUSEOPT_SHAPE_FN("", "Dropout", [](ShapeContext& c) {
  unary(c);
  if (c.has_output(1)) same_as_input(c, 0, 1, DType::Bool);
  if (const SymbolicContents* v = c.input_contents(0)) c.set_output_contents(0, *v);
});

FUSEOPT_SHAPE_FN("", "Neg", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 1, [](const Args& a) -> Elem {
    if (!a[0]) return std::nullopt;
    return SymExpr::constant(0) - *a[0];
  });
});

FUSEOPT_SHAPE_FN("", "Abs", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 1, [](const Args& a) -> Elem {
    auto x = cint(a[0]);
    if (!x) return std::nullopt;
    return SymExpr::constant(std::llabs(*x));
  });
});

FUSEOPT_SHAPE_FN("", "IsNaN", [](ShapeContext& c) { unary(c, DType::Bool); });
FUSEOPT_SHAPE_FN("", "IsInf", [](ShapeContext& c) { unary(c, DType::Bool); });

FUSEOPT_SHAPE_FN("", "Not", [](ShapeContext& c) {
  elementwise(c, DType::Bool, 1, [](const Args& a) -> Elem {
    auto x = cint(a[0]);
    if (!x) return std::nullopt;
    return from_bool(*x == 0);
  });
});

// SwiGLU (opset 28): Y = Swish(A) * B, A and B of one shape (ONNX does not broadcast them).
FUSEOPT_SHAPE_FN("", "SwiGLU", [](ShapeContext& c) {
  unary(c);
  const std::optional<Shape>& a = c.input_shape(0);
  const std::optional<Shape>& b = c.input_shape(1);
  if (!a || !b) return;
  bool same = a->size() == b->size();
  for (size_t i = 0; same && i < a->size(); ++i)
    same = !(*a)[i].known() || !(*b)[i].known() || (*a)[i].value == (*b)[i].value;
  if (!same) c.fail("A " + shape_str(*a) + " and B " + shape_str(*b) + " must have one shape (no broadcasting)");
});

// BitCast (opset 26): the shape stays, the element type is `to` (widths checked by the kernels).
FUSEOPT_SHAPE_FN("", "BitCast", [](ShapeContext& c) {
  const DType to = dtype_attr(c, "to", DType::Undefined);
  if (to == DType::Undefined) c.fail("missing attribute 'to'");
  unary(c, to);
});

// --- Cast ------------------------------------------------------------------------------------
FUSEOPT_SHAPE_FN("", "Cast", [](ShapeContext& c) {
  const DType to = dtype_attr(c, "to", DType::Undefined);
  if (to == DType::Undefined) c.fail("missing attribute 'to'");
  unary(c, to);
  const SymbolicContents* v = c.input_contents(0);
  if (!v) return;
  if (to == DType::Bool) {
    SymbolicContents r;
    for (const Elem& e : *v) {
      auto k = cint(e);
      r.push_back(k ? from_bool(*k != 0) : Elem{});
    }
    c.set_output_contents(0, std::move(r));
  } else if (to != DType::String) {
    // Whole numbers survive the cast when the target holds them exactly;
    // out-of-range constants (INT64_MAX cast to int32) become unknown.
    std::optional<int64_t> lo, hi;
    switch (to) {
      case DType::Int32: lo = INT32_MIN; hi = INT32_MAX; break;
      case DType::Int16: lo = INT16_MIN; hi = INT16_MAX; break;
      case DType::Int8: lo = INT8_MIN; hi = INT8_MAX; break;
      case DType::UInt8: lo = 0; hi = UINT8_MAX; break;
      case DType::UInt16: lo = 0; hi = UINT16_MAX; break;
      case DType::UInt32: lo = 0; hi = UINT32_MAX; break;
      case DType::UInt64: lo = 0; break;
      case DType::Float16: lo = -2048; hi = 2048; break;
      case DType::BFloat16: lo = -256; hi = 256; break;
      case DType::Float: lo = -(int64_t{1} << 24); hi = int64_t{1} << 24; break;
      case DType::Double: lo = -(int64_t{1} << 53); hi = int64_t{1} << 53; break;
      default: break;
    }
    SymbolicContents r;
    for (const Elem& e : *v) {
      auto k = cint(e);
      if (k && ((lo && *k < *lo) || (hi && *k > *hi))) r.push_back(std::nullopt);
      else r.push_back(e);
    }
    c.set_output_contents(0, std::move(r));
  }
});

FUSEOPT_SHAPE_FN("", "CastLike", [](ShapeContext& c) {
  unary(c, c.input_dtype(1));
  if (const SymbolicContents* v = c.input_contents(0)) c.set_output_contents(0, *v);
});

// --- binary / variadic arithmetic ----------------------------------------------------------
FUSEOPT_SHAPE_FN("", "Add", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 2, [](const Args& a) -> Elem {
    if (!a[0] || !a[1]) return std::nullopt;
    return *a[0] + *a[1];
  });
});
FUSEOPT_SHAPE_FN("", "Sub", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 2, [](const Args& a) -> Elem {
    if (!a[0] || !a[1]) return std::nullopt;
    return *a[0] - *a[1];
  });
});
FUSEOPT_SHAPE_FN("", "Mul", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 2, [](const Args& a) -> Elem {
    if (cint(a[0]) == 0 || cint(a[1]) == 0) return SymExpr::constant(0);
    if (!a[0] || !a[1]) return std::nullopt;
    return *a[0] * *a[1];
  });
});
FUSEOPT_SHAPE_FN("", "Div", [](ShapeContext& c) {
  const bool integer = is_int_dtype(c.input_dtype(0));
  // An integer division by a constant 0 is undefined (ONNX Runtime refuses the model
  // when it loads it: mutate_models.py seed 14 m208, an Unsqueeze's axes [0] as Div's B).
  if (const Tensor* b = c.input_const(1); integer && tensor_ok(b) && dtype_is_integer(b->dtype))
    for (int64_t i = 0; i < b->numel(); ++i)
      if (b->as_int(i) == 0) c.fail("integer division by zero (B holds 0 at element " + std::to_string(i) + ")");
  elementwise(c, c.input_dtype(0), 2, [integer](const Args& a) { return divide(a[0], a[1], integer); });
});
FUSEOPT_SHAPE_FN("", "Mod", [](ShapeContext& c) {
  const bool fmod = c.node().attr_int("fmod", 0) != 0;
  elementwise(c, c.input_dtype(0), 2, [fmod](const Args& a) -> Elem {
    auto x = cint(a[0]), y = cint(a[1]);
    if (!x || !y || *y == 0) return std::nullopt;
    if (*y == -1) return SymExpr::constant(0);  // INT64_MIN % -1 would trap; x mod -1 is 0 for every x
    int64_t r = *x % *y;
    if (!fmod && r != 0 && ((r < 0) != (*y < 0))) r += *y;  // integer Mod takes the divisor's sign
    return SymExpr::constant(r);
  });
});
FUSEOPT_SHAPE_FN("", "Pow", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 2, [](const Args& a) -> Elem {
    auto x = cint(a[0]), y = cint(a[1]);
    if (!x || !y || *y < 0 || *y > 62) return std::nullopt;
    int64_t r = 1;
    for (int64_t i = 0; i < *y; ++i)
      if (__builtin_mul_overflow(r, *x, &r)) return std::nullopt;  // past int64: not a shape value we can track
    return SymExpr::constant(r);
  });
});
FUSEOPT_SHAPE_FN("", "BitShift", [](ShapeContext& c) { elementwise(c, c.input_dtype(0), 2, no_contents); });

// Max / Min of size expressions, pairwise: by the order where it is provable with every symbol
// a dimension >= 1 (torch.sym_max(0, 1 - seq) is 0, sym_max(seq, 1) is seq); otherwise a
// symbol against a constant is the symbol, the exporters' clamp of an index that is in range
// (sym_max(0, 64 - seq) is 64 - seq for seq <= 64: the module's own limit); else unknown.
// (Before session 29 the symbol won even where the order was provable: Max(1 - seq, 0) was
// 1 - seq, and MPT's x[-seq:] of a size-1 axis came out seq long instead of 1.)
Elem extreme(const Args& a, bool want_max) {
  Elem best = a.empty() ? std::nullopt : a[0];
  for (size_t i = 1; best && i < a.size(); ++i) {
    if (!a[i]) return std::nullopt;
    if (auto order = (*a[i] - *best).order_for_dims_at_least_one()) {  // a[i] against best
      if (want_max ? *order > 0 : *order < 0) best = a[i];
      continue;
    }
    const bool best_const = best->is_constant(), next_const = a[i]->is_constant();
    if (best_const == next_const) return std::nullopt;
    if (best_const) best = a[i];
  }
  return best;
}
FUSEOPT_SHAPE_FN("", "Max", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 1, [](const Args& a) { return extreme(a, true); });
});
FUSEOPT_SHAPE_FN("", "Min", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 1, [](const Args& a) { return extreme(a, false); });
});
FUSEOPT_SHAPE_FN("", "Sum", [](ShapeContext& c) {
  elementwise(c, c.input_dtype(0), 1, [](const Args& a) -> Elem {
    SymExpr s;
    for (const Elem& e : a) {
      if (!e) return std::nullopt;
      s = s + *e;
    }
    return s;
  });
});
FUSEOPT_SHAPE_FN("", "Mean", [](ShapeContext& c) { elementwise(c, c.input_dtype(0), 1, no_contents); });

// --- comparisons and logic -> bool -----------------------------------------------------------
#define COMPARE_OP(name, sym)                                                                   \
  FUSEOPT_SHAPE_FN("", name, [](ShapeContext& c) {                                              \
    elementwise(c, DType::Bool, 2, [](const Args& a) { return compare(a[0], a[1], sym); });        \
  })
COMPARE_OP("Equal", "==");
COMPARE_OP("Less", "<");
COMPARE_OP("LessOrEqual", "<=");
COMPARE_OP("Greater", ">");
COMPARE_OP("GreaterOrEqual", ">=");
#undef COMPARE_OP

#define LOGIC_OP(name, expr_)                                                                   \
  FUSEOPT_SHAPE_FN("", name, [](ShapeContext& c) {                                              \
    elementwise(c, DType::Bool, 2, [](const Args& a) -> Elem {                                     \
      auto x = cint(a[0]), y = cint(a[1]);                                                      \
      if (!x || !y) return std::nullopt;                                                        \
      const bool p = *x != 0, q = *y != 0;                                                      \
      return from_bool(expr_);                                                                  \
    });                                                                                         \
  })
LOGIC_OP("And", p && q);
LOGIC_OP("Or", p || q);
LOGIC_OP("Xor", p != q);
#undef LOGIC_OP

FUSEOPT_SHAPE_FN("", "Where", [](ShapeContext& c) {
  DType t = c.input_dtype(1) != DType::Undefined ? c.input_dtype(1) : c.input_dtype(2);
  elementwise(c, t, 3, [](const Args& a) -> Elem {
    auto k = cint(a[0]);
    if (k) return *k != 0 ? a[1] : a[2];
    if (a[1] && a[2] && *a[1] == *a[2]) return a[1];
    return std::nullopt;
  });
});

}  // namespace fuseopt::shape_ops

// --- bitwise ops and *Like generators ------------------------------------------------------------
namespace fuseopt::shape_ops {
namespace {
void broadcast_same_dtype(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  if (auto s = broadcast_inputs(c, {0, 1})) c.set_output_shape(0, *s);
}
// Output like input 0, dtype from attribute `dtype` (default: the input's).
void like_input(ShapeContext& c) { same_as_input(c, 0, 0, dtype_attr(c, "dtype", c.input_dtype(0))); }
// Shape from the `shape` attribute, dtype from `dtype` (default float).
void from_shape_attr(ShapeContext& c) {
  Shape s;
  for (int64_t d : c.node().attr_ints("shape")) s.push_back(d >= 0 ? Dim::of(d) : Dim::unknown());
  c.set_output(0, dtype_attr(c, "dtype", DType::Float), s);
}
}  // namespace

FUSEOPT_SHAPE_FN("", "BitwiseAnd", broadcast_same_dtype);
FUSEOPT_SHAPE_FN("", "BitwiseOr", broadcast_same_dtype);
FUSEOPT_SHAPE_FN("", "BitwiseXor", broadcast_same_dtype);
FUSEOPT_SHAPE_FN("", "BitwiseNot", [](ShapeContext& c) { same_as_input(c); });
FUSEOPT_SHAPE_FN("", "EyeLike", like_input);
FUSEOPT_SHAPE_FN("", "RandomNormalLike", like_input);
FUSEOPT_SHAPE_FN("", "RandomUniformLike", like_input);
FUSEOPT_SHAPE_FN("", "Bernoulli", like_input);
FUSEOPT_SHAPE_FN("", "RandomNormal", from_shape_attr);
FUSEOPT_SHAPE_FN("", "RandomUniform", from_shape_attr);

}  // namespace fuseopt::shape_ops
