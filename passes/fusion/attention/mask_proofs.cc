// Attention fusion: key-padding and causal mask proofs (see mask_proofs.h).
#include "passes/fusion/attention/mask_proofs.h"

#include <algorithm>
#include <set>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

namespace {

std::vector<int64_t> unsqueeze_axes(const Node* u) {
  if (u->has_attr("axes")) return u->attr_ints("axes");
  return attn::const_ints(u->input(1)).value_or(std::vector<int64_t>{});
}

}  // namespace

// ---- key-padding mask proofs ---------------------------------------------------

namespace {

// transformers 4's _prepare_4d_attention_mask (BERT-family SDPA exports, Optimum's):
//   inv = 1 - float(Expand(M[:, None, None, :], [B, 1, S_q, S_kv]));  Where(bool(inv), c, inv)
// with M an integer or bool [B, S_kv] mask and c <= -1e30. inv is 0 exactly where float(M) == 1,
// which for an integer M is M == 1 (no other integer rounds to 1.0 in any float type), and the
// term is then inv = 0; elsewhere c. So the term keeps the keys where M == 1. Expand only
// replicates M's values over the query axis. A float M is not taken (1.0001 rounds to 1 in fp16).
std::optional<AdditivePadding> inverted_float_padding(const Node* where) {
  auto c = const_scalar(where->input(1));
  Value* inv = where->input(2);
  if (!c || !(*c <= -1e30) || !inv || peel_bool_casts(where->input(0)) != inv || where->input(0) == inv) return std::nullopt;
  const Node* sub = inv->producer;
  if (!sub || !sub->is("Sub") || const_scalar(sub->input(0)) != 1.0) return std::nullopt;
  const Node* cast = sub->input(1) ? sub->input(1)->producer : nullptr;
  if (!cast || !cast->is("Cast") || !dtype_is_float(static_cast<DType>(cast->attr_int("to", 0)))) return std::nullopt;
  Value* x = cast->input(0);
  while (x && x->producer && x->producer->is("Expand")) x = x->producer->input(0);
  Value* m = x ? from_rank2(x) : nullptr;
  if (!m || !(dtype_is_integer(dtype_of(m)) || dtype_of(m) == DType::Bool)) return std::nullopt;
  // from_rank2 peels Casts to bool, which would turn "== 1" into "!= 0": only Unsqueezes here.
  for (Value* v = x; v != m; v = v->producer->input(0))
    if (!v->producer || !v->producer->is("Unsqueeze")) return std::nullopt;
  return AdditivePadding{m, *c, dtype_of(m) != DType::Bool};
}

}  // namespace

// Peels Casts to bool (Cast(x, BOOL) keeps exactly "x != 0", the mask input's meaning).
Value* peel_bool_casts(Value* v) {
  while (v && v->producer && v->producer->is("Cast") && v->producer->attr_int("to", 0) == int64_t(DType::Bool))
    v = v->producer->input(0);
  return v;
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
std::optional<AdditivePadding> additive_key_padding(Value* t) {
  Node* n = t ? t->producer : nullptr;
  if (!n) return std::nullopt;
  auto big_negative = [](std::optional<double> c) { return c && *c <= -1e30; };
  if (n->is("Where")) {
    auto zero = const_scalar(n->input(1));
    auto c = const_scalar(n->input(2));
    if (zero == 0.0 && big_negative(c) && is_bool(n->input(0)))
      if (Value* m = from_rank2(n->input(0))) return AdditivePadding{m, *c};
    if (auto one_kept = inverted_float_padding(n)) return one_kept;
    return std::nullopt;
  }
  if (!n->is("Mul")) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto c = const_scalar(n->input(1 - side));
    Node* sub = n->input(side) ? n->input(side)->producer : nullptr;
    if (!big_negative(c) || !sub || !sub->is("Sub") || const_scalar(sub->input(0)) != 1.0) continue;
    Node* cast = sub->input(1) ? sub->input(1)->producer : nullptr;
    if (!cast || !cast->is("Cast") || !is_bool(cast->input(0))) continue;
    if (Value* m = from_rank2(cast->input(0))) return AdditivePadding{m, *c};
  }
  return std::nullopt;
}

// The mask's dims are provably [B, S_kv] of the keys.
bool mask_dims_match(const Value* m, const HeadPath& k) {
  if (!m->shape || m->shape->size() != 2 || !k.src || !k.src->shape) return false;
  auto b = src_dim(k, 0);
  auto s = kv_len(k);
  // Same dim: equal values / names, or equal as expressions ("past + seq" written by an
  // exporter against the "past+seq" shape inference computes for the present keys).
  auto same = [](const Dim& x, const Dim& y) {
    if (attn::dims_same(x, y)) return true;
    auto a = SymExpr::from_dim(x), c = SymExpr::from_dim(y);
    return a && c && *a == *c;
  };
  if (!b || !same((*m->shape)[0], *b)) return false;
  if (s && same((*m->shape)[1], *s)) return true;
  auto ms = SymExpr::from_dim((*m->shape)[1]);
  for (const SymExpr& e : kv_lens(k))
    if (ms && *ms == e) return true;
  return false;
}

