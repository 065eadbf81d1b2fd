// Attention fusion: layout proofs and Q/K/V path tracing (see head_paths.h).
#include "passes/fusion/attention/head_paths.h"

#include <algorithm>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

Perm compose(const Perm& base, const Perm& p) {  // Transpose(Transpose(x, base), p) == Transpose(x, result)
  Perm r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[i] = base[p[i]];
  return r;
}

namespace {

// Whether a Transpose's perm is 0..n-1 in some order: compose() indexes by it, and a
// model's perm may be anything (a perm of [0, 9, 1, 2] read past the vector's end).
bool is_permutation(const Perm& q) {
  std::vector<bool> seen(q.size(), false);
  for (int64_t a : q) {
    if (a < 0 || a >= static_cast<int64_t>(q.size()) || seen[a]) return false;
    seen[a] = true;
  }
  return true;
}

}  // namespace

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


namespace {

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

// d == a·b as symbolic expressions.
bool is_product(const Dim& d, const Dim& a, const Dim& b) {
  auto x = SymExpr::from_dim(d), y = SymExpr::from_dim(a), z = SymExpr::from_dim(b);
  return x && y && z && *x == *y * *z;
}

// torch's multi_head_attention_forward on a seq-first [S, B, E] projection:
// Reshape [S, B, E] -> [S, B·H, D] (q.view(S, B·H, D)). Element (s, b·H + h, d) is x[s, b, h·D + d],
// so it is the 4-D head split [S, B, H, D] seen flat. Proven from the inferred shapes: the
// input is rank 3 with E known, the output [S, ·, D] keeps dim 0 and has D known, E % D == 0;
// the element count then fixes dim 1 to B·E/D = B·H. Returns (H, D).
// TorchScript bakes the traced length into k.view(16, B·H, D): dim 0 a constant where the
// source has a symbol. When dim 1 is proven B·H, the element count S·B·E = 16·B·H·D forces
// S = 16 on every input the Reshape accepts (it fails on any other), so on the model's whole
// domain it is the same split; the fused op is exact there (and runs other lengths too).
std::optional<std::pair<int64_t, int64_t>> seq_first_split(const Node* r) {
  if (!r || !r->is("Reshape") || !r->input(0) || !r->output(0)) return std::nullopt;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 3 || c->size() != 3 || !(*a)[2].known() || !(*c)[2].known()) return std::nullopt;
  const int64_t e = (*a)[2].value, d = (*c)[2].value;
  if (d <= 0 || e % d != 0) return std::nullopt;
  if (attn::dims_same((*a)[0], (*c)[0])) return std::make_pair(e / d, d);
  const bool baked_length = (*c)[0].known() && !(*a)[0].known() &&
                            is_product((*c)[1], (*a)[1], Dim::of(e / d));
  if (baked_length) return std::make_pair(e / d, d);
  return std::nullopt;
}

// Reshape [B, H, x, y] -> [B·H, x, y] (the batched-head 3-D view bmm-style exports use),

// proven from inferred shapes.

// A 4-D [B, H, x, y] and a 3-D [B·H, x, y] shape describe the same layout: the merged
// dim is the product and x, y agree (one of them may be a name the exporter did not
// simplify, e.g. "((seq**2)//seq)": the element count fixes it once the others agree).
bool same_bh_view(const Shape& four, const Shape& three) {
  if (!is_product(three[0], four[0], four[1])) return false;
  return attn::dims_same(three[1], four[2]) || attn::dims_same(three[2], four[3]);
}

}  // namespace

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

