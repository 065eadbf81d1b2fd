// Attention: the scaled-dot-product core of every transformer export
//
//   Reshape([B,S,H·Dv]) <- Transpose(0,2,1,3) <- MatMul(P, V4)
//   P  = Softmax(last axis)( bias/mask ops ( scale ( MatMul(Q4, K4ᵀ) ) ) )
//   Q4 = Transpose(0,2,1,3)(Reshape(q [B,S,H·Dh] -> [B,S,H,Dh]))      (or rotary'd [B,H,S,Dh])
//   K4ᵀ= Transpose(0,2,3,1)(Reshape(k)), or Transpose(0,1,3,2)(Transpose(0,2,1,3)(...)), GQA
//        repeat (Unsqueeze(2)/Expand/Reshape) allowed on the way
//   V4 = Transpose(0,2,1,3)(Reshape(v))
// => fuseopt.Attention(qkv packed | q, k, v, mask?, attn_bias?) -> [B, S, H·Dv]
//
// The root is the final Reshape. Matching is by hand (many exporter spellings):
// transposes are composed, Identity / same-type Cast / one-input Concat /
// Dropout pass through, scalar Mul/Div on the scores, on Q or on K multiply
// into `scale`. Mask terms: additive tensors (Add) go to attn_bias unchanged;
// Where(cond, scores, fill) goes to attn_bias as a bool with
// mask_filter_value = fill. Q/K reaching the core not as a head reshape (rotary
// applied in [B,H,S,D] layout) are brought back to [B,S,H·D] by a Transpose +
// Reshape outside the fused op. When Q, K and V are outputs 0/1/2 of one Split
// of the last axis (the QKV pass makes that, GPT-2 exports have it), the Split
// input is passed packed.
//
// Legality (DESIGN rule 7 + 1, 5): scale factors are constants and are applied
// before every mask term; head reshapes split only the last axis into
// num_heads × head_dim with known sizes; K and V agree on kv heads; mask terms
// are additive float tensors of rank <= 4 or one bool Where with a scalar fill;
// all of Q, K, V, scores are the same float dtype; interior values private.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

#include "ir/shape_inference.h"
#include "pass/pass.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt {
namespace {

using attn::const_of;
using attn::const_scalar;
using attn::dtype_of;

using Perm = std::vector<int64_t>;

Perm compose(const Perm& base, const Perm& p) {  // Transpose(Transpose(x, base), p) == Transpose(x, result)
  Perm r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[i] = base[p[i]];
  return r;
}

// How Q, K or V reaches the core.
struct HeadPath {
  Value* src = nullptr;     // [B, S, heads·D] (found head reshape) or [B, heads, S, D] (materialize)
  bool materialize = false;
  bool bshd = false;        // materialize from [B, S, heads, D] (a Reshape only) instead of [B, heads, S, D]
  std::vector<int64_t> to_bshd = {0, 1, 2, 3};  // materialize: Transpose(src, to_bshd) is [B, S, heads, D]
  int64_t unit_axis = -1;   // src is [B, S, W] with a size-1 axis inserted here (Squeeze it to materialize)
  int64_t heads = -1;       // heads of src (kv heads for K/V)
  int64_t dim = -1;         // head dim
  int64_t repeat = 1;       // GQA: each src head used `repeat` times
  double scale = 1.0;       // scalar Mul/Div folded on the way
  std::vector<Node*> nodes; // walked nodes (erased when dead after the rewrite)
  std::string fail;         // legality problem (rule 7 / 5), empty when fine
};

// A Reshape whose inferred output shape is its input's, dim for dim (known values or
// the same symbols): a no-op view (Falcon's TorchScript export re-views [B, H, S, D]).
bool is_identity_reshape(const Node* n) {
  if (!n->is("Reshape") || !n->input(0) || !n->output(0)) return false;
  const auto& a = n->input(0)->shape;
  const auto& c = n->output(0)->shape;
  if (!a || !c || a->size() != c->size() || a->empty()) return false;
  for (size_t i = 0; i < a->size(); ++i)
    if (!attn::dims_same((*a)[i], (*c)[i])) return false;
  return true;
}

bool is_passthrough(const Node* n) {
  if (n->is("Identity")) return true;
  if (is_identity_reshape(n)) return true;
  if (n->is("Concat") && n->inputs.size() == 1) return true;
  if (n->is("Dropout")) return n->inputs.size() == 1 || (n->input(2) && const_scalar(n->input(2)) == 0.0);
  if (n->is("Cast")) return n->input(0) && dtype_of(n->input(0)) != DType::Undefined &&
                            static_cast<int64_t>(dtype_of(n->input(0))) == n->attr_int("to", -1);
  return false;
}

// Scalar constant multiplier of a Mul/Div node, with the other input.
std::optional<std::pair<double, Value*>> scalar_factor(const Node* n) {
  if (!(n->is("Mul") || n->is("Div")) || n->inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto c = const_scalar(n->input(side));
    if (!c || const_of(n->input(1 - side))) continue;
    if (n->is("Div")) {
      if (side != 1 || *c == 0.0) return std::nullopt;  // c / x is not a scale
      return std::make_pair(1.0 / *c, n->input(0));
    }
    return std::make_pair(*c, n->input(1 - side));
  }
  return std::nullopt;
}

// (heads, dim) a head-split Reshape produces, from its inferred output shape or target.
std::optional<std::pair<int64_t, int64_t>> reshape_heads(const Node* r, int h_axis, int d_axis) {
  if (r->inputs.size() < 2 || !r->input(1) || !r->output(0)) return std::nullopt;
  auto out = attn::known_dims(r->output(0));
  if (out && out->size() == 4 && (*out)[h_axis] > 0 && (*out)[d_axis] > 0) return std::make_pair((*out)[h_axis], (*out)[d_axis]);
  auto t = symbolic_value(r->input(1));
  if (!t || t->size() != 4) return std::nullopt;
  auto num = [](const Dim& x) -> int64_t { return x.known() ? x.value : (x.symbol == "-1" ? -1 : -2); };
  int64_t h = num((*t)[h_axis]), d = num((*t)[d_axis]);
  if (h > 0 && d > 0) return std::make_pair(h, d);
  auto width = attn::last_dim(r->input(0));
  if (width && h > 0 && d == -1 && *width % h == 0) return std::make_pair(h, *width / h);
  if (width && d > 0 && h == -1 && *width % d == 0) return std::make_pair(*width / d, d);
  return std::nullopt;
}

// A head-split Reshape whose input is [B, S, W] with one size-1 axis inserted at
// 0, 1 or 2 (GPT-BigCode: Split of Unsqueeze(qkv, 1) = [B, 1, S, W]): returns that
// axis when the inferred shapes prove the output is [B, S, h, d] of the same B and
// S (row-major order ignores a size-1 axis, so the Reshape only splits W), else -1.
int64_t unit_axis_view(const Node* r) {
  if (!r->is("Reshape") || !r->input(0) || !r->output(0)) return -1;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 4 || c->size() != 4) return -1;
  for (int64_t k = 0; k < 3; ++k) {
    if (!(*a)[k].known() || (*a)[k].value != 1) continue;
    std::vector<Dim> rest;
    for (int64_t i = 0; i < 4; ++i)
      if (i != k) rest.push_back((*a)[i]);
    if (attn::dims_same(rest[0], (*c)[0]) && attn::dims_same(rest[1], (*c)[1])) return k;
  }
  return -1;
}

