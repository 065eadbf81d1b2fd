// Attention fusion: attention sinks (see sinks.h).
#include "passes/fusion/attention/sinks.h"

#include <limits>
#include <optional>
#include <vector>

#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

namespace {

// The axes a reduction reads (the `axes` input from opset 18, the attribute before).
std::optional<std::vector<int64_t>> reduce_axes(const Node* n) {
  if (n->has_attr("axes")) return n->attr_ints("axes");
  if (n->inputs.size() > 1 && n->input(1)) return const_ints(n->input(1));
  return std::nullopt;
}

bool is_last_axis(int64_t axis, std::optional<int64_t> rank) { return axis == -1 || (rank && axis == *rank - 1); }

// Reshape / Unsqueeze / Squeeze / Flatten keep the flat element order: the constant under
// them is the broadcast source's data in order.
const Tensor* const_through_views(const Value* v) {
  for (int d = 0; d < 4 && v; ++d) {
    if (const Tensor* t = const_of(v)) return t;
    const Node* p = v->producer;
    if (!p || p->inputs.empty() ||
        !(p->is("Reshape") || p->is("Unsqueeze") || p->is("Squeeze") || p->is("Flatten") || is_passthrough(p)))
      return nullptr;
    v = p->input(0);
  }
  return nullptr;
}

// The sink column x ([B, H, S_q, 1]) as H per-head logits: x is Expand / Tile of a source
// whose static shape, right-aligned to rank 4, is [1, Hs, 1, 1] (Hs = H, or 1: one logit for
// every head) and whose data is a constant. "" on success, else why not.
std::string sink_logits(const Value* x, int64_t H, std::vector<float>& out) {
  if (rank_of(x) != 4) return "the sink column is not a rank-4 [B, H, S_q, 1] tensor";
  if (!x->shape || !x->shape->back().known() || x->shape->back().value != 1)
    return "the sink column '" + x->name + "' is not provably one column wide";
  const Value* src = x;
  for (int d = 0; d < 6 && src->producer; ++d) {
    const Node* p = src->producer;
    if (p->is("Expand") && p->input(0)) {
      src = p->input(0);
      continue;
    }
    if (p->is("Tile") && p->inputs.size() == 2 && p->input(0)) {
      // Rank kept; repeating the head axis would give head h the logit of h mod Hs, unless
      // the input has one head (Hs = 1: one logit for every head either way).
      const Value* in = p->input(0);
      const auto reps = const_ints(p->input(1));
      const auto r = rank_of(in);
      if (!reps || !r || static_cast<int64_t>(reps->size()) != *r) return p->label() + " has unknown repeats";
      if (*r >= 3 && (*reps)[*r - 3] != 1) {
        const size_t h_axis = static_cast<size_t>(*r - 3);
        const Tensor* c = const_of(in);
        const bool one_head = c ? c->dims[h_axis] == 1
                                : in->shape && (*in->shape)[h_axis].known() && (*in->shape)[h_axis].value == 1;
        if (!one_head) return p->label() + " repeats the head axis";
      }
      src = p->input(0);
      continue;
    }
    if (is_passthrough(p) && p->input(0)) {
      src = p->input(0);
      continue;
    }
    break;
  }
  if (!src->shape && !const_of(src)) return "the sink source '" + src->name + "' has no known shape";
  std::vector<int64_t> dims;
  if (const Tensor* t = const_of(src)) {
    dims = t->dims;
  } else {
    for (const Dim& d : *src->shape) {
      if (!d.known()) return "the sink source '" + src->name + "' has a dynamic shape";
      dims.push_back(d.value);
    }
  }
  if (dims.size() > 4) return "the sink source '" + src->name + "' has rank > 4";
  int64_t heads = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const size_t aligned = i + (4 - dims.size());  // Expand and Tile broadcast right-aligned
    if (aligned == 1) {
      heads = dims[i];
    } else if (dims[i] != 1) {
      static const char* kAxis[] = {"batch", "heads", "query", "key"};
      return "the sink source '" + src->name + "' varies along the " + kAxis[aligned] +
             " axis: a sink is one logit per head";
    }
  }
  if (heads != H && heads != 1)
    return "the sink source '" + src->name + "' has " + std::to_string(heads) + " heads, the attention " +
           std::to_string(H);
  const Tensor* t = const_through_views(src);
  if (!t) return "the sink logits '" + src->name + "' are not a constant";
  if (!dtype_is_float(t->dtype)) return "the sink logits '" + src->name + "' are not float";
  if (t->numel() != heads) return "the sink logits '" + src->name + "' have " + std::to_string(t->numel()) + " values";
  out.clear();
  for (int64_t h = 0; h < H; ++h) out.push_back(static_cast<float>(t->as_double(heads == 1 ? 0 : h)));
  return "";
}

