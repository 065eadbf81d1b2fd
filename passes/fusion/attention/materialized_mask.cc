// Attention fusion: exporter-materialised boolean masks proven causal / key padding
// (see materialized_mask.h).
#include "passes/fusion/attention/materialized_mask.h"

#include <algorithm>
#include <set>
#include <vector>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {
namespace {

// ---- index tensors as affine functions of their coordinates -------------------------
// v[p] = offset + Σ coef·p[axis], each axis counted from the right (numpy broadcasting
// aligns trailing axes), `extent` the length of the Range that axis came from.
struct LinTerm {
  int64_t axis_r;
  SymExpr coef;
  SymExpr extent;
};
struct Lin {
  int64_t rank = 0;
  std::vector<LinTerm> terms;
  SymExpr offset;
};

std::vector<int64_t> axes_of(const Node* u) {
  if (u->has_attr("axes")) return u->attr_ints("axes");
  return const_ints(u->input(1)).value_or(std::vector<int64_t>{});
}

// A one-element integer value as an expression of dims (constants, Shape entries).
std::optional<SymExpr> scalar_expr(const Value* v) {
  if (!v) return std::nullopt;
  if (const Tensor* t = const_of(v)) {
    if (t->numel() != 1 || !dtype_is_integer(t->dtype)) return std::nullopt;
    return SymExpr::constant(t->as_int(0));
  }
  if (auto r = rank_of(v); !r || *r > 1) return std::nullopt;
  auto sv = symbolic_value(v);
  if (!sv || sv->size() != 1) return std::nullopt;
  return SymExpr::from_dim((*sv)[0]);
}

std::optional<Lin> lin_of(const Value* v, int depth = 0) {
  if (!v || depth > 16) return std::nullopt;
  if (auto s = scalar_expr(v)) {
    Lin l;
    l.rank = rank_of(v).value_or(0);
    l.offset = *s;
    return l;
  }
  const Node* p = v->producer;
  if (!p) return std::nullopt;
  if (p->is("Range")) {
    auto start = scalar_expr(p->input(0)), limit = scalar_expr(p->input(1));
    auto delta = const_scalar(p->input(2));
    if (!start || !limit || delta != 1.0) return std::nullopt;
    Lin l;
    l.rank = 1;
    l.terms.push_back({0, SymExpr::constant(1), *limit - *start});
    l.offset = *start;
    return l;
  }
  if (p->is("Identity") || (p->is("Cast") && dtype_is_integer(static_cast<DType>(p->attr_int("to", 0))) &&
                            dtype_is_integer(dtype_of(p->input(0)))))
    return lin_of(p->input(0), depth + 1);
  if (p->is("Unsqueeze")) {
    auto x = lin_of(p->input(0), depth + 1);
    if (!x) return std::nullopt;
    const int64_t r = x->rank + static_cast<int64_t>(axes_of(p).size());
    std::set<int64_t> ins;
    for (int64_t a : axes_of(p)) ins.insert(a < 0 ? a + r : a);
    if (ins.size() != axes_of(p).size() || (!ins.empty() && (*ins.begin() < 0 || *ins.rbegin() >= r)))
      return std::nullopt;
    std::vector<int64_t> newpos;  // old left index -> new left index
    for (int64_t n = 0; n < r; ++n)
      if (!ins.count(n)) newpos.push_back(n);
    for (LinTerm& t : x->terms) t.axis_r = r - 1 - newpos[x->rank - 1 - t.axis_r];
    x->rank = r;
    return x;
  }
  if (p->is("Expand")) {  // broadcasts only: values at the term's coordinates are unchanged
    auto x = lin_of(p->input(0), depth + 1);
    auto sd = known_dims(p->input(1));
    if (!x || !sd || sd->size() != 1 || (*sd)[0] < 0) return std::nullopt;
    x->rank = std::max(x->rank, (*sd)[0]);
    return x;
  }
  if (p->is("Add") || p->is("Sub") || p->is("Mul")) {
    auto a = lin_of(p->input(0), depth + 1), b = lin_of(p->input(1), depth + 1);
    if (!a || !b) return std::nullopt;
    Lin l;
    l.rank = std::max(a->rank, b->rank);
    if (!p->is("Mul")) {  // a + b, or a - b (the sliding window's q_idx - W)
      const SymExpr sign = SymExpr::constant(p->is("Sub") ? -1 : 1);
      l.terms = a->terms;
      for (LinTerm t : b->terms) {
        for (const LinTerm& u : l.terms)
          if (u.axis_r == t.axis_r) return std::nullopt;  // same axis twice: not needed by any export
        t.coef = t.coef * sign;
        l.terms.push_back(t);
      }
      l.offset = a->offset + b->offset * sign;
      return l;
    }
    if (!a->terms.empty() && !b->terms.empty()) return std::nullopt;
    const Lin& x = a->terms.empty() ? *b : *a;
    const SymExpr c = a->terms.empty() ? a->offset : b->offset;
    l.terms = x.terms;
    for (LinTerm& t : l.terms) t.coef = t.coef * c;
    l.offset = x.offset * c;
    return l;
  }
  return std::nullopt;
}

std::optional<SymExpr> dim_expr(std::optional<Dim> d) { return d ? SymExpr::from_dim(*d) : std::nullopt; }

// l[p] == p[axis_r] + offset, the axis running over a Range of length `extent`.
bool is_axis(const std::optional<Lin>& l, int64_t axis_r, const std::optional<SymExpr>& extent, const SymExpr& offset) {
  // A length-1 axis (S_q = 1 when decoding): the index is the one value, on any axis.
  if (l && extent && l->terms.empty() && *extent == SymExpr::constant(1)) return l->offset == offset;
  return l && extent && l->terms.size() == 1 && l->terms[0].axis_r == axis_r &&
         l->terms[0].coef == SymExpr::constant(1) && l->terms[0].extent == *extent && l->offset == offset;
}

struct Dims {
  std::optional<SymExpr> B, Sq;
  std::vector<SymExpr> Skv;  // equal expressions of the keys' length (kv_lens)
  bool skv_is(const SymExpr& e) const { return std::find(Skv.begin(), Skv.end(), e) != Skv.end(); }
};

// ---- constant leaves (static-shape exports: constant folding evaluated the index math) ----

struct StaticDims {
  int64_t B, Sq, Skv;
};

// need_batch = false: B may be unknown (StaticDims::B = 0), for a table without a batch axis.
std::optional<StaticDims> static_dims(const Dims& d, bool need_batch = true) {
  auto b = d.B ? d.B->constant_value() : std::nullopt;
  auto sq = d.Sq ? d.Sq->constant_value() : std::nullopt;
  std::optional<int64_t> skv;
  for (const SymExpr& e : d.Skv)
    if (auto c = e.constant_value()) skv = c;
  if (!need_batch && (!b || *b < 1)) b = 0;
  if (!b || !sq || !skv || (need_batch && *b < 1) || *sq < 1 || *skv < 1) return std::nullopt;
  return StaticDims{*b, *sq, *skv};
}

std::string dims_str(const std::vector<int64_t>& g) {
  std::string r = "[";
  for (size_t i = 0; i < g.size(); ++i) r += (i ? "," : "") + std::to_string(g[i]);
  return r + "]";
}

// Visits each position p of a constant grid of dims g, right-aligned to the term's
// [B, 1, S_q, S_kv], as (batch b, key j). False (nothing visited) unless g spans exactly
// the B batches (a grid without a batch axis only when B == 1) and the S_kv keys.
template <class F>
bool for_grid(const std::vector<int64_t>& g, const StaticDims& sd, F&& f) {
  const size_t r = g.size();
  if (r < 2 || r > 4 || g[r - 1] != sd.Skv || (g[r - 2] != 1 && g[r - 2] != sd.Sq)) return false;
  if (r == 4 ? (g[0] != sd.B || g[1] != 1) : (sd.B != 1 || (r == 3 && g[0] != 1))) return false;
  const int64_t n = shape_numel(g);
  if (n > (int64_t{1} << 24)) return false;
  const int64_t per_batch = n / (r == 4 ? g[0] : 1);
  for (int64_t p = 0; p < n; ++p)
    if (!f(p, p / per_batch, p % sd.Skv)) return false;
  return true;
}

// Whether key j is visible to query i under causal=1 (bottom-right aligned).
bool causal_keep(int64_t i, int64_t j, const StaticDims& sd) { return j <= i + sd.Skv - sd.Sq; }

// A constant table of the [1 or B, 1, S_q, S_kv] or [S_q, S_kv] term that is, element by
// element, the bottom-right causal pattern: keep(i, j) = j <= i + S_kv - S_q, or that pattern
// under a sliding window (and q_pos - j < W, q_pos = i + S_kv - S_q: a static-shape export of
// Mistral / StarCoder2 whose length passes the window; *window = W, else 0). `additive`:
// a float term (0 = keep, fill <= -1e30 elsewhere, one fill value); otherwise a keep
// condition (nonzero = keep: a bool, or a number under a Cast to bool).
bool const_causal(const Tensor& t, const std::string& name, const Dims& d, bool additive, double* fill,
                  int64_t* window, std::string& why) {
  auto sd = static_dims(d, /*need_batch=*/false);  // a batch-wide table needs B, checked below
  const std::string what = name + ": constant " + dims_str(t.dims);
  if (!sd) {
    why = what + ": S_q and S_kv are not both known constants";
    return false;
  }
  const std::string sizes = " (S_q " + std::to_string(sd->Sq) + ", S_kv " + std::to_string(sd->Skv) + ")";
  const size_t r = t.dims.size();
  const bool shape_ok = t.dtype != DType::String && t.numel() > 0 &&
                        ((r == 2 && t.dims[0] == sd->Sq && t.dims[1] == sd->Skv) ||
                         (r == 4 && (t.dims[0] == 1 || (sd->B > 0 && t.dims[0] == sd->B)) && t.dims[1] == 1 && t.dims[2] == sd->Sq &&
                          t.dims[3] == sd->Skv));
  if (!shape_ok) {
    why = what + " is not a [1 or B, 1, S_q, S_kv] or [S_q, S_kv] table" + sizes;
    return false;
  }
  if (sd->Skv < sd->Sq) {  // rows with no visible key: not proven equal
    why = what + ": S_kv < S_q" + sizes;
    return false;
  }
  if (additive && !dtype_is_float(t.dtype)) {
    why = what + " is not a float additive mask";
    return false;
  }
  // The window the table would have: one more than the farthest key it keeps (a table with
  // keys kept beyond the diagonal fails the element check below either way).
  int64_t w = 0;
  for (int64_t p = 0; p < t.numel(); ++p) {
    const int64_t i = (p / sd->Skv) % sd->Sq, j = p % sd->Skv;
    const double v = t.as_double(p);
    if (additive ? v == 0.0 : v != 0.0) w = std::max(w, i + sd->Skv - sd->Sq - j + 1);
  }
  if (w >= sd->Skv || w < 1) w = 0;  // every causal key kept somewhere (or none at all): no window
  std::optional<double> f;
  for (int64_t p = 0; p < t.numel(); ++p) {
    const int64_t i = (p / sd->Skv) % sd->Sq, j = p % sd->Skv;
    const double v = t.as_double(p);
    const bool want = causal_keep(i, j, *sd) && (w == 0 || i + sd->Skv - sd->Sq - j < w);
    bool ok;
    if (!additive) {
      ok = (v != 0.0) == want;
    } else if (want) {
      ok = v == 0.0;
    } else {
      ok = v <= -1e30 && (!f || *f == v);
      f = v;
    }
    if (!ok) {
      why = what + " is not the bottom-right causal table" + (w ? " of a " + std::to_string(w) + "-key window" : "") +
            sizes + ": element [" + std::to_string(i) + ", " + std::to_string(j) + "] differs";
      return false;
    }
  }
  if (fill) *fill = f.value_or(-3.4028234663852886e38);
  *window = w;
  return true;
}

// ---- leaves ---------------------------------------------------------------------------

bool all_true(const Value* v, int depth = 0) {
  if (!v || depth > 4) return false;
  if (const Tensor* t = const_of(v)) {
    if (t->dtype == DType::String || t->numel() == 0) return false;
    for (int64_t i = 0; i < t->numel(); ++i)
      if (t->as_double(i) == 0.0) return false;
    return true;
  }
  const Node* p = v->producer;
  if (!p) return false;
  if (p->is("ConstantOfShape")) {
    const Attribute* a = p->attr("value");
    return a && a->t && a->t->numel() == 1 && a->t->as_double(0) != 0.0;
  }
  if (p->is("Expand") || (p->is("Cast") && p->attr_int("to", 0) == int64_t(DType::Bool)))
    return all_true(p->input(0), depth + 1);
  return false;
}

// kv_idx <= q_idx over the term's last two axes, as causal=1 (bottom-right) defines it.
bool causal_leaf(const Node* n, const Dims& d, std::string& why) {
  const Value *kv = nullptr, *q = nullptr;
  if (n->is("LessOrEqual")) kv = n->input(0), q = n->input(1);
  else if (n->is("GreaterOrEqual")) q = n->input(0), kv = n->input(1);
  else return false;
  auto lk = lin_of(kv), lq = lin_of(q);
  if (!d.Sq || d.Skv.empty()) { why = "the query/key sequence lengths are not known symbolically"; return false; }
  bool kv_ok = false, q_ok = false;
  for (const SymExpr& skv : d.Skv) {
    kv_ok = kv_ok || is_axis(lk, 0, skv, SymExpr::constant(0));
    q_ok = q_ok || is_axis(lq, 1, d.Sq, skv - *d.Sq);
  }
  if (!kv_ok) {
    why = n->label() + ": the key index is not Range(0, S_kv) along the last axis";
    return false;
  }
  if (!q_ok) {
    why = n->label() + ": the query index is not Range(S_kv - S_q, S_kv) along the query axis";
    return false;
  }
  return true;
}

// A sliding window: kv_idx > q_idx - W (Mistral, Gemma-2/3, StarCoder2, Cohere-2: transformers'
// sliding_window_overlay), i.e. key j stays visible to query i while q_pos - j < W with
// q_pos = i + S_kv - S_q as causal=1 aligns it; kv_idx >= q_idx - c is the same with W = c + 1.
// kv_idx = j (Range(0, S_kv) on the last axis), the other side q_idx - c with q_idx on the
// query axis as in causal_leaf and c a constant. W (>= 1) on success, else 0 and why.
int64_t window_leaf(const Node* n, const Dims& d, std::string& why) {
  const Value *kv = nullptr, *lower = nullptr;
  if (n->is("Greater") || n->is("GreaterOrEqual")) kv = n->input(0), lower = n->input(1);
  else if (n->is("Less") || n->is("LessOrEqual")) lower = n->input(0), kv = n->input(1);
  else return 0;
  const bool strict = n->is("Greater") || n->is("Less");
  if (!d.Sq || d.Skv.empty()) { why = "the query/key sequence lengths are not known symbolically"; return 0; }
  auto lk = lin_of(kv), ll = lin_of(lower);
  if (!ll || ll->terms.size() != 1 || ll->terms[0].axis_r != 1 || ll->terms[0].coef != SymExpr::constant(1) ||
      ll->terms[0].extent != *d.Sq) {
    why = n->label() + " (" + n->op_type + ") is not a causal or key-padding term, nor a sliding window (its lower "
          "bound is not q_idx - W on the query axis)";
    return 0;
  }
  for (const SymExpr& skv : d.Skv) {
    if (!is_axis(lk, 0, skv, SymExpr::constant(0))) continue;
    // lower = i + offset = q_pos - c with c = (S_kv - S_q) - offset, a constant.
    auto c = (skv - *d.Sq - ll->offset).constant_value();
    if (!c) continue;
    const int64_t w = strict ? *c : *c + 1;
    if (w < 1) {
      why = n->label() + ": a sliding window of " + std::to_string(w) + " keys hides every key";
      return 0;
    }
    return w;
  }
  why = n->label() + " (" + n->op_type + ") is not a sliding-window term: the key index is not Range(0, S_kv) along "
        "the last axis, or the window is not a constant";
  return 0;
}

// idx >= c (or c <= idx, idx > c) for an index idx = offset + Σ p[axis] (every coefficient
// 1, so idx >= offset) and a scalar c below the offset: always true (transformers 5's
// bidirectional mask writes kv_idx >= 0).
bool always_true_compare(const Node* n) {
  const Value *big = nullptr, *small = nullptr;
  if (n->is("GreaterOrEqual") || n->is("Greater")) big = n->input(0), small = n->input(1);
  else if (n->is("LessOrEqual") || n->is("Less")) small = n->input(0), big = n->input(1);
  else return false;
  auto a = lin_of(big), c = lin_of(small);
  if (!a || !c || !c->terms.empty() || a->terms.empty()) return false;
  for (const LinTerm& t : a->terms)
    if (t.coef != SymExpr::constant(1)) return false;
  auto sign = (a->offset - c->offset).sign();
  const bool strict = n->is("Greater") || n->is("Less");
  return sign && (strict ? *sign > 0 : *sign >= 0);
}

// M for a rank-2 M of the keys' [B, S_kv] shape (Casts to bool and no-op views peeled).
Value* key_mask(Value* m, const HeadPath& k) {
  m = peel_bool_casts(m);
  while (m && m->producer && is_passthrough(m->producer)) m = peel_bool_casts(m->producer->input(0));
  return m && rank_of(m) == 2 && mask_dims_match(m, k) ? m : nullptr;
}

// The limit of the Range(0, limit, 1) an index component comes from through Unsqueeze /
// Expand (input 0) / integer Cast / Identity (the grid's building steps), or nullptr.
Value* range_limit(Value* v) {
  for (int d = 0; d < 16 && v && v->producer; ++d) {
    const Node* p = v->producer;
    if (p->is("Range"))
      return const_scalar(p->input(0)) == 0.0 && const_scalar(p->input(2)) == 1.0 ? p->input(1) : nullptr;
    if (!(p->is("Unsqueeze") || p->is("Expand") || p->is("Identity") || p->is("Cast"))) return nullptr;
    v = p->input(0);
  }
  return nullptr;
}

// A rank-2 M whose dims the shapes do not tie to [B, S_kv] (the dynamo exporter's KV-cache steps
// give attention_mask its own symbols): GatherND at the proven (b, j) grid reads M[b, j] for
// b < B, j < S_kv whatever M's dims are (and fails where M is smaller), so M[:B, :S_kv] is the
// mask: exact wherever the original's gather is in bounds, and where it is not, the op's own
// [B, S_kv] check of the sliced mask fails as the gather did. `ends` gets the grid's Range
// limits (scalars). Not for the flat gather, whose index b·S_kv + j assumes M's row length.
Value* sliceable_key_mask(Value* m, const Node* grid, Value* (&ends)[2]) {
  m = peel_bool_casts(m);
  while (m && m->producer && is_passthrough(m->producer)) m = peel_bool_casts(m->producer->input(0));
  // A constant table gathered at (b, kv) is baked-in bias, not the caller's mask: it stays attn_bias.
  if (!m || const_of(m) || rank_of(m) != 2 || !grid || !grid->is("Concat") || grid->inputs.size() != 2) return nullptr;
  for (int i = 0; i < 2; ++i) {
    const Node* u = grid->input(i) ? grid->input(i)->producer : nullptr;
    ends[i] = u && u->is("Unsqueeze") ? range_limit(u->input(0)) : nullptr;
    if (!ends[i] || rank_of(ends[i]).value_or(-1) != 0 || !dtype_is_integer(dtype_of(ends[i]))) return nullptr;
  }
  return m;
}

// GatherND(M, Concat(b[..., None], j[..., None])) = M[b, j] over the grid.
Value* gathernd_leaf(const Node* n, const Dims& d, const HeadPath& k, std::string& why, Value* (&slice_ends)[2]) {
  if (n->attr_int("batch_dims", 0) != 0) return nullptr;
  Value* m = key_mask(n->input(0), k);
  slice_ends[0] = slice_ends[1] = nullptr;
  if (!m && n->input(1) && !const_of(n->input(1))) m = sliceable_key_mask(n->input(0), n->input(1)->producer, slice_ends);
  if (const Tensor* g = m ? const_of(n->input(1)) : nullptr) {  // a constant-folded grid
    auto sd = static_dims(d);
    std::vector<int64_t> gd = g->dims;
    const bool ok = sd && dtype_is_integer(g->dtype) && !gd.empty() && gd.back() == 2 &&
                    (gd.pop_back(), for_grid(gd, *sd, [&](int64_t p, int64_t b, int64_t j) {
                      return g->as_int(2 * p) == b && g->as_int(2 * p + 1) == j;
                    }));
    if (!ok) {
      why = n->label() + ": the constant gather indices " + dims_str(g->dims) +
            " are not the (b, j) grid over the B batches and S_kv keys";
      return nullptr;
    }
    return m;
  }
  const Node* c = n->input(1) ? n->input(1)->producer : nullptr;
  if (!m || !c || !c->is("Concat") || c->inputs.size() != 2) {
    why = n->label() + ": not a gather of the keys' [B, S_kv] mask by an index grid";
    return nullptr;
  }
  auto r = rank_of(c->output(0));
  const int64_t ax = c->attr_int("axis", 0);
  if (!(ax == -1 || (r && ax == *r - 1))) return nullptr;
  std::optional<Lin> comp[2];
  for (int i = 0; i < 2; ++i) {
    const Node* u = c->input(i) ? c->input(i)->producer : nullptr;
    if (!u || !u->is("Unsqueeze") || axes_of(u).size() != 1) return nullptr;
    auto ur = rank_of(u->output(0));
    const int64_t a = axes_of(u)[0];
    if (!(a == -1 || (ur && a == *ur - 1))) return nullptr;
    comp[i] = lin_of(u->input(0));
  }
  bool kv_ok = false;
  for (const SymExpr& skv : d.Skv) kv_ok = kv_ok || is_axis(comp[1], 0, skv, SymExpr::constant(0));
  if (!is_axis(comp[0], 3, d.B, SymExpr::constant(0)) || !kv_ok) {
    why = n->label() + ": the gather indices are not (Range(0, B) on the batch axis, Range(0, S_kv) on the key axis)";
    return nullptr;
  }
  return m;
}

// The constant-folded form of the flat gather below: Reshape(Reshape(Gather(Flatten(M, 2),
// I), [-1]), dims of I) with a constant I[p] = b·S_kv + j over the (batch, key) grid.
// nullptr with `why` empty when the gather index is not a constant.
Value* const_flat_gather(const Node* outer, const Node* inner, const Dims& d, const HeadPath& k, std::string& why) {
  const Node* g = inner && inner->is("Reshape") && inner->input(0) ? inner->input(0)->producer : nullptr;
  const Tensor* idx = g && g->is("Gather") ? const_of(g->input(1)) : nullptr;
  if (!idx) return nullptr;
  const Node* f = g->input(0) ? g->input(0)->producer : nullptr;
  Value* m = f && f->is("Flatten") && f->attr_int("axis", 1) == 2 ? key_mask(f->input(0), k) : nullptr;
  auto flat = const_ints(inner->input(1));
  auto out_dims = const_ints(outer->input(1));
  auto sd = static_dims(d);
  const bool ok = m && sd && g->attr_int("axis", 0) == 0 && flat && *flat == std::vector<int64_t>{-1} && out_dims &&
                  *out_dims == idx->dims && dtype_is_integer(idx->dtype) &&
                  for_grid(idx->dims, *sd, [&](int64_t p, int64_t b, int64_t j) { return idx->as_int(p) == b * sd->Skv + j; });
  if (!ok) why = g->label() + ": the constant flat gather " + dims_str(idx->dims) +
                 " of Flatten(M, 2) is not M[b, j] over the B batches and S_kv keys";
  return ok ? m : nullptr;
}

// Reshape(Reshape(Gather(Flatten(M, 2), idx), [-1]), Shape(idx)) with idx = b·S_kv + j:
// TorchScript's spelling of M[b, j] over the grid.
Value* flat_gather_leaf(const Node* outer, const Dims& d, const HeadPath& k, std::string& why) {
  const Node* inner = outer->input(0) ? outer->input(0)->producer : nullptr;
  const Node* sh = outer->input(1) ? outer->input(1)->producer : nullptr;
  if (sh && sh->is("Concat") && sh->inputs.size() == 1) sh = sh->input(0) ? sh->input(0)->producer : nullptr;
  if (Value* m = const_flat_gather(outer, inner, d, k, why)) return m;
  if (!why.empty()) return nullptr;
  if (!inner || !inner->is("Reshape") || !sh || !sh->is("Shape") || sh->has_attr("start") || sh->has_attr("end")) {
    why = outer->label() + ": not Reshape(Reshape(Gather(...), [-1]), Shape(index))";
    return nullptr;
  }
  auto flat = const_ints(inner->input(1));
  const Node* g = inner->input(0) ? inner->input(0)->producer : nullptr;
  if (!flat || *flat != std::vector<int64_t>{-1} || !g || !g->is("Gather") || g->attr_int("axis", 0) != 0 ||
      g->input(1) != sh->input(0)) {
    why = outer->label() + ": not the flattened gather of a mask at an index grid";
    return nullptr;
  }
  const Node* f = g->input(0) ? g->input(0)->producer : nullptr;
  Value* m = f && f->is("Flatten") && f->attr_int("axis", 1) == 2 ? key_mask(f->input(0), k) : nullptr;
  if (!m) {
    why = g->label() + ": does not gather from Flatten(M, 2) of the keys' [B, S_kv] mask";
    return nullptr;
  }
  auto idx = lin_of(g->input(1));
  auto s_kv = dim_expr(m->shape && m->shape->size() == 2 ? std::optional<Dim>((*m->shape)[1]) : std::nullopt);
  bool ok = idx && d.B && !d.Skv.empty() && s_kv && idx->terms.size() == 2 && idx->offset == SymExpr::constant(0);
  if (ok) {
    const LinTerm* tj = nullptr;
    const LinTerm* tb = nullptr;
    for (const LinTerm& t : idx->terms) (t.axis_r == 0 ? tj : tb) = &t;
    ok = tj && tb && tb->axis_r == 3 && tj->coef == SymExpr::constant(1) && d.skv_is(tj->extent) &&
         tb->coef == *s_kv && tb->extent == *d.B;
  }
  if (!ok) why = g->label() + ": the flat gather index is not b*S_kv + j over the (batch, key) grid";
  return ok ? m : nullptr;
}

// x[..., :S_kv]: a Slice of the last axis from 0 with step 1 to the keys' length (or to the
// end). It keeps the coordinates of what it reads, so a leaf below it is proven over the same
// (.., i, j) grid; the leaves themselves check that the key axis they index has extent S_kv.
bool key_prefix_slice(const Node* s, const Dims& d) {
  if (!s || !s->is("Slice")) return false;
  auto axes = s->input(3) ? const_ints(s->input(3)) : std::nullopt;
  auto starts = const_ints(s->input(1));
  auto steps = s->input(4) ? const_ints(s->input(4)) : std::optional<std::vector<int64_t>>(std::vector<int64_t>{1});
  auto end = scalar_expr(s->input(2));
  auto endc = const_ints(s->input(2));
  auto r = rank_of(s->input(0));
  if (!axes || axes->size() != 1 || !r || !((*axes)[0] == -1 || (*axes)[0] == *r - 1) || !starts ||
      *starts != std::vector<int64_t>{0} || !steps || *steps != std::vector<int64_t>{1})
    return false;
  return (endc && endc->size() == 1 && (*endc)[0] >= (int64_t{1} << 31) - 1) || (end && d.skv_is(*end));
}

// M[:, None, None, :] (Unsqueeze), possibly through a Slice of the whole key axis.
Value* unsqueezed_leaf(Value* v, const Dims& d, const HeadPath& k) {
  while (v && v->producer && v->producer->is("Slice")) {
    if (!key_prefix_slice(v->producer, d)) return nullptr;
    v = peel_bool_casts(v->producer->input(0));
  }
  Value* m = from_rank2(v);
  return m && mask_dims_match(m, k) ? m : nullptr;
}

Dims dims_of(const HeadPath& q, const HeadPath& k) {
  Dims d;
  d.B = dim_expr(src_dim(q, 0));
  d.Sq = dim_expr(src_dim(q, 1));
  d.Skv = kv_lens(k);
  return d;
}

}  // namespace