// Rule 7: Reshape [B, S, W] -> [B, S, h, d] only splits the last axis.
std::string check_split_reshape(const Node* r, int64_t h, int64_t d) {
  auto in = r->input(0);
  if (unit_axis_view(r) >= 0) {
    auto w = attn::last_dim(in);
    if (!w || *w != h * d)
      return "rule 7: " + r->label() + " splits width " + (w ? std::to_string(*w) : std::string("?")) + " into " +
             std::to_string(h) + " x " + std::to_string(d) + " heads";
    return "";
  }
  if (attn::rank_of(in) && *attn::rank_of(in) != 3)
    return "rule 7: " + r->label() + " reshapes a tensor of rank " + std::to_string(*attn::rank_of(in)) + ", not [B, S, hidden]";
  if (auto w = attn::last_dim(in); w && *w != h * d)
    return "rule 7: " + r->label() + " splits width " + std::to_string(*w) + " into " + std::to_string(h) + " x " +
           std::to_string(d) + " heads";
  // Each of the target's first two entries copies B / S of the input (0 with
  // allowzero=0, the input's own dim, or the single -1 when the rest is proven).
  auto t = symbolic_value(r->input(1));
  if (!t || t->size() != 4) return "rule 7: the target of " + r->label() + " is not a known rank-4 shape";
  auto same = attn::same_leading_dims(in);
  int minus = 0;
  for (const Dim& d : *t) minus += d.symbol == "-1";
  if (minus > 1) return "rule 7: " + r->label() + " has more than one -1";
  for (int i = 0; i < 2; ++i) {
    const Dim& d = (*t)[i];
    if (d.known() && d.value == 0 && r->attr_int("allowzero", 0) == 0) continue;
    if (d.symbol == "-1" && (*t)[2].known() && (*t)[3].known()) continue;
    if (attn::shape_entry_is_dim(r->input(1), i, in, same)) continue;
    if (in->shape && r->output(0)->shape && in->shape->size() == 3 && r->output(0)->shape->size() == 4 &&
        attn::dims_same((*in->shape)[i], (*r->output(0)->shape)[i]))
      continue;
    return "rule 7: cannot prove that " + r->label() + " keeps dim " + std::to_string(i) + " of [B, S, hidden]";
  }
  return "";
}

// Reshape [B, H, x, y] -> [B·H, x, y] (the batched-head 3-D view bmm-style exports use),
// proven from inferred shapes.
// d == a·b as symbolic expressions.
bool is_product(const Dim& d, const Dim& a, const Dim& b) {
  auto x = SymExpr::from_dim(d), y = SymExpr::from_dim(a), z = SymExpr::from_dim(b);
  return x && y && z && *x == *y * *z;
}

// A 4-D [B, H, x, y] and a 3-D [B·H, x, y] shape describe the same layout: the merged
// dim is the product and x, y agree (one of them may be a name the exporter did not
// simplify, e.g. "((seq**2)//seq)": the element count fixes it once the others agree).
bool same_bh_view(const Shape& four, const Shape& three) {
  if (!is_product(three[0], four[0], four[1])) return false;
  return attn::dims_same(three[1], four[2]) || attn::dims_same(three[2], four[3]);
}

bool merges_bh(const Node* r) {
  if (!r->is("Reshape") || !r->input(0) || !r->output(0)) return false;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 4 || c->size() != 3) return false;
  return (attn::dims_same((*c)[1], (*a)[2]) && attn::dims_same((*c)[2], (*a)[3])) || same_bh_view(*a, *c);
}

// Reshape [B·H, x, y] -> [B, H, x, y] with H known.
bool splits_bh(const Node* r) {
  if (!r->is("Reshape") || !r->input(0) || !r->output(0)) return false;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 3 || c->size() != 4 || !(*c)[1].known()) return false;
  return (attn::dims_same((*c)[2], (*a)[1]) && attn::dims_same((*c)[3], (*a)[2])) || same_bh_view(*c, *a);
}

// Reshape(Transpose(Reshape(y [B,H,S,D], [B·H, S, D]), perm 0,2,1), [B, H, D, S]): returns y
// when the inferred shapes prove both reshapes only merge / split the leading dims.
Value* flattened_kt(const Node* outer) {
  if (!outer->is("Reshape")) return nullptr;
  const Node* t = outer->input(0) ? outer->input(0)->producer : nullptr;
  if (!t || !t->is("Transpose") || t->attr_ints("perm") != Perm{0, 2, 1} || !t->input(0)) return nullptr;
  const Node* inner = t->input(0)->producer;
  if (!inner || !inner->is("Reshape") || !inner->input(0)) return nullptr;
  Value* y = inner->input(0);
  const auto& ys = y->shape;
  const auto& is = inner->output(0)->shape;
  const auto& os = outer->output(0)->shape;
  if (!ys || !is || !os || ys->size() != 4 || is->size() != 3 || os->size() != 4) return nullptr;
  const Shape& a = *ys;
  const Shape& b = *is;
  const Shape& c = *os;
  if (!attn::dims_same(b[1], a[2]) || !attn::dims_same(b[2], a[3])) return nullptr;
  if (!attn::dims_same(c[0], a[0]) || !attn::dims_same(c[1], a[1]) || !attn::dims_same(c[2], a[3]) ||
      !attn::dims_same(c[3], a[2]))
    return nullptr;
  return y;
}

// Walks back from a core operand. `want` is the permutation of [B, S, h, D] the
// operand must be (Q, V: 0,2,1,3; Kᵀ: 0,2,3,1).
HeadPath trace_head(Value* v, const Perm& want, bool flat = false) {
  HeadPath hp;
  Perm p = {0, 1, 2, 3};
  for (int depth = 0; depth < 24 && v; ++depth) {
    Node* n = v->producer;
    if (!n || n->inputs.empty() || !n->input(0)) break;
    if (flat) {
      // v is the [B·H, x, y] view of a [B, H, x, y] value (bloom's baddbmm / bmm).
      if (n->is("Transpose")) {
        Perm q = n->attr_ints("perm");
        if (q.size() != 3 || q[0] != 0) break;
        p = compose({0, 1, q[1] + 1, q[2] + 1}, p);
      } else if (merges_bh(n)) {
        flat = false;
      } else if (auto f = scalar_factor(n)) {
        hp.scale *= f->first;
        hp.nodes.push_back(n);
        v = f->second;
        continue;
      } else if (!is_passthrough(n)) {
        hp.fail = "rule 7: operand '" + v->name + "' is a [B*H, S, D] view the rewrite cannot trace to its heads";
        return hp;
      }
      hp.nodes.push_back(n);
      v = n->input(0);
      continue;
    }
    if (n->is("Transpose")) {
      Perm q = n->attr_ints("perm");
      if (q.size() != 4) break;
      p = compose(q, p);
      hp.nodes.push_back(n);
      v = n->input(0);
      continue;
    }
    if (is_passthrough(n)) {
      hp.nodes.push_back(n);
      v = n->input(0);
      continue;
    }
    if (auto f = scalar_factor(n)) {
      hp.scale *= f->first;
      hp.nodes.push_back(n);
      v = f->second;
      continue;
    }
    if (Value* y = flattened_kt(n)) {
      // torch's SDPA decomposition transposes K as Reshape([B·H, S, D]) -> Transpose(0,2,1)
      // -> Reshape([B, H, D, S]): the same as Transpose(0,1,3,2) of the rank-4 K.
      p = compose({0, 1, 3, 2}, p);
      hp.nodes.insert(hp.nodes.end(), {n, n->input(0)->producer, n->input(0)->producer->input(0)->producer});
      v = y;
      continue;
    }
    if (n->is("Reshape")) {
      Value* x = n->input(0);
      Node* ex = x ? x->producer : nullptr;
      Node* un = ex && ex->is("Expand") && ex->input(0) ? ex->input(0)->producer : nullptr;
      if (un && un->is("Unsqueeze") && un->input(0)) {
        // GQA repeat_kv on [B, Hkv, S, D]: Unsqueeze(2) -> Expand [B, Hkv, rep, S, D] -> Reshape [B, H, S, D].
        std::vector<int64_t> axes = un->has_attr("axes") ? un->attr_ints("axes")
                                                         : attn::const_ints(un->input(1)).value_or(std::vector<int64_t>{});
        auto et = attn::known_dims(ex->output(0));
        if (!et || et->size() != 5) {
          if (auto t = attn::const_ints(ex->input(1)); t && t->size() == 5) et = t;
        }
        auto heads = reshape_heads(n, 1, 3);
        if (axes == std::vector<int64_t>{2} && et && et->size() == 5 && (*et)[2] > 0 && heads &&
            heads->first % (*et)[2] == 0) {
          hp.repeat *= (*et)[2];
          hp.nodes.insert(hp.nodes.end(), {n, ex, un});
          v = un->input(0);
          continue;
        }
        hp.fail = "rule 7: " + n->label() + " repeats kv heads in a form the rewrite cannot prove";
        return hp;
      }
      auto heads = reshape_heads(n, 2, 3);
      if (!heads) {
        hp.fail = "rule 7: the head reshape " + n->label() + " does not give known num_heads x head_dim";
        return hp;
      }
      if (compose({0, 1, 2, 3}, p) != want) {
        hp.fail = "rule 4: the transposes after " + n->label() + " do not give the attention head layout";
        return hp;
      }
      hp.fail = check_split_reshape(n, heads->first, heads->second);
      hp.nodes.push_back(n);
      // A scalar scale on the 3-D projection (Whisper: q_proj(x) * scaling) joins `scale`.
      for (int k = 0; k < 4 && x->producer; ++k) {
        if (auto f = scalar_factor(x->producer)) {
          hp.scale *= f->first;
          hp.nodes.push_back(x->producer);
          x = f->second;
        } else if (is_passthrough(x->producer)) {
          hp.nodes.push_back(x->producer);
          x = x->producer->input(0);
        } else {
          break;
        }
      }
      hp.src = x;
      hp.heads = heads->first;
      hp.dim = heads->second;
      if (attn::rank_of(x) == 4) {  // [B, S, W] with a size-1 axis: squeezed outside the op
        hp.unit_axis = unit_axis_view(n);
        hp.materialize = true;
      }
      return hp;
    }
    break;
  }
  if (flat) {
    hp.fail = "rule 7: a [B*H, S, D] operand does not come from a [B, H, S, D] tensor";
    return hp;
  }
  // Not a head reshape: the operand is Transpose(v, p) exactly, so v re-laid out as
  // Transpose(v, p ∘ want⁻¹) is the operand's [B, S, heads, D] (v in [B, S, heads, D]:
  // GPT-NeoX / BLOOM per-head QKV split; [B, heads, S, D]: rotary applied after the
  // head transpose; [heads, B, S, D]: Falcon's dynamo K/V gathered from a transposed
  // fused QKV). It is re-packed outside by a Transpose (when needed) and a Reshape.
  // Which operand axes are batch and heads is checked across Q, K and V in analyze().
  if (!v || (attn::rank_of(v) && *attn::rank_of(v) != 4)) {
    hp.fail = "rule 7: operand '" + (v ? v->name : std::string("?")) + "' is not rank 4";
    return hp;
  }
  Perm inv(4);
  for (int i = 0; i < 4; ++i) inv[want[i]] = i;
  hp.to_bshd = compose(p, inv);
  hp.src = v;
  hp.materialize = true;
  hp.bshd = hp.to_bshd == Perm{0, 1, 2, 3};
  if (auto d = attn::known_dims(v); d && d->size() == 4) {
    hp.heads = (*d)[hp.to_bshd[2]];
    hp.dim = (*d)[hp.to_bshd[3]];
  }
  return hp;
}