// Slice of the last axis keeping [0, S_kv) of the S_kv + 1 columns: "" or why not.
std::string slice_drops_sink(const Node* sl, const Value* scores) {
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (sl->has_attr("starts")) {  // Slice-1: bounds as attributes
    starts = sl->attr_ints("starts");
    ends = sl->attr_ints("ends");
    if (sl->has_attr("axes")) axes = sl->attr_ints("axes");
  } else {
    if (sl->inputs.size() < 3) return sl->label() + " has no starts/ends";
    starts = const_ints(sl->input(1));
    ends = const_ints(sl->input(2));
    if (sl->inputs.size() > 3 && sl->input(3)) axes = const_ints(sl->input(3));
    if (sl->inputs.size() > 4 && sl->input(4)) steps = const_ints(sl->input(4));
    if (sl->inputs.size() > 3 && sl->input(3) && !axes) return sl->label() + " has non-constant axes";
    if (sl->inputs.size() > 4 && sl->input(4) && !steps) return sl->label() + " has non-constant steps";
  }
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1)
    return sl->label() + " does not slice one axis with constant bounds";
  const int64_t axis = axes ? (axes->size() == 1 ? (*axes)[0] : -2) : 0;
  if (!is_last_axis(axis, rank_of(sl->input(0)))) return sl->label() + " does not slice the key axis";
  if (steps && (steps->size() != 1 || (*steps)[0] != 1)) return sl->label() + " has a step other than 1";
  if ((*starts)[0] != 0) return sl->label() + " drops leading score columns (start " + std::to_string((*starts)[0]) + ")";
  const int64_t end = (*ends)[0];
  if (end == -1) return "";  // every column but the last: the one-column-wide sink
  const Dim* skv = scores && scores->shape && !scores->shape->empty() ? &scores->shape->back() : nullptr;
  if (skv && skv->known() && end == skv->value) return "";
  if (end >= (int64_t(1) << 62) || end == 0 || (skv && skv->known() && end > skv->value))
    return sl->label() + " keeps the sink column (end " + std::to_string(end) + ")";
  return sl->label() + " does not keep exactly the S_kv score columns (end " + std::to_string(end) + ")";
}

}  // namespace

bool take_sink_slice(Node* n, Plan& pl) {
  if (!n->is("Slice") || pl.sink_slice || n->inputs.empty() || !n->input(0)) return false;
  pl.sink_slice = n;
  pl.core.push_back(n);
  return true;
}