std::optional<BroadcastPadding> broadcast_key_padding(Value* t, int64_t heads) {
  // Head views and the head broadcast: every merge / split must use `heads`, so the flat
  // index b·heads + h of the term is the scores' (the values do not depend on h).
  for (int d = 0; d < 8 && t && t->producer; ++d) {
    Node* n = t->producer;
    if (n->is("Reshape") && merges_bh(n)) {
      if (!n->input(0)->shape || !(*n->input(0)->shape)[1].known() || (*n->input(0)->shape)[1].value != heads)
        return std::nullopt;
      t = n->input(0);
    } else if (n->is("Reshape") && splits_bh(n)) {
      if ((*n->output(0)->shape)[1].value != heads) return std::nullopt;
      t = n->input(0);
    } else if (n->is("Mul") && n->inputs.size() == 2 && (const_scalar(n->input(0)) == 1.0 || const_scalar(n->input(1)) == 1.0)) {
      // baddbmm(mask, q, kᵀ)'s beta = 1 (torch MHA with need_weights, TorchScript): x·1 is x
      // for every float, ±inf included.
      t = n->input(const_scalar(n->input(1)) == 1.0 ? 0 : 1);
    } else if (n->is("Expand")) {
      auto to = attn::const_ints(n->input(1));
      const auto& a = n->input(0)->shape;
      if (!to || to->size() != 4 || (*to)[0] != 1 || (*to)[2] != 1 || (*to)[3] != 1 || ((*to)[1] != 1 && (*to)[1] != heads) ||
          !a || a->size() != 4 || !(*a)[1].known() || (*a)[1].value != 1)
        return std::nullopt;
      t = n->input(0);
    } else {
      break;
    }
  }
  // M[:, None, None, :]: Unsqueeze (from_rank2) or a Reshape of [B, S] to [B, 1, 1, S].
  Value* w = from_rank2(t);
  if (!w && t && t->producer && t->producer->is("Reshape")) {
    Node* r = t->producer;
    const auto& a = r->input(0)->shape;
    const auto& c = r->output(0)->shape;
    // [B, S] -> [B, 1, 1, X]: the element count forces X = S, so the last dim need not be
    // proven (TorchScript writes the traced key length there: a constant against S's symbol).
    if (a && c && a->size() == 2 && c->size() == 4 && attn::dims_same((*a)[0], (*c)[0]) &&
        (*c)[1].known() && (*c)[1].value == 1 && (*c)[2].known() && (*c)[2].value == 1)
      w = r->input(0);
  }
  Node* wn = w ? w->producer : nullptr;
  if (!wn || !wn->is("Where") || !is_bool(wn->input(0)) || attn::rank_of(wn->input(0)) != 2) return std::nullopt;
  // zeros_like(mask) = Expand(0, Shape(mask)) or ConstantOfShape(Shape(mask)) (value 0 or
  // absent) is 0 everywhere.
  auto zero = [&](Value* z) {
    if (const_scalar(z) == 0.0) return true;
    Node* e = z ? z->producer : nullptr;
    if (e && e->is("ConstantOfShape")) {
      const Attribute* a = e->attr("value");  // absent: float 0
      return !a || (a->t && a->t->numel() == 1 && a->t->as_double(0) == 0.0);
    }
    return e && e->is("Expand") && const_scalar(e->input(0)) == 0.0;
  };
  auto big_negative = [](std::optional<double> c) { return c && *c <= -1e30; };
  if (zero(wn->input(2)) && big_negative(const_scalar(wn->input(1))))
    return BroadcastPadding{wn->input(0), true, *const_scalar(wn->input(1))};
  if (zero(wn->input(1)) && big_negative(const_scalar(wn->input(2))))
    return BroadcastPadding{wn->input(0), false, *const_scalar(wn->input(2))};
  return std::nullopt;
}

// ---- causal mask proofs ------------------------------------------------------------
// Both forms below equal "key j visible to query i iff j <= i" on a square [S, S]
// score matrix, which is causal=1 (bottom-right aligned: the same when S == S_kv; the
// original graph only broadcasts the [S, S] term when S_kv == S). Masked scores get
// a fill <= -1e30, so they end with probability 0 exactly like causal exclusions.