// The dim of hp.src that is axis k (0 batch, 1 sequence) of the operand's [B, S, heads, D].
std::optional<Dim> src_dim(const HeadPath& hp, int k) {
  if (!hp.src || !hp.src->shape) return std::nullopt;
  const Shape& s = *hp.src->shape;
  int64_t axis = k;
  if (hp.unit_axis >= 0) axis = k >= hp.unit_axis ? k + 1 : k;
  else if (hp.materialize) axis = hp.to_bshd[k];
  if (axis >= static_cast<int64_t>(s.size())) return std::nullopt;
  return s[axis];
}

// Index of that axis in hp.src (for proofs on shape tensors built from Shape(src)).
int src_axis(const HeadPath& hp, int k) {
  if (hp.unit_axis >= 0) return k >= hp.unit_axis ? k + 1 : k;
  return hp.materialize ? static_cast<int>(hp.to_bshd[k]) : k;
}

// True when v is computed from a MatMul of two variable rank-4-ish operands
// through the elementwise ops a scores chain uses (which side of an Add holds the scores).
bool reaches_qk(const Value* v, int depth) {
  if (!v || !v->producer || depth > 8) return false;
  const Node* m = v->producer;
  if (m->is("MatMul")) return !const_of(m->input(0)) && !const_of(m->input(1));
  if (is_passthrough(m) || m->is("Cast") || m->is("Reshape") || m->is("Tanh")) return reaches_qk(m->input(0), depth + 1);
  if (m->is("Add") || m->is("Mul") || m->is("Div"))
    return reaches_qk(m->input(0), depth + 1) || reaches_qk(m->input(1), depth + 1);
  if (m->is("Where")) return reaches_qk(m->input(1), depth + 1) || reaches_qk(m->input(2), depth + 1);
  return false;
}

// One operation of the scores chain that masks: Add(s, v), or Where(v, s, fill) /
// Where(v, fill, s) (inverted).
struct MaskTerm {
  Value* v;
  bool where;
  bool inverted;
  double fill;
  bool flat = false;  // added to the [B·H, S, S_kv] view: lifted to [B, H, ...] by a Reshape
};

// ---- key-padding mask proofs ---------------------------------------------------

// Peels Casts to bool (Cast(x, BOOL) keeps exactly "x != 0", the mask input's meaning).
Value* peel_bool_casts(Value* v) {
  while (v && v->producer && v->producer->is("Cast") && v->producer->attr_int("to", 0) == int64_t(DType::Bool))
    v = v->producer->input(0);
  return v;
}

std::vector<int64_t> unsqueeze_axes(const Node* u) {
  if (u->has_attr("axes")) return u->attr_ints("axes");
  return attn::const_ints(u->input(1)).value_or(std::vector<int64_t>{});
}

// v = M[:, None, None, :] for a rank-2 M (Unsqueeze [1,2], or [1] then [2]); returns M.
Value* from_rank2(Value* v) {
  v = peel_bool_casts(v);
  Node* u = v ? v->producer : nullptr;
  if (!u || !u->is("Unsqueeze")) return nullptr;
  std::vector<int64_t> ax = unsqueeze_axes(u);
  Value* m = nullptr;
  if (ax == std::vector<int64_t>{1, 2}) {
    m = u->input(0);
  } else if (ax == std::vector<int64_t>{2}) {
    Node* u1 = peel_bool_casts(u->input(0))->producer;
    if (u1 && u1->is("Unsqueeze") && unsqueeze_axes(u1) == std::vector<int64_t>{1}) m = u1->input(0);
  }
  if (!m) return nullptr;
  m = peel_bool_casts(m);
  return attn::rank_of(m) == 2 ? m : nullptr;
}

bool is_bool(const Value* v) { return dtype_of(v) == DType::Bool; }

// The [B, S_kv] keep-mask an additive term provably encodes, with its fill:
//   (1 - float(Mb[:, None, None, :])) * c   or   Where(Mb[:, None, None, :], 0, c)
// with Mb boolean (values exactly 0/1) and c <= -1e30 (so s + c == c for any
// finite score: adding it is the same as replacing the score by c).
std::optional<std::pair<Value*, double>> additive_key_padding(Value* t) {
  Node* n = t ? t->producer : nullptr;
  if (!n) return std::nullopt;
  auto big_negative = [](std::optional<double> c) { return c && *c <= -1e30; };
  if (n->is("Where")) {
    auto zero = const_scalar(n->input(1));
    auto c = const_scalar(n->input(2));
    if (zero == 0.0 && big_negative(c) && is_bool(n->input(0)))
      if (Value* m = from_rank2(n->input(0))) return std::make_pair(m, *c);
    return std::nullopt;
  }
  if (!n->is("Mul")) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto c = const_scalar(n->input(1 - side));
    Node* sub = n->input(side) ? n->input(side)->producer : nullptr;
    if (!big_negative(c) || !sub || !sub->is("Sub") || const_scalar(sub->input(0)) != 1.0) continue;
    Node* cast = sub->input(1) ? sub->input(1)->producer : nullptr;
    if (!cast || !cast->is("Cast") || !is_bool(cast->input(0))) continue;
    if (Value* m = from_rank2(cast->input(0))) return std::make_pair(m, *c);
  }
  return std::nullopt;
}

// The mask's dims are provably [B, S_kv] of the keys.
bool mask_dims_match(const Value* m, const HeadPath& k) {
  if (!m->shape || m->shape->size() != 2 || !k.src || !k.src->shape) return false;
  auto b = src_dim(k, 0), s = src_dim(k, 1);
  return b && s && attn::dims_same((*m->shape)[0], *b) && attn::dims_same((*m->shape)[1], *s);
}