Value* take_sink_prefix(Plan& pl) {
  Value* s = pl.softmax->input(0);
  const int64_t sm_rank = rank_of(s).value_or(-1);
  // combined - max(combined, -1, keepdim): Softmax subtracts the row max itself.
  if (Node* sub = s ? s->producer : nullptr; sub && sub->is("Sub") && sub->inputs.size() == 2 && sub->input(1)) {
    Node* mx = sub->input(1)->producer;
    if (mx && mx->is("ReduceMax") && !mx->inputs.empty() && mx->input(0) == sub->input(0)) {
      const auto axes = reduce_axes(mx);
      if ((!axes || axes->size() != 1 || !is_last_axis((*axes)[0], sm_rank) || mx->attr_int("keepdims", 1) != 1) &&
          pl.fail.empty())
        pl.fail = "rule 7: " + sub->label() + " subtracts " + mx->label() +
                  ", which is not the row max over the key axis with keepdims";
      pl.sink_max = mx;
      pl.core.push_back(sub);
      pl.core.push_back(mx);
      s = sub->input(0);
    }
  }
  Node* cat = s ? s->producer : nullptr;
  if (!cat || !cat->is("Concat") || cat->inputs.empty() || !cat->input(0)) return s;
  if (cat->inputs.size() == 1) return s;  // a one-input Concat is a passthrough (the chain walks it)
  pl.sink_concat = cat;
  pl.core.push_back(cat);
  const int64_t axis = cat->attr_int("axis", 0);
  // cat([sinks, scores]): the walk goes on through the scores so the report names the reason.
  const bool sink_first = cat->inputs.size() == 2 && cat->input(1) && !const_through_views(cat->input(1)) &&
                          cat->input(0)->producer &&
                          (cat->input(0)->producer->is("Expand") || cat->input(0)->producer->is("Tile")) &&
                          !(cat->input(1)->producer && (cat->input(1)->producer->is("Expand") ||
                                                        cat->input(1)->producer->is("Tile")));
  if (pl.fail.empty()) {
    if (!is_last_axis(axis, rank_of(cat->output(0))))
      pl.fail = "rule 7: " + cat->label() + " concatenates the scores on axis " + std::to_string(axis) +
                ", not a sink column on the key axis";
    else if (cat->inputs.size() != 2 || !cat->input(1))
      pl.fail = "rule 7: " + cat->label() + " appends " + std::to_string(cat->inputs.size() - 1) +
                " tensors to the scores; a sink is one column";
    else if (sink_first)
      pl.fail = "rule 7: " + cat->label() + " puts the sink column first; the op's sink follows the scores";
  }
  return sink_first ? cat->input(1) : cat->input(0);
}

void check_sinks(Plan& pl) {
  if (!pl.fail.empty() || (!pl.sink_slice && !pl.sink_concat)) return;
  if (!pl.sink_concat) {
    pl.fail = "rule 7: P is " + pl.sink_slice->label() + " of the Softmax, whose input is not Concat(scores, sinks)";
    return;
  }
  if (!pl.sink_slice) {
    pl.fail = "rule 7: the Softmax normalises " + pl.sink_concat->label() +
              " (scores and a sink column), but P·V reads every column: the sink's probability is not sliced off";
    return;
  }
  if (pl.sink_slice->input(0) != pl.softmax->output(0) &&
      !(pl.down_cast && pl.sink_slice->input(0) == pl.down_cast->output(0))) {
    pl.fail = "rule 7: " + pl.sink_slice->label() + " does not slice the Softmax's probabilities";
    return;
  }
  // The rewrite rebuilds a Shape read of the scores or P as [B, H, S_q, S_kv]; between the Concat
  // and the Slice they are S_kv + 1 wide, so such a reader cannot be served.
  for (const Node* n : pl.core) {
    if (n != pl.sink_concat && n != pl.softmax && !(n->is("Sub") && n->input(0) == pl.sink_concat->output(0))) continue;
    for (const Node* c : n->output(0)->consumers())
      if (c->is("Shape")) {
        pl.fail = "rule 1: " + c->label() + " reads the shape of " + n->label() + ", which includes the sink column";
        return;
      }
  }
  const Value* scores = pl.sink_concat->input(0);
  const Value* col = pl.sink_concat->input(1);
  if (std::string why = sink_logits(col, pl.num_heads, pl.sink_values); !why.empty()) {
    pl.sink_values.clear();
    pl.fail = "rule 7: " + pl.sink_concat->label() + ": " + why;
    return;
  }
  if (dtype_of(col) != DType::Undefined && dtype_of(scores) != DType::Undefined && dtype_of(col) != dtype_of(scores)) {
    pl.sink_values.clear();
    pl.fail = "rule 5: the sink column '" + col->name + "' is " + dtype_name(dtype_of(col)) + ", the scores " +
              dtype_name(dtype_of(scores));
    return;
  }
  if (std::string why = slice_drops_sink(pl.sink_slice, scores); !why.empty()) {
    pl.sink_values.clear();
    pl.fail = "rule 7: " + why;
  }
}

}  // namespace fuseopt::attn