namespace {

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

// Walks up from x through at most 4 scalar factors (their product joins
// hp.scale) and passthrough nodes, recording them in hp.nodes; returns the
// value above them (the projection's output).
Value* absorb_projection_scale(HeadPath& hp, Value* x) {
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
  return x;
}

// A key/value cache enters the graph: `past` is a graph input (or an outer-scope value of an
// If branch) seen through layout-only nodes. A sequence Concat of something the graph computes
// (EVA's cat(q[:, :, :1], rope(q[:, :, 1:])): the class token kept out of the rotary) is not a
// cache; such an operand is taken whole as a [B, heads, S, D] tensor.
bool is_cache_input(const Value* past) {
  for (int k = 0; k < 4 && past; ++k) {
    const Node* n = past->producer;
    if (!n) return !past->is_const();
    if (!(n->is("Cast") || n->is("Transpose") || n->is("Reshape") || is_passthrough(n))) return false;
    past = n->input(0);
  }
  return false;
}

}  // namespace

// Walks back from a core operand. `want` is the permutation of [B, S, h, D] the
// operand must be (Q, V: 0,2,1,3; Kᵀ: 0,2,3,1).
HeadPath trace_head(Value* v, const Perm& want, bool flat) {
  HeadPath hp;
  Perm p = {0, 1, 2, 3};
  for (int depth = 0; depth < 24 && v; ++depth) {
    Node* n = v->producer;
    if (!n || n->inputs.empty() || !n->input(0)) break;
    if (flat) {
      // v is the [B·H, x, y] view of a [B, H, x, y] value (bloom's baddbmm / bmm).
      if (n->is("Transpose")) {
        Perm q = n->attr_ints("perm");
        Node* r = n->input(0)->producer;
        auto sf = (q == Perm{1, 0, 2} || q == Perm{1, 2, 0}) ? seq_first_split(r) : std::nullopt;
        if (sf) {
          // torch MHA: q.view(S, B·H, D).transpose(0, 1) ([B·H, S, D]) or k's .permute(1, 2, 0)
          // ([B·H, D, S]): in 4-D terms Transpose([S, B, H, D], 1,2,0,3 / 1,2,3,0). The source is
          // the seq-first [S, B, H·D] tensor: the operand must be Transpose(x_sbhd, p), i.e.
          // Transpose(x_bshd, compose(1,0,2,3 ; p)) = want.
          p = compose(q == Perm{1, 0, 2} ? Perm{1, 2, 0, 3} : Perm{1, 2, 3, 0}, p);
          if (compose({1, 0, 2, 3}, p) != want) {
            hp.fail = "rule 4: the transposes after " + r->label() + " do not give the attention head layout";
            return hp;
          }
          hp.nodes.insert(hp.nodes.end(), {n, r});
          hp.src = absorb_projection_scale(hp, r->input(0));  // q * scaling on the [S, B, E] projection
          hp.seq_first = hp.materialize = true;
          hp.heads = sf->first;
          hp.dim = sf->second;
          return hp;
        }
        if ((q == Perm{1, 0, 2} || q == Perm{1, 2, 0}) && r && r->is("Reshape") && r->input(0) && r->output(0) &&
            r->input(0)->shape && r->output(0)->shape && r->input(0)->shape->size() == 3 &&
            r->output(0)->shape->size() == 3) {
          // The torch MHA head split, but its dims do not prove it (TorchScript bakes the traced
          // key length into k.view(S, B·H, D): a constant where the source has a symbol).
          hp.fail = "rule 7: cannot prove that " + r->label() + " (" + shape_str(*r->input(0)->shape) + " -> " +
                    shape_str(*r->output(0)->shape) + ") splits a seq-first [S, B, H*D] tensor into [S, B*H, D] " +
                    "(dim 0 must be the source's sequence dim, D known)";
          return hp;
        }
        if (q.size() != 3 || q[0] != 0 || !is_permutation(q)) break;
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
      if (q.size() != 4 || !is_permutation(q)) break;
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
    if (splits_bh(n) && n->input(0)->producer && n->input(0)->producer->is("Transpose") &&
        attn::rank_of(n->input(0)) == 3) {
      // [B·H, S, D] -> [B, H, S, D] of a transposed 3-D view (torch MHA through SDPA:
      // q.view(S, B·H, D).transpose(0, 1).view(B, H, S, D)): continue on the flat view.
      flat = true;
      hp.nodes.push_back(n);
      v = n->input(0);
      continue;
    }
    if (n->is("Concat") && n->inputs.size() == 2 && n->input(1) && !hp.present && is_cache_input(n->input(0))) {
      // v = Transpose(x_bshd, r) with r∘p = want: its sequence axis is where r holds 1.
      Perm r(4);
      for (int i = 0; i < 4; ++i) r[p[i]] = want[i];
      int64_t ax = n->attr_int("axis", 0);
      if (ax < 0) ax += 4;
      if (ax == std::find(r.begin(), r.end(), 1) - r.begin()) {
        // KV cache: Concat(past, new) along the sequence becomes the op's past -> present.
        if (r != Perm{0, 2, 1, 3}) {
          hp.fail = "rule 4: " + n->label() + " concatenates a key/value cache that is not laid out [B, heads, S, D]";
          return hp;
        }
        hp.past = n->input(0);
        hp.present = v;
        hp.nodes.push_back(n);
        v = n->input(1);
        continue;
      }
      break;
    }
    if (n->is("Reshape") && !flat && splits_bh(n)) {
      // [X, S, D] viewed [B, H, S, D] from anything but a transposed 3-D view (SAM's unbind of a
      // packed [3, B·H, S, D]): the 4-D view itself is the operand, re-laid out outside the op.
      break;
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
      // A seq-first [S, B, W] source split into [S, B, h, d] (torch MHA layouts).
      const bool seq_first = compose({0, 1, 2, 3}, p) != want && compose({1, 0, 2, 3}, p) == want;
      if (compose({0, 1, 2, 3}, p) != want && !seq_first) {
        hp.fail = "rule 4: the transposes after " + n->label() + " do not give the attention head layout";
        return hp;
      }
      hp.fail = check_split_reshape(n, heads->first, heads->second);
      hp.nodes.push_back(n);
      // A scalar scale on the 3-D projection (Whisper: q_proj(x) * scaling) joins `scale`.
      x = absorb_projection_scale(hp, x);
      hp.src = x;
      hp.heads = heads->first;
      hp.dim = heads->second;
      if (seq_first) {
        if (attn::rank_of(x) != 3) {
          hp.fail = "rule 7: the seq-first head split " + n->label() + " does not reshape a [S, B, hidden] tensor";
          return hp;
        }
        hp.seq_first = hp.materialize = true;
        return hp;
      }
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
  if (hp.seq_first) axis = 1 - k;
  else if (hp.unit_axis >= 0) axis = k >= hp.unit_axis ? k + 1 : k;
  else if (hp.materialize) axis = hp.to_bshd[k];
  if (axis >= static_cast<int64_t>(s.size())) return std::nullopt;
  return s[axis];
}

// Index of that axis in hp.src (for proofs on shape tensors built from Shape(src)).
int src_axis(const HeadPath& hp, int k) {
  if (hp.seq_first) return 1 - k;
  if (hp.unit_axis >= 0) return k >= hp.unit_axis ? k + 1 : k;
  return hp.materialize ? static_cast<int>(hp.to_bshd[k]) : k;
}


std::optional<Dim> kv_len(const HeadPath& k) {
  if (k.present) {
    if (k.present->shape && k.present->shape->size() == 4) return (*k.present->shape)[2];
    return std::nullopt;
  }
  return src_dim(k, 1);
}

std::vector<SymExpr> kv_lens(const HeadPath& k) {
  std::vector<SymExpr> r;
  auto add = [&](std::optional<SymExpr> e) {
    if (e && std::find(r.begin(), r.end(), *e) == r.end()) r.push_back(*e);
  };
  if (auto d = kv_len(k)) add(SymExpr::from_dim(*d));
  if (k.present && k.past && k.past->shape && k.past->shape->size() == 4) {
    auto past = SymExpr::from_dim((*k.past->shape)[2]);
    auto now = src_dim(k, 1);
    auto n = now ? SymExpr::from_dim(*now) : std::nullopt;
    if (past && n) add(*past + *n);
  }
  return r;
}

}  // namespace fuseopt::attn