// ---- causal mask proofs ------------------------------------------------------------
// Both forms below equal "key j visible to query i iff j <= i" on a square [S, S]
// score matrix, which is causal=1 (bottom-right aligned: the same when S == S_kv; the
// original graph only broadcasts the [S, S] term when S_kv == S). Masked scores get
// a fill <= -1e30, so they end with probability 0 exactly like causal exclusions.

// Entry i of a shape tensor is the query sequence length.
bool entry_is_seq(const Value* t, int i, const HeadPath& q) {
  if (!q.src) return false;
  const int dim = src_axis(q, 1);
  std::vector<const Value*> same = q.materialize ? std::vector<const Value*>{q.src} : attn::same_leading_dims(q.src);
  return attn::shape_entry_is_dim(t, i, q.src, same, dim);
}

bool entry_is(const Value* t, int i, int64_t v) {
  auto sv = t ? symbolic_value(t) : std::nullopt;
  return sv && static_cast<int>(sv->size()) > i && (*sv)[i].known() && (*sv)[i].value == v;
}

// Trilu(ConstantOfShape([S, S] or [1, 1, S, S], fill <= -1e30), k=1, upper=1): finfo.min above the diagonal.
bool is_causal_trilu(const MaskTerm& t, const HeadPath& q) {
  if (t.where) return false;
  const Node* tr = t.v->producer;
  if (!tr || !tr->is("Trilu") || tr->attr_int("upper", 1) != 1 || !tr->input(0)) return false;
  auto k = tr->input(1) ? const_scalar(tr->input(1)) : std::optional<double>(0.0);
  if (!k || *k != 1.0) return false;
  const Node* cs = tr->input(0)->producer;
  if (!cs || !cs->is("ConstantOfShape") || !cs->input(0)) return false;
  const Attribute* a = cs->attr("value");
  if (!a || !a->t || a->t->numel() != 1 || !(a->t->as_double(0) <= -1e30)) return false;
  const Value* shp = cs->input(0);
  auto sv = symbolic_value(shp);
  if (!sv) return false;
  if (sv->size() == 2) return entry_is_seq(shp, 0, q) && entry_is_seq(shp, 1, q);
  if (sv->size() == 4)
    return entry_is(shp, 0, 1) && entry_is(shp, 1, 1) && entry_is_seq(shp, 2, q) && entry_is_seq(shp, 3, q);
  return false;
}

// Where(buffer[..., :S, :S] (as bool), s, fill) or Where(buffer[..., :S, :S] == 0, fill, s)
// (nanoGPT / transformers-4 GPT-2) with `buffer` a constant lower-triangular [1, 1, N, N].
bool is_causal_buffer(const MaskTerm& t, const HeadPath& q) {
  if (!t.where || !(t.fill <= -1e30)) return false;
  Value* c = t.v;
  if (t.inverted) {
    const Node* eq = c->producer;
    if (!eq || !eq->is("Equal") || eq->inputs.size() != 2) return false;
    int side = const_scalar(eq->input(1)) == 0.0 ? 0 : (const_scalar(eq->input(0)) == 0.0 ? 1 : -1);
    if (side < 0) return false;
    c = eq->input(side);
  }
  c = peel_bool_casts(c);
  std::set<int64_t> sliced;
  while (c && c->producer && c->producer->is("Slice")) {
    const Node* sl = c->producer;
    if (sl->inputs.size() < 4 || !sl->input(3)) return false;
    auto axes = attn::const_ints(sl->input(3));
    if (!axes) return false;
    if (sl->input(4)) {
      auto steps = attn::const_ints(sl->input(4));
      if (!steps) return false;
      for (int64_t st : *steps)
        if (st != 1) return false;
    }
    for (size_t i = 0; i < axes->size(); ++i) {
      const int64_t ax = (*axes)[i] < 0 ? (*axes)[i] + 4 : (*axes)[i];
      if ((ax != 2 && ax != 3) || !entry_is(sl->input(1), static_cast<int>(i), 0) ||
          !entry_is_seq(sl->input(2), static_cast<int>(i), q))
        return false;
      sliced.insert(ax);
    }
    c = sl->input(0);
  }
  if (sliced != std::set<int64_t>{2, 3}) return false;
  const Tensor* buf = const_of(c);
  if (!buf || buf->dims.size() != 4 || buf->dims[0] != 1 || buf->dims[1] != 1 || buf->dims[2] != buf->dims[3] ||
      buf->dtype == DType::String)
    return false;
  const int64_t n = buf->dims[2];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      if ((buf->as_double(i * n + j) != 0.0) != (j <= i)) return false;
  return true;
}

struct Plan {
  Node* root = nullptr;      // output Reshape
  Node* out_transpose = nullptr;
  Node* pv = nullptr;
  Node* softmax = nullptr;
  Node* qk = nullptr;
  std::vector<Node*> core;   // private chain, root first
  HeadPath q, k, v;
  double scale = 1.0;
  std::vector<Value*> add_bias;  // additive terms, forward order
  std::vector<MaskTerm> terms;   // every mask term, forward order
  bool combined = false;         // several terms incl. a Where: one float bias built outside
  bool causal = false;           // a causal mask term was proven (and removed from `terms`)
  bool nan_to_zero = false;      // Where(IsNaN(P), 0, P) after the Softmax
  bool flat = false;             // bmm-style: P·V (and maybe Q·Kᵀ) on [B·H, S, D] views
  Value* keep = nullptr;         // bool Where condition (true = keep)
  bool keep_inverted = false;    // Where(cond, fill, scores): keep = Not(cond)
  double fill = -std::numeric_limits<double>::infinity();
  int64_t num_heads = -1, kv_heads = -1;
  Node* split = nullptr;         // packed QKV source
  Node* down_cast = nullptr;     // Cast after the Softmax (fp32 softmax back to fp16/bf16)
  Value* mask = nullptr;         // proven key-padding mask [B, S_kv] (replaces the mask term)
  Node* up_cast = nullptr;       // the matching Cast of the scores to fp32
  bool flat_output = false;      // the root reshapes to [B·S, H·Dv]
  std::string fail;              // legality failure (rule text)
};