Value* peel_key_prefix_slices(Value* v, const HeadPath& q, const HeadPath& k) {
  const Dims d = dims_of(q, k);
  while (v && v->producer && key_prefix_slice(v->producer, d)) v = v->producer->input(0);
  return v;
}

std::optional<KeepProof> prove_materialized_mask(const MaskTerm& t, const HeadPath& q, const HeadPath& k,
                                                 std::string* why_out) {
  std::string why;
  auto fail = [&](std::string w) -> std::optional<KeepProof> {
    if (why_out) *why_out = std::move(w);
    return std::nullopt;
  };
  if (t.flat) return fail("a mask term on the [B*H, S, S_kv] view");
  KeepProof kp;
  const Dims d = dims_of(q, k);
  if (const Tensor* c = t.where ? nullptr : const_of(t.v)) {  // the whole additive mask folded
    if (!const_causal(*c, t.v->name, d, /*additive=*/true, &kp.fill, &kp.window, why)) return fail(why);
    kp.causal = true;
    if (why_out) why_out->clear();
    return kp;
  }
  Value* cond = nullptr;
  if (t.where) {
    if (t.inverted) return fail("an inverted Where mask");
    cond = t.v;
    kp.fill = t.fill;
  } else {
    const Node* w = t.v ? t.v->producer : nullptr;
    auto zero = w && w->is("Where") ? const_scalar(w->input(1)) : std::nullopt;
    auto fill = w && w->is("Where") ? const_scalar(w->input(2)) : std::nullopt;
    if (!zero || *zero != 0.0 || !fill) return fail("the additive term is not Where(keep, 0, fill)");
    cond = w->input(0);
    kp.fill = *fill;
  }
  // A float16 export (model.half()) masks with finfo(float16).min = -65504, which does not absorb
  // scores the way float32's lowest does: s - 65504 stays finite. Taken as the mask fill all the
  // same where the term is added in float16 (mask_filter_value -65504 replaces the score): every
  // row with a visible key gives what the graph gives (exp(s - 65504 - max) is 0 in fp32 for any
  // score fp16 can hold), and a row with none is uniform over its keys, as the float32 export of
  // the same model gives, where the graph's own fp16 sum rounds s - 65504 to a grid of 32 or to
  // -inf (no defined answer to keep). Anything else finite is a bias, not a mask.
  const bool half_lowest = !t.where && dtype_of(t.v) == DType::Float16 && kp.fill == -65504.0;
  if (!(kp.fill <= -1e30) && !half_lowest)
    return fail("the mask fill " + std::to_string(kp.fill) + " is not <= -1e30" +
                (dtype_of(t.v) == DType::Float16 && !t.where ? " nor float16's lowest (-65504)" : ""));
  if (dtype_of(cond) != DType::Bool) return fail("the keep condition is not bool");
  if (auto r = rank_of(t.v); r && *r > 4) return fail("the mask term has rank > 4");
  // Walk the And tree (Expand / Cast to bool only broadcast or re-type it).
  std::vector<Value*> todo = {cond};
  int leaves = 0;
  while (!todo.empty()) {
    Value* v = peel_bool_casts(todo.back());
    todo.pop_back();
    if (++leaves > 16) return fail("the keep condition has too many terms");
    const Node* n = v ? v->producer : nullptr;
    if (n && n->is("And")) {
      todo.push_back(n->input(0));
      todo.push_back(n->input(1));
      continue;
    }
    if (n && n->is("Expand")) {
      todo.push_back(n->input(0));
      continue;
    }
    // transformers 4.x's SDPA path: keep[:, :, :, :key.shape[-2]] of the whole combined mask.
    if (n && n->is("Slice") && !unsqueezed_leaf(v, d, k) && key_prefix_slice(n, d)) {
      todo.push_back(n->input(0));
      continue;
    }
    if (all_true(v) || (n && always_true_compare(n))) continue;
    if (const Tensor* c = v ? const_of(v) : nullptr) {  // a constant-folded causal term
      int64_t w = 0;
      if (!const_causal(*c, v->name, d, /*additive=*/false, nullptr, &w, why)) return fail(why);
      if (w && kp.window && kp.window != w) return fail("two different sliding windows");
      if (w) kp.window = w;
      kp.causal = true;
      continue;
    }
    if (!n) return fail("'" + (v ? v->name : std::string("?")) + "' is not a proven mask term");
    if (n->is("LessOrEqual") || n->is("GreaterOrEqual") || n->is("Less") || n->is("Greater")) {
      std::string causal_why;
      if ((n->is("LessOrEqual") || n->is("GreaterOrEqual")) && causal_leaf(n, d, causal_why)) {
        kp.causal = true;
        continue;
      }
      const int64_t w = window_leaf(n, d, why);
      if (w == 0) return fail(causal_why.empty() ? why : causal_why + "; " + why);
      if (kp.window && kp.window != w) return fail("two different sliding windows");
      kp.window = w;
      continue;
    }
    Value* m = nullptr;
    Value* ends[2] = {nullptr, nullptr};
    if (n->is("GatherND")) m = gathernd_leaf(n, d, k, why, ends);
    else if (n->is("Reshape")) m = flat_gather_leaf(n, d, k, why);
    else if (n->is("Unsqueeze") || n->is("Slice")) m = unsqueezed_leaf(v, d, k);
    if (!m) return fail(why.empty() ? n->label() + " (" + n->op_type + ") is not a causal or key-padding term" : why);
    if (kp.padding && kp.padding != m) return fail("two different key-padding masks");
    kp.padding = m;
    kp.slice_ends[0] = ends[0];
    kp.slice_ends[1] = ends[1];
  }
  if (why_out) why_out->clear();
  return kp;
}

}  // namespace fuseopt::attn