namespace {

// Entry i of a shape tensor is the query sequence length.
bool entry_is_seq(const Value* t, int i, const HeadPath& q) {
  if (!q.src) return false;
  const int dim = src_axis(q, 1);
  std::vector<const Value*> same = q.materialize ? std::vector<const Value*>{q.src} : attn::same_leading_dims(q.src);
  return attn::shape_entry_is_dim(t, i, q.src, same, dim);
}

// Entry i of a 1-D integer tensor as an expression of dims.
std::optional<SymExpr> entry_expr(const Value* t, int i) {
  auto sv = t ? symbolic_value(t) : std::nullopt;
  if (!sv || static_cast<int>(sv->size()) <= i) return std::nullopt;
  return SymExpr::from_dim((*sv)[i]);
}

bool entry_is(const Value* t, int i, int64_t v) {
  auto sv = t ? symbolic_value(t) : std::nullopt;
  return sv && static_cast<int>(sv->size()) > i && (*sv)[i].known() && (*sv)[i].value == v;
}

}  // namespace

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

// torch's SDPA is_causal decomposition (dynamo): Where(Trilu(c·ones [L, S], upper=0) == 0, fill, 0)
// with c != 0 and fill <= -1e30: fill above the diagonal, top-left aligned. With L and S both
// the query's sequence length (self-attention) top-left is bottom-right: causal = 1.
bool is_causal_tril_where(const MaskTerm& t, const HeadPath& q) {
  if (t.where || !t.v) return false;
  const Node* w = t.v->producer;
  if (!w || !w->is("Where") || w->inputs.size() != 3 || const_scalar(w->input(2)) != 0.0) return false;
  auto fill = const_scalar(w->input(1));
  if (!fill || !(*fill <= -1e30)) return false;
  const Node* eq = w->input(0) ? w->input(0)->producer : nullptr;
  if (!eq || !eq->is("Equal")) return false;
  const Value* tv = const_scalar(eq->input(1)) == 0.0 ? eq->input(0) : (const_scalar(eq->input(0)) == 0.0 ? eq->input(1) : nullptr);
  const Node* tr = tv ? tv->producer : nullptr;
  if (!tr || !tr->is("Trilu") || tr->attr_int("upper", 1) != 0 || !tr->input(0)) return false;
  auto k = tr->input(1) ? const_scalar(tr->input(1)) : std::optional<double>(0.0);
  if (!k || *k != 0.0) return false;
  const Node* ones = tr->input(0)->producer;
  const Value* shp = nullptr;
  if (ones && ones->is("Expand") && const_scalar(ones->input(0)) && *const_scalar(ones->input(0)) != 0.0) {
    shp = ones->input(1);
  } else if (ones && ones->is("ConstantOfShape")) {
    const Attribute* a = ones->attr("value");
    if (a && a->t && a->t->numel() == 1 && a->t->as_double(0) != 0.0) shp = ones->input(0);
  }
  auto sv = shp ? symbolic_value(shp) : std::nullopt;
  if (!sv || sv->size() != 2) return false;
  auto qs = src_dim(q, 1);
  for (int i = 0; i < 2; ++i)
    if (!entry_is_seq(shp, i, q) && !(qs && attn::dims_same((*sv)[i], *qs))) return false;
  return true;
}

// Where(buffer[..., :S, :S] (as bool), s, fill) or Where(buffer[..., :S, :S] == 0, fill, s)
// (nanoGPT / transformers-4 GPT-2) with `buffer` a constant lower-triangular [1, 1, N, N].
bool is_causal_buffer(const MaskTerm& t, const HeadPath& q, const HeadPath& k) {
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
  int square_axes = 0, cached_axes = 0;  // both axes one way: mixing them is top-left causal
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
      const int e = static_cast<int>(i);
      // [0, S) on both axes (S_q == S_kv), or with a KV cache (transformers 4 GPT-2:
      // bias[:, :, S_kv - S_q : S_kv, :S_kv]) rows [S_kv - S_q, S_kv) and columns [0, S_kv):
      // buffer[r][c] = c <= r is then j <= i + S_kv - S_q, causal=1's bottom-right alignment.
      const bool square = entry_is(sl->input(1), e, 0) && entry_is_seq(sl->input(2), e, q);
      auto start = entry_expr(sl->input(1), e), end = entry_expr(sl->input(2), e);
      auto sq = src_dim(q, 1);
      auto Sq = sq ? SymExpr::from_dim(*sq) : std::nullopt;
      const std::vector<SymExpr> lens = kv_lens(k);
      auto is_len = [&](const SymExpr& e) { return std::find(lens.begin(), lens.end(), e) != lens.end(); };
      bool start_ok = false;
      for (const SymExpr& skv : lens) start_ok = start_ok || (start && Sq && *start == skv - *Sq);
      const bool cached = start && end && Sq && is_len(*end) && (ax == 3 ? *start == SymExpr::constant(0) : start_ok);
      if ((ax != 2 && ax != 3) || !(square || cached) || sliced.count(ax)) return false;
      sliced.insert(ax);
      if (square) ++square_axes;
      if (cached) ++cached_axes;
    }
    c = sl->input(0);
  }
  if (sliced != std::set<int64_t>{2, 3} || (square_axes != 2 && cached_axes != 2)) return false;
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

}  // namespace fuseopt::attn