// Structural walk; "" on success (legality problems go to plan.fail).
std::string analyze(const Graph& g, Node* root, Plan& pl) {
  pl = Plan{};
  pl.root = root;
  if (!root->is("Reshape") || root->inputs.size() < 2 || !root->input(0) || !root->input(1)) return "not a Reshape";
  Node* tr = root->input(0) ? root->input(0)->producer : nullptr;
  if (!tr || !tr->is("Transpose") || tr->attr_ints("perm") != Perm{0, 2, 1, 3}) return "not Transpose(0,2,1,3)";
  Node* pv = tr->input(0) ? tr->input(0)->producer : nullptr;
  std::vector<Node*> out_views;  // no-op re-views of P·V before the transpose (Falcon TorchScript)
  while (pv && out_views.size() < 2 && is_identity_reshape(pv) && pv->input(0)->producer) {
    out_views.push_back(pv);
    pv = pv->input(0)->producer;
  }
  Node* pv_split = nullptr;
  if (pv && splits_bh(pv) && pv->input(0)->producer) {  // bmm-style: [B·H, S, D] -> [B, H, S, D]
    pv_split = pv;
    pv = pv->input(0)->producer;
    pl.flat = true;
  }
  if (!pv || !pv->is("MatMul") || pv->inputs.size() != 2 || !pv->input(0) || !pv->input(1)) return "no P·V MatMul";
  pl.out_transpose = tr;
  pl.pv = pv;
  pl.core = {root, tr, pv};
  pl.core.insert(pl.core.end(), out_views.begin(), out_views.end());
  if (pv_split) pl.core.push_back(pv_split);
  // P back to Softmax.
  Value* pval = pv->input(0);
  Node* sm = nullptr;
  for (int d = 0; d < 4 && pval && pval->producer; ++d) {
    Node* n = pval->producer;
    if (n->is("Softmax")) { sm = n; break; }
    if (pl.flat && merges_bh(n)) {  // P [B, H, S, S_kv] viewed as [B·H, S, S_kv] for the bmm
      pl.core.push_back(n);
      pval = n->input(0);
      continue;
    }
    if (n->is("Where") && n->inputs.size() == 3 && n->input(0) && n->input(0)->producer &&
        n->input(0)->producer->is("IsNaN") && n->input(0)->producer->input(0) == n->input(2) &&
        const_scalar(n->input(1)) == 0.0) {
      // torch SDPA: Where(IsNaN(P), 0, P) turns fully masked (NaN) rows into zeros; the
      // fused output gets the same Where(IsNaN(Y), 0, Y) (a NaN row of P is a zero row of Y).
      pl.nan_to_zero = true;
      pl.core.push_back(n);
      pl.core.push_back(n->input(0)->producer);
      pval = n->input(2);
      continue;
    }
    if (n->is("Cast") && !is_passthrough(n)) {
      // Only the downcast of an fp32 softmax back to the model's type is fine
      // (checked against the upcast below); the fused op's softmax is fp32.
      if (pl.down_cast && pl.fail.empty())
        pl.fail = "rule 5: " + n->label() + " changes the precision of the attention probabilities";
      pl.down_cast = n;
    } else if (!is_passthrough(n)) {
      break;
    }
    pl.core.push_back(n);
    pval = n->input(0);
  }
  if (!sm) return "P is not a Softmax";
  pl.softmax = sm;
  pl.core.push_back(sm);
  const int64_t axis = sm->attr_int("axis", g.opset("") >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) {
    pl.fail = "rule 7: " + sm->label() + " normalises axis " + std::to_string(axis) + ", not the key axis";
  }
  // Scores chain back to the QK MatMul (in bmm-style exports partly in the [B·H, S, S_kv] view).
  Value* s = sm->input(0);
  bool scores_flat = false;
  bool seen_scale = false;  // walking backwards: a scale seen before a mask term scales the mask too
  for (int d = 0; d < 12 && s && s->producer; ++d) {
    Node* n = s->producer;
    if (n->is("MatMul")) {
      if (n->inputs.size() != 2 || !n->input(0) || !n->input(1)) return "malformed MatMul";
      pl.qk = n;
      break;
    }
    if (n->inputs.empty() || !n->input(0)) break;
    if (is_passthrough(n)) { pl.core.push_back(n); s = n->input(0); continue; }
    if (pl.flat && !scores_flat && splits_bh(n)) {
      scores_flat = true;
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (n->is("Cast")) {  // a Cast that changes the type: the fused op computes in one precision
      const bool upcast_for_softmax = n->output(0) == sm->input(0) && pl.down_cast &&
                                      n->attr_int("to", 0) == static_cast<int64_t>(DType::Float) &&
                                      static_cast<int64_t>(dtype_of(n->input(0))) == pl.down_cast->attr_int("to", -1);
      if (upcast_for_softmax) {
        pl.up_cast = n;  // fp16/bf16 scores -> fp32 softmax -> back: what the fused op does inside
      } else if (pl.fail.empty()) {
        pl.fail = "rule 5: " + n->label() + " changes the precision inside the attention chain";
      }
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (auto f = scalar_factor(n)) {
      seen_scale = true;
      pl.scale *= f->first;
      pl.core.push_back(n);
      s = f->second;
      continue;
    }
    if (n->is("Mul") || n->is("Div")) {
      if (pl.fail.empty()) pl.fail = "rule 7: the scale in " + n->label() + " is not a constant";
      pl.core.push_back(n);
      // Continue through the operand that leads back to a MatMul to stay structural.
      Value* a = n->input(0);
      s = a;
      continue;
    }
    if (n->is("Add") && n->inputs.size() == 2 && n->input(1)) {
      // The scores side is the one that leads back to the QK MatMul.
      int side = -1;
      for (int i = 0; i < 2 && side < 0; ++i)
        if (reaches_qk(n->input(i), 0)) side = i;
      if (side < 0) return "Add without a scores side";
      if (seen_scale && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " adds a mask term before the scores are scaled; the fused op scales only Q·Kᵀ";
      pl.add_bias.insert(pl.add_bias.begin(), n->input(1 - side));
      pl.terms.insert(pl.terms.begin(), MaskTerm{n->input(1 - side), false, false, 0.0, scores_flat});
      pl.core.push_back(n);
      s = n->input(side);
      continue;
    }
    if (n->is("Tanh") || n->is("Sigmoid") || n->is("Erf") || n->is("Relu") || n->is("Abs") || n->is("Neg")) {
      // A non-linear map of the scores between Q·Kᵀ and the Softmax (Gemma-2's logit
      // soft-capping: cap * tanh(scores / cap)): the fused op cannot express it.
      if (pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " transforms the attention scores non-linearly (e.g. logit soft-capping " +
                  "cap*tanh(s/cap)); Attention has no such step";
      pl.core.push_back(n);
      s = n->input(0);
      continue;
    }
    if (n->is("Where")) {
      if (n->inputs.size() != 3 || !n->input(1) || !n->input(2)) return "malformed Where";
      auto f1 = const_scalar(n->input(1)), f2 = const_scalar(n->input(2));
      int scores_slot = f2 && !f1 ? 1 : (f1 && !f2 ? 2 : -1);
      if (scores_slot < 0) return "Where without a scalar fill";
      pl.keep = n->input(0);
      pl.keep_inverted = scores_slot == 2;
      pl.fill = scores_slot == 1 ? *f2 : *f1;
      pl.terms.insert(pl.terms.begin(), MaskTerm{pl.keep, true, pl.keep_inverted, pl.fill, scores_flat});
      if (seen_scale && pl.fail.empty())
        pl.fail = "rule 7: " + n->label() + " masks the scores before they are scaled; the fused op scales only Q·Kᵀ";
      pl.core.push_back(n);
      s = n->input(scores_slot);
      continue;
    }
    break;
  }
  if (!pl.qk) return "scores do not come from a MatMul";
  if (pl.down_cast && !pl.up_cast && pl.fail.empty())
    pl.fail = "rule 5: " + pl.down_cast->label() + " changes the precision of the attention probabilities";
  pl.core.push_back(pl.qk);
  for (const MaskTerm& t : pl.terms)
    if (t.where && dtype_of(t.v) != DType::Bool && dtype_of(t.v) != DType::Undefined && pl.fail.empty())
      pl.fail = "rule 7: Where condition '" + t.v->name + "' is not bool";
  if (pl.flat && !scores_flat && pl.fail.empty()) pl.fail = "rule 7: the [B*H, S, S_kv] scores are not viewed back as [B, H, S, S_kv]";
  pl.q = trace_head(pl.qk->input(0), {0, 2, 1, 3}, scores_flat);
  pl.k = trace_head(pl.qk->input(1), {0, 2, 3, 1}, scores_flat);
  pl.v = trace_head(pv->input(1), {0, 2, 1, 3}, pl.flat);
  for (HeadPath* hp : {&pl.q, &pl.k, &pl.v})
    if (!hp->fail.empty() && pl.fail.empty()) pl.fail = hp->fail;
  if (!pl.fail.empty()) return "";
  pl.scale *= pl.q.scale * pl.k.scale;
  // Causal mask terms (a Trilu of finfo.min, a sliced constant tril buffer) become causal=1.
  for (auto it = pl.terms.begin(); it != pl.terms.end();) {
    if (!it->flat && (is_causal_trilu(*it, pl.q) || is_causal_buffer(*it, pl.q))) {
      pl.causal = true;
      it = pl.terms.erase(it);
    } else {
      ++it;
    }
  }
  if (pl.causal) {  // re-derive the remaining terms
    pl.add_bias.clear();
    pl.keep = nullptr;
    for (const MaskTerm& t : pl.terms) {
      if (!t.where) {
        pl.add_bias.push_back(t.v);
      } else {
        pl.keep = t.v;
        pl.keep_inverted = t.inverted;
        pl.fill = t.fill;
      }
    }
  }
  if (pl.terms.size() > 1 && pl.keep) {
    // Several terms with a Where among them (GPT-2 of transformers 4: Where(causal, s, min) + mask):
    // one additive float attn_bias built outside: Where(keep, b, fill) + ... It equals the
    // original because s + fill == fill for any finite score when fill <= -1e30 (or -inf).
    pl.combined = true;
    for (const MaskTerm& t : pl.terms)
      if (t.where && !(t.fill <= -1e30) && pl.fail.empty())
        pl.fail = "rule 7: the Where mask fill " + std::to_string(t.fill) +
                  " is not large enough to combine it with the other mask terms into one attn_bias";
  }
  if (pl.v.scale != 1.0) pl.fail = "rule 7: V is scaled on its way to the P·V MatMul";
  if (pl.q.repeat != 1) pl.fail = "rule 7: the query heads are repeated";

  // Heads: the total comes from any path that knows it; kv heads from K/V sources.
  auto total = [](const HeadPath& h) { return h.heads > 0 ? h.heads * h.repeat : -1; };
  int64_t H = total(pl.q);
  // Batch axis: the Q·Kᵀ and P·V MatMuls broadcast their batch dims, the fused op does
  // not: K and V must provably have Q's batch dim (a size-1 batch against Q's B would
  // share one key set across the batch).
  if (auto qb = src_dim(pl.q, 0)) {
    for (const auto& [hp, what] : {std::pair<const HeadPath*, const char*>{&pl.k, "key"}, {&pl.v, "value"}}) {
      auto kb = src_dim(*hp, 0);
      if (!kb || attn::dims_same(*qb, *kb) || !pl.fail.empty()) continue;
      const bool one = kb->known() && kb->value == 1;
      pl.fail = std::string("rule 7: the ") + what + " operand '" + hp->src->name + "' has batch dim " +
                (kb->known() ? std::to_string(kb->value) : kb->symbol.empty() ? std::string("?") : kb->symbol) +
                ", query has " + (qb->known() ? std::to_string(qb->value) : qb->symbol.empty() ? std::string("?") : qb->symbol) +
                (one ? ": the MatMul broadcasts it over the batch, which Attention cannot express"
                     : ": cannot prove they are the same batch");
    }
  }
  // Heads axis: the MatMuls broadcast a size-1 head axis, so an operand re-laid out from a
  // rank-4 tensor needs a known head count to tell a broadcast from a full set of heads.
  for (const auto& [hp, what] : {std::pair<const HeadPath*, const char*>{&pl.q, "query"}, {&pl.k, "key"}, {&pl.v, "value"}}) {
    if (hp->materialize && hp->heads <= 0 && hp->src && pl.fail.empty())
      pl.fail = std::string("rule 7: the head count of the ") + what + " operand '" + hp->src->name +
                "' is unknown, so the MatMul broadcast of its head axis cannot be proven";
  }
  // Multi-query attention written as a MatMul broadcast of one kv head (Falcon, GPT-BigCode):
  // K, V [B, 1, S, D] against Q [B, H, S, D] is exactly kv_num_heads = 1 (each query head
  // reads the one kv head). Needs Q's head count to be known.
  if (pl.k.heads == 1 && pl.v.heads == 1 && pl.k.repeat == 1 && pl.v.repeat == 1) {
    if (H > 1) pl.k.repeat = pl.v.repeat = H;
    else if (H < 0 && pl.fail.empty())
      pl.fail = "rule 7: key/value have one head broadcast over the query heads, but the query head count is unknown";
  } else if ((pl.k.heads == 1) != (pl.v.heads == 1) && pl.k.heads > 0 && pl.v.heads > 0 && pl.k.repeat == 1 &&
             pl.v.repeat == 1 && H > 1 && pl.fail.empty()) {
    pl.fail = "rule 7: key and value have different kv head counts (key " + std::to_string(pl.k.heads) + ", value " +
              std::to_string(pl.v.heads) + "): the MatMul broadcasts only one of them over the " + std::to_string(H) +
              " query heads";
  }
  if (H < 0) H = total(pl.v);
  if (H < 0) H = total(pl.k);
  int64_t Hkv = pl.v.heads > 0 ? pl.v.heads : (pl.k.heads > 0 ? pl.k.heads : -1);
  if (Hkv < 0 && H > 0 && pl.k.repeat > 0 && H % pl.k.repeat == 0) Hkv = H / pl.k.repeat;
  if (H <= 0 || Hkv <= 0) {
    if (pl.fail.empty()) pl.fail = "rule 7: the number of heads cannot be determined from the reshapes";
    return "";
  }
  for (const HeadPath* hp : {&pl.q, &pl.k, &pl.v}) {
    if (hp->heads > 0 && total(*hp) != H && pl.fail.empty())
      pl.fail = "rule 7: query and key/value reshapes disagree on num_heads (" + std::to_string(total(*hp)) + " vs " +
                std::to_string(H) + ")";
  }
  if (pl.k.heads > 0 && pl.v.heads > 0 && pl.k.heads != pl.v.heads && pl.fail.empty())
    pl.fail = "rule 7: key and value have different kv head counts";
  if (pl.k.repeat != pl.v.repeat && pl.fail.empty()) pl.fail = "rule 7: key and value are repeated differently";
  if (pl.q.dim > 0 && pl.k.dim > 0 && pl.q.dim != pl.k.dim && pl.fail.empty())
    pl.fail = "rule 7: query and key head dims differ";
  if (H % Hkv != 0 && pl.fail.empty()) pl.fail = "rule 7: num_heads is not a multiple of kv_num_heads";
  // A single mask term that provably is a key-padding mask goes in as `mask`.
  if (pl.fail.empty() && pl.terms.size() == 1 && !pl.terms[0].flat) {
    if (pl.keep && !pl.keep_inverted) {
      Value* m = from_rank2(pl.keep);
      if (m && mask_dims_match(m, pl.k)) {
        pl.mask = m;
        pl.keep = nullptr;
      }
    } else if (!pl.add_bias.empty()) {
      auto kp = additive_key_padding(pl.add_bias[0]);
      if (kp && mask_dims_match(kp->first, pl.k)) {
        pl.mask = kp->first;
        pl.fill = kp->second;
        pl.add_bias.clear();
      }
    }
  }
  pl.num_heads = H;
  pl.kv_heads = Hkv;
  // Output reshape: [B, H, S, Dv] -> Transpose -> [B, S, H·Dv] (or the 2-D
  // [B·S, H·Dv] view some exporters feed their output GEMM). The target's
  // entries must copy B and S (0, the same symbols, Shape(y)[i] of a value
  // with the query's leading dims, or the one -1), the last be -1 or H·Dv.
  {
    auto t = symbolic_value(root->input(1));
    // The transposed input itself: a target entry naming its own dim i keeps dim i.
    std::vector<const Value*> refs = {root->input(0)};
    if (!pl.q.materialize && pl.q.src) refs.push_back(pl.q.src);
    if (!pl.v.materialize && pl.v.src) refs.push_back(pl.v.src);
    bool ok = t && (t->size() == 3 || t->size() == 2);
    if (ok) {
      const Dim& last = t->back();
      const bool last_known = last.known() && pl.v.dim > 0 && last.value == H * pl.v.dim;
      int minus_ones = 0;
      for (const Dim& d : *t) minus_ones += d.symbol == "-1";
      ok = minus_ones <= 1 && (last.symbol == "-1" || last_known);
      if (ok && t->size() == 2) {
        ok = last_known && (*t)[0].symbol == "-1";  // [-1, H·Dv]: a flat view of [B, S, H·Dv]
        pl.flat_output = ok;
      }
      for (int i = 0; ok && t->size() == 3 && i < 2; ++i) {
        const Dim& d = (*t)[i];
        if (d.symbol == "-1" && last_known) continue;
        if (d.known() && d.value == 0 && root->attr_int("allowzero", 0) == 0) continue;
        bool fine = false;
        for (const Value* r : refs) {
          if (fine) break;
          fine = attn::shape_entry_is_dim(root->input(1), i, r, attn::same_leading_dims(r));
          if (!fine && r->shape && r->shape->size() == 3 && d.known() && (*r->shape)[i].known())
            fine = d.value == (*r->shape)[i].value;
        }
        ok = fine;
      }
    }
    if (!ok && pl.fail.empty()) {
      std::string ts = t ? shape_str(*t) : std::string("unknown");
      pl.fail = "rule 7: cannot prove that " + root->label() + " (target " + ts + ") merges the heads into [B, S, H*Dv]";
    }
  }
  // Rule 5: one float dtype for Q, K, V, the scores and additive biases.
  std::vector<const Value*> vals = {pl.q.src, pl.k.src, pl.v.src, pv->input(0)};
  for (Value* b : pl.add_bias) vals.push_back(b);
  DType dt = DType::Undefined;
  for (const Value* x : vals) {
    DType t = dtype_of(x);
    if (t == DType::Undefined) continue;
    if (!dtype_is_float(t) || (dt != DType::Undefined && t != dt)) {
      if (pl.fail.empty()) pl.fail = "rule 5: '" + x->name + "' has dtype " + dtype_name(t) + " in a " + dtype_name(dt) + " attention";
      break;
    }
    dt = t;
  }
  for (Value* b : pl.add_bias)
    if (auto r = attn::rank_of(b); r && *r > 4 && pl.fail.empty()) pl.fail = "rule 7: mask '" + b->name + "' has rank > 4";
  if (g.opset("") < 13 && pl.fail.empty()) pl.fail = "rule 7: default-domain opset < 13 is not supported by Attention";
  // Packed QKV: Q, K, V are outputs 0, 1, 2 of one Split of the last axis.
  Node* sp = pl.q.src && !pl.q.materialize ? pl.q.src->producer : nullptr;
  if (sp && sp->is("Split") && sp->outputs.size() == 3 && !pl.k.materialize && !pl.v.materialize &&
      pl.k.src->producer == sp && pl.v.src->producer == sp && pl.q.src == sp->output(0) && pl.k.src == sp->output(1) &&
      pl.v.src == sp->output(2) && pl.q.dim > 0 && pl.q.dim == pl.v.dim) {
    auto r = attn::rank_of(sp->input(0));
    int64_t ax = sp->attr_int("axis", 0);
    bool last = ax == -1 || (r && ax == *r - 1);
    std::vector<int64_t> sizes = sp->has_attr("split") ? sp->attr_ints("split")
                                                       : attn::const_ints(sp->input(1)).value_or(std::vector<int64_t>{});
    bool sizes_ok = sizes == std::vector<int64_t>{H * pl.q.dim, Hkv * pl.q.dim, Hkv * pl.q.dim} ||
                    (sizes.empty() && H == Hkv);
    if (last && sizes_ok) pl.split = sp;
  }
  return "";
}

// [B, heads, S, D] (or [B, S, heads, D]) -> [B, S, heads·D] outside the fused op.
Value* materialize(Rewriter& rw, const HeadPath& hp) {
  Value* v = hp.src;
  if (hp.unit_axis >= 0)  // [B, S, W] with a size-1 axis: drop it (opset >= 13: axes as input)
    return rw.create_node("", "Squeeze", {v, rw.add_int64s("attn_unit_axis", {hp.unit_axis})}, {}, 1, "attn_unit_squeeze")
        ->output(0);
  if (hp.to_bshd != Perm{0, 1, 2, 3})
    v = rw.create_node("", "Transpose", {v}, {Attribute::make_ints("perm", hp.to_bshd)}, 1, "attn_heads_back")->output(0);
  return rw.create_node("", "Reshape", {v, rw.add_int64s("attn_merge_shape", {0, 0, -1})}, {}, 1, "attn_heads_merge")
      ->output(0);
}

// A mask term added to the [B·H, S, S_kv] view, as [B, H, ...]: Reshape to [-1, H] + its trailing dims.
Value* lift_flat(Rewriter& rw, Value* t, int64_t heads) {
  Value* shp = rw.create_node("", "Shape", {t}, {}, 1, "attn_bias_shape")->output(0);
  Value* tail = rw.create_node("", "Slice", {shp, rw.add_int64s("attn_one", {1}), rw.add_int64s("attn_end", {INT64_MAX})},
                               {}, 1, "attn_bias_tail")->output(0);
  Value* target = rw.create_node("", "Concat", {rw.add_int64s("attn_bh", {-1, heads}), tail},
                                 {Attribute::make_int("axis", 0)}, 1, "attn_bias_target")->output(0);
  return rw.create_node("", "Reshape", {t, target}, {}, 1, "attn_bias_lift")->output(0);
}

// The values between P·V and the root, each with the chain node that reads it: the
// transposed output (read by the root), the P·V output or its [B, H, S, Dv] view (read by
// the Transpose), and bmm-style the [B·H, S, Dv] P·V output (read by that view).
std::vector<std::pair<Value*, Node*>> output_side(Node* root) {
  std::vector<std::pair<Value*, Node*>> r;
  Node* tr = root->input(0) ? root->input(0)->producer : nullptr;
  if (!tr || !tr->input(0)) return r;
  r.push_back({tr->output(0), root});
  Node* x = tr->input(0)->producer;
  if (!x) return r;
  r.push_back({x->output(0), tr});
  if (x->is("Reshape") && x->input(0) && x->input(0)->producer) r.push_back({x->input(0)->producer->output(0), x});
  return r;
}

// v's readers other than the chain node are all Shape nodes (and there is one).
bool only_shape_readers(const Value* v, const Node* chain) {
  if (v->is_graph_output) return false;
  bool any = false;
  for (Node* c : v->consumers()) {
    if (c == chain) continue;
    if (!c->is("Shape")) return false;
    any = true;
  }
  return any;
}

class AttentionFusion : public FusionPass {
 public:
  std::string name() const override { return "Attention"; }
  std::string description() const override {
    return "QK^T/scale/mask/Softmax/V with head reshapes -> fuseopt.Attention (packed QKV when a Split feeds it)";
  }
  int run(Rewriter& rw, PassContext& ctx) override {
    // Head sizes come from reshape shapes: refresh inferred shapes first (metadata only).
    try {
      ShapeInferenceOptions o;
      o.strict = false;
      infer_shapes(const_cast<Graph&>(rw.graph()), o);
    } catch (const std::exception&) {
    }
    return FusionPass::run(rw, ctx);
  }
  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r;
    if (!root->is("Reshape")) { r.reason = "not a Reshape"; return r; }
    Plan pl;
    std::string why = analyze(g, root, pl);
    if (!why.empty()) { r.reason = why; return r; }
    Match m;
    m.root = root;
    std::set<Node*> seen;
    for (Node* n : pl.core)
      if (seen.insert(n).second) m.matched.push_back(n);
    r.match = std::move(m);
    return r;
  }
  // Shape nodes reading the transposed output only need its shape, which a view
  // of the fused output gives (see rewrite): that value is not private.
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    std::vector<const Value*> kept;
    for (auto [v, chain] : output_side(m.root))
      if (only_shape_readers(v, chain)) kept.push_back(v);
    for (Value* v : score_values_read_for_shape(m)) kept.push_back(v);
    return kept;
  }
  // Scores / probabilities ([B, H, S, S_kv], or [B·H, S, S_kv] in bmm-style exports) whose
  // only readers outside the match are Shape nodes (TorchScript reshape targets): their
  // shapes are rebuilt from the fused op's inputs and output in rewrite().
  static std::vector<Value*> score_values_read_for_shape(const Match& m) {
    std::vector<Value*> r;
    std::set<const Node*> inside(m.matched.begin(), m.matched.end());
    auto out_side = output_side(m.root);
    for (Node* n : m.matched) {
      Value* v = n->output(0);
      if (n == m.root || !v || v->is_graph_output) continue;
      bool is_out_side = false;
      for (auto& [ov, c] : out_side) is_out_side |= ov == v;
      auto rank = attn::rank_of(v);
      if (is_out_side || !rank || (*rank != 3 && *rank != 4)) continue;
      bool any = false, only_shape = true;
      for (Node* c : v->consumers()) {
        if (inside.count(c)) continue;
        any = true;
        only_shape &= c->is("Shape");
      }
      if (any && only_shape) r.push_back(v);
    }
    return r;
  }
  Status check(const Graph& g, const Match& m) const override {
    Plan pl;
    analyze(g, m.root, pl);
    if (!pl.fail.empty()) return Status::reject(pl.fail);
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    Plan pl;
    analyze(rw.graph(), m.root, pl);
    std::vector<Value*> in(5, nullptr);
    if (pl.split) {
      in[0] = pl.split->input(0);
    } else {
      in[0] = pl.q.materialize ? materialize(rw, pl.q) : pl.q.src;
      in[1] = pl.k.materialize ? materialize(rw, pl.k) : pl.k.src;
      in[2] = pl.v.materialize ? materialize(rw, pl.v) : pl.v.src;
    }
    // Terms added to the [B·H, S, S_kv] view are lifted to [B, H, S, S_kv] first.
    for (MaskTerm& t : pl.terms) {
      if (!t.flat) continue;
      Value* lifted = lift_flat(rw, t.v, pl.num_heads);
      for (Value*& b : pl.add_bias)
        if (b == t.v) b = lifted;
      if (pl.keep == t.v) pl.keep = lifted;
      t.v = lifted;
    }
    // Mask terms: a constant all-zero bias is no bias (ViT exports carry one).
    std::vector<Value*> bias;
    for (Value* b : pl.add_bias) {
      const Tensor* t = const_of(b);
      bool zero = t && t->dtype == DType::Float;
      for (int64_t i = 0; zero && i < t->numel(); ++i) zero = t->data<float>()[i] == 0.0f;
      if (!zero) bias.push_back(b);
    }
    Value* ab = nullptr;
    if (pl.combined) {
      const DType dt = dtype_of(in[0]) == DType::Undefined ? DType::Float : dtype_of(in[0]);
      for (const MaskTerm& t : pl.terms) {
        if (!t.where) {
          ab = ab ? rw.create_node("", "Add", {ab, t.v}, {}, 1, "attn_bias_sum")->output(0) : t.v;
          continue;
        }
        Value* base = ab ? ab : rw.add_scalar("attn_zero", dt, 0.0);
        Value* fillv = rw.add_scalar("attn_fill", dt, t.fill);
        std::vector<Value*> w = t.inverted ? std::vector<Value*>{t.v, fillv, base} : std::vector<Value*>{t.v, base, fillv};
        ab = rw.create_node("", "Where", w, {}, 1, "attn_bias_where")->output(0);
      }
    } else {
      for (Value* b : bias) ab = ab ? rw.create_node("", "Add", {ab, b}, {}, 1, "attn_bias_sum")->output(0) : b;
      if (pl.keep) ab = pl.keep_inverted ? rw.create_node("", "Not", {pl.keep}, {}, 1, "attn_keep")->output(0) : pl.keep;
    }
    in[3] = pl.mask;
    in[4] = ab;
    while (!in.empty() && !in.back()) in.pop_back();
    float fill = (pl.keep && !pl.combined) || pl.mask ? static_cast<float>(pl.fill) : -std::numeric_limits<float>::max();
    std::vector<Attribute> attrs = {
        Attribute::make_int("num_heads", pl.num_heads), Attribute::make_int("kv_num_heads", pl.kv_heads),
        Attribute::make_float("scale", static_cast<float>(pl.scale)), Attribute::make_int("causal", pl.causal ? 1 : 0),
        Attribute::make_float("mask_filter_value", fill)};
    Node* f = rw.create_node("fuseopt", "Attention", in, attrs, 1, "Attention");
    Value* out = f->output(0);
    if (pl.nan_to_zero) {
      Value* nan = rw.create_node("", "IsNaN", {out}, {}, 1, "attn_isnan")->output(0);
      Value* zero = rw.add_scalar("attn_zero", dtype_of(in[0]) == DType::Undefined ? DType::Float : dtype_of(in[0]), 0.0);
      out = rw.create_node("", "Where", {nan, zero, out}, {}, 1, "attn_nan_to_zero")->output(0);
    }
    if (pl.flat_output)
      out = rw.create_node("", "Reshape", {out, m.root->input(1)}, {}, 1, "attn_flat")->output(0);
    // Shape-only readers of output-side values (TorchScript computes reshape targets from
    // them) read a free view of the fused output with the same shape:
    //   [B, S, H, Dv]: Reshape(Y, [0, 0, H, -1]);   [B, H, S, Dv]: Reshape(Y, [B, H, S, -1]);
    //   [B·H, S, Dv]: Reshape(Y, [B·H, S, -1])  (same element count as Y = [B, S, H·Dv]).
    for (auto [sv, chain] : output_side(m.root)) {
      std::vector<Node*> readers;
      for (Node* c : sv->consumers())
        if (c->is("Shape")) readers.push_back(c);
      if (readers.empty()) continue;
      auto rank = attn::rank_of(sv);
      Value* y = f->output(0);
      Value* view = nullptr;
      if (sv == pl.out_transpose->output(0)) {
        view = rw.create_node("", "Reshape", {y, rw.add_int64s("attn_heads_view", {0, 0, pl.num_heads, -1})}, {}, 1,
                              "attn_heads_view")->output(0);
      } else if (rank) {
        Value* shp = rw.create_node("", "Shape", {y}, {}, 1, "attn_out_shape")->output(0);
        auto slice = [&](int64_t a, int64_t b) {
          return rw.create_node("", "Slice", {shp, rw.add_int64s("attn_s", {a}), rw.add_int64s("attn_e", {b})}, {}, 1,
                                "attn_out_dim")->output(0);
        };
        Value* h = rw.add_int64s("attn_h", {pl.num_heads});
        std::vector<Value*> parts;
        if (*rank == 4) parts = {slice(0, 1), h, slice(1, 2), rw.add_int64s("attn_rest", {-1})};
        else parts = {rw.create_node("", "Mul", {slice(0, 1), h}, {}, 1, "attn_bh")->output(0), slice(1, 2),
                      rw.add_int64s("attn_rest", {-1})};
        Value* target = rw.create_node("", "Concat", parts, {Attribute::make_int("axis", 0)}, 1, "attn_view_shape")->output(0);
        view = rw.create_node("", "Reshape", {y, target}, {}, 1, "attn_shape_view")->output(0);
      }
      if (!view) continue;
      for (Node* c : readers)
        for (size_t i = 0; i < c->inputs.size(); ++i)
          if (c->inputs[i] == sv) rw.set_input(c, i, view);
    }
    // Shape readers of the scores / probabilities get the shape rebuilt:
    // [B, H, S, S_kv] from Y [B, S, ·] and the key input [B, S_kv, ·] (or the packed input).
    for (Value* sv : score_values_read_for_shape(m)) {
      Value* yshape = rw.create_node("", "Shape", {f->output(0)}, {}, 1, "attn_y_shape")->output(0);
      Value* kshape = rw.create_node("", "Shape", {in.size() > 1 && in[1] ? in[1] : in[0]}, {}, 1, "attn_k_shape")->output(0);
      auto dim = [&](Value* shp, int64_t i) {
        return rw.create_node("", "Slice", {shp, rw.add_int64s("attn_s", {i}), rw.add_int64s("attn_e", {i + 1})}, {}, 1,
                              "attn_dim")->output(0);
      };
      Value* h = rw.add_int64s("attn_h", {pl.num_heads});
      std::vector<Value*> parts;
      if (attn::rank_of(sv) == 4) parts = {dim(yshape, 0), h, dim(yshape, 1), dim(kshape, 1)};
      else parts = {rw.create_node("", "Mul", {dim(yshape, 0), h}, {}, 1, "attn_bh")->output(0), dim(yshape, 1), dim(kshape, 1)};
      Value* full = rw.create_node("", "Concat", parts, {Attribute::make_int("axis", 0)}, 1, "attn_scores_shape")->output(0);
      std::vector<Node*> readers;
      for (Node* c : sv->consumers())
        if (c->is("Shape")) readers.push_back(c);
      for (Node* c : readers) {
        Value* out = full;
        if (c->has_attr("start") || c->has_attr("end")) {
          const int64_t r = static_cast<int64_t>(parts.size());
          int64_t a = c->attr_int("start", 0), b = c->attr_int("end", r);
          a = std::clamp(a < 0 ? a + r : a, int64_t{0}, r);
          b = std::clamp(b < 0 ? b + r : b, int64_t{0}, r);
          out = rw.create_node("", "Slice", {full, rw.add_int64s("attn_s", {a}), rw.add_int64s("attn_e", {std::max(a, b)})},
                               {}, 1, "attn_shape_part")->output(0);
        }
        rw.replace_all_uses(c->output(0), out);
        rw.erase_node(c);
      }
    }
    std::vector<Node*> walked;
    for (HeadPath* hp : {&pl.q, &pl.k, &pl.v}) walked.insert(walked.end(), hp->nodes.begin(), hp->nodes.end());
    rw.replace_match(m, f, name(), {{m.root->output(0), out}});
    rw.erase_dead(walked);
    if (pl.split) rw.erase_dead({pl.split});
  }
};

}  // namespace

FUSEOPT_REGISTER_PASS(AttentionFusion, PassCategory::Fusion, 500);

}  // namespace fuseopt
