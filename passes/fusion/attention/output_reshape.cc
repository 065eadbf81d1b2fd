// Attention fusion: the output side's last step, the root Reshape after the head transpose,
// proven to give the fused op's Y [B, S, H·Dv] (or a view of it). Split from plan.cc.
#include "passes/fusion/attention/output_reshape.h"

#include "ir/shape_inference.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

bool splits_sequence_2d(const Node* r) {
  if (!r || !r->is("Reshape") || !r->input(0) || !r->output(0)) return false;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 4 || c->size() != 5) return false;
  if (!attn::dims_same((*a)[0], (*c)[0]) || !attn::dims_same((*a)[1], (*c)[1]) || !attn::dims_same((*a)[3], (*c)[4]))
    return false;
  auto s = SymExpr::from_dim((*a)[2]), h = SymExpr::from_dim((*c)[2]), w = SymExpr::from_dim((*c)[3]);
  return s && h && w && *s == *h * *w;
}

bool splits_flat_sequence_2d(const Node* r) {
  if (!r || !r->is("Reshape") || !r->input(0) || !r->output(0)) return false;
  const auto& a = r->input(0)->shape;
  const auto& c = r->output(0)->shape;
  if (!a || !c || a->size() != 3 || c->size() != 5 || !(*c)[1].known() || !attn::dims_same((*a)[2], (*c)[4]))
    return false;
  auto x = SymExpr::from_dim((*a)[0]), b = SymExpr::from_dim((*c)[0]), hd = SymExpr::from_dim((*c)[1]);
  auto s = SymExpr::from_dim((*a)[1]), h = SymExpr::from_dim((*c)[2]), w = SymExpr::from_dim((*c)[3]);
  return x && b && hd && s && h && w && *x == *b * *hd && *s == *h * *w;
}

void check_output_reshape(Node* root, Plan& pl, int64_t H) {
  if (pl.spatial_output) {
    // Y [B, S, H·Dv] holds the root input's elements in the same order ([B, h, w, H, Dv] with
    // S = h·w row-major), so the root's own target applied to Y gives its output, unless an
    // entry is 0 (allowzero = 0: it would copy a dim of the 5-D input, not of Y).
    auto t = symbolic_value(root->input(1));
    bool ok = t.has_value();
    for (size_t i = 0; ok && i < t->size(); ++i)
      ok = !((*t)[i].known() && (*t)[i].value == 0 && root->attr_int("allowzero", 0) == 0);
    if (!ok && pl.fail.empty())
      pl.fail = "rule 7: " + root->label() + " after the windowed output transpose has a target that is not known " +
                "without 0 entries";
    pl.flat_output = ok;
    return;
  }
  // Seq-first output (torch MHA): [S, B, H, Dv] to [X, H·Dv] for the output GEMM. A rank-2
  // result whose last dim is H·Dv has X = S·B by the element count, rows in (s, b) order,
  // i.e. Transpose(Y, 1,0,2) viewed 2-D: the rewrite writes that.
  if (pl.seq_first_output) {
    auto t = symbolic_value(root->input(1));
    std::optional<Shape> out = t ? t : root->output(0)->shape;
    const bool zero_first = t && t->size() == 2 && (*t)[0].known() && (*t)[0].value == 0;
    const bool ok = out && out->size() == 2 && out->back().known() && pl.v.dim > 0 &&
                    out->back().value == H * pl.v.dim && !zero_first;
    if (!ok && pl.fail.empty())
      pl.fail = "rule 7: cannot prove that " + root->label() + " (target " + (out ? shape_str(*out) : std::string("unknown")) +
                ") merges the seq-first [S, B, H, Dv] output into [S*B, H*Dv]";
    pl.flat_output = ok;
  }
  // Output reshape: [B, H, S, Dv] -> Transpose -> [B, S, H·Dv] (or the 2-D
  // [B·S, H·Dv] view some exporters feed their output GEMM). The target's
  // entries must copy B and S (0, the same symbols, Shape(y)[i] of a value
  // with the query's leading dims, or the one -1), the last be -1 or H·Dv.
  if (!pl.seq_first_output) {
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
        // [-1, H·Dv] or [B·S, H·Dv] with B, S known (static decode exports: [2, 128] at S = 1):
        // a flat view of [B, S, H·Dv].
        auto qb = src_dim(pl.q, 0), qs = src_dim(pl.q, 1);
        const bool rows_known = (*t)[0].known() && qb && qs && qb->known() && qs->known() &&
                                (*t)[0].value == qb->value * qs->value;
        ok = last_known && ((*t)[0].symbol == "-1" || rows_known);
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
    if (!ok && t && !t->empty()) {
      // Any other view (SAM2's [B, S, H, Dv] -> [B, h, w, H·Dv], S = h·w): the root's input and
      // Y [B, S, H·Dv] hold the same elements in the same order, so the root's target applied to
      // Y gives its output, unless an entry past the first two is 0 (allowzero = 0 would copy a
      // dim of the 4-D input, H or Dv, which Y does not have there).
      ok = true;
      for (size_t i = 2; ok && i < t->size(); ++i)
        ok = !((*t)[i].known() && (*t)[i].value == 0 && root->attr_int("allowzero", 0) == 0);
      pl.flat_output = ok;
    }
    if (!ok && pl.fail.empty()) {
      std::string ts = t ? shape_str(*t) : std::string("unknown");
      pl.fail = "rule 7: cannot prove that " + root->label() + " (target " + ts + ") merges the heads into [B, S, H*Dv]";
    }
  }
}

}  // namespace fuseopt::attn
