// Attention fusion, part 4: the rewrite. Builds fuseopt.Attention from a Plan,
// re-lays Q/K/V that are not already [B, S, heads·D], combines mask terms into
// one attn_bias, and rewires Shape readers of values the fused op no longer
// produces (TorchScript computes reshape targets from them) to free views of
// the fused output. Every change goes through the Rewriter.
#include "passes/fusion/attention/rewrite.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "passes/fusion/attention/head_scale.h"
#include "passes/fusion/attention/window_view.h"
#include "passes/fusion/attention_util.h"
#include "util/error.h"

namespace fuseopt::attn {

// [B, heads, S, D] (or [B, S, heads, D]) -> [B, S, heads·D] outside the fused op.
Value* materialize(Rewriter& rw, const HeadPath& hp) {
  Value* v = hp.src;
  if (hp.seq_first)  // [S, B, heads·D] (torch MHA) -> [B, S, heads·D]
    return rw.create_node("", "Transpose", {v}, {Attribute::make_ints("perm", {1, 0, 2})}, 1, "attn_batch_first")->output(0);
  if (hp.unit_axis >= 0)  // [B, S, W] with a size-1 axis: drop it (opset >= 13: axes as input)
    return rw.create_node("", "Squeeze", {v, rw.add_int64s("attn_unit_axis", {hp.unit_axis})}, {}, 1, "attn_unit_squeeze")
        ->output(0);
  if (hp.to_bshd != Perm{0, 1, 2, 3})
    v = rw.create_node("", "Transpose", {v}, {Attribute::make_ints("perm", hp.to_bshd)}, 1, "attn_heads_back")->output(0);
  // heads·D written out where known: next to a batch of 0 ONNX refuses a -1 (the
  // product of the other dims is 0; mutate_models.py seed 5 m287 in the function body).
  const int64_t width = hp.heads > 0 && hp.dim > 0 ? hp.heads * hp.dim : -1;
  return rw.create_node("", "Reshape", {v, rw.add_int64s("attn_merge_shape", {0, 0, width})}, {}, 1, "attn_heads_merge")
      ->output(0);
}

Value* sliced_mask(Rewriter& rw, Value* mask, Value* const ends_in[2]) {
  if (!mask || !ends_in[0]) return mask;
  // mask[:B, :S_kv] (materialized_mask.h): the grid's Range limits as the Slice's ends.
  std::vector<Value*> ends;
  for (int i = 0; i < 2; ++i) {
    Value* e = ends_in[i];
    if (dtype_of(e) != DType::Int64)
      e = rw.create_node("", "Cast", {e}, {Attribute::make_int("to", static_cast<int64_t>(DType::Int64))}, 1,
                         "attn_mask_end64")->output(0);
    ends.push_back(rw.create_node("", "Reshape", {e, rw.add_int64s("attn_mask_end_shape", {1})}, {}, 1,
                                  "attn_mask_end")->output(0));
  }
  Value* ev = rw.create_node("", "Concat", ends, {Attribute::make_int("axis", 0)}, 1, "attn_mask_ends")->output(0);
  return rw.create_node("", "Slice", {mask, rw.add_int64s("attn_mask_starts", {0, 0}), ev,
                                      rw.add_int64s("attn_mask_axes", {0, 1})},
                        {}, 1, "attn_mask_slice")->output(0);
}

namespace {

// A mask term added to the [B·H, S, S_kv] view, as [B, H, ...]: Reshape to [-1, H] + its trailing dims.
Value* lift_flat(Rewriter& rw, Value* t, int64_t heads) {
  Value* shp = rw.create_node("", "Shape", {t}, {}, 1, "attn_bias_shape")->output(0);
  Value* tail = rw.create_node("", "Slice", {shp, rw.add_int64s("attn_one", {1}), rw.add_int64s("attn_end", {INT64_MAX})},
                               {}, 1, "attn_bias_tail")->output(0);
  Value* target = rw.create_node("", "Concat", {rw.add_int64s("attn_bh", {-1, heads}), tail},
                                 {Attribute::make_int("axis", 0)}, 1, "attn_bias_target")->output(0);
  return rw.create_node("", "Reshape", {t, target}, {}, 1, "attn_bias_lift")->output(0);
}

}  // namespace

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

// Scores / probabilities ([B, H, S, S_kv], or [B·H, S, S_kv] in bmm-style exports) whose
// only readers outside the match are Shape nodes (TorchScript reshape targets): their
// shapes are rebuilt from the fused op's inputs and output in rewrite().
std::vector<Value*> score_values_read_for_shape(const Match& m) {
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

void rewrite_attention(const Match& m, Plan& pl, Rewriter& rw, const std::string& pattern) {
  std::vector<Value*> in(7, nullptr);
  if (pl.split) {
    in[0] = pl.split->input(0);
  } else if (pl.packed_seq_first) {  // [S, B, 3E] -> the packed [B, S, 3E] input
    in[0] = rw.create_node("", "Transpose", {pl.packed_seq_first}, {Attribute::make_ints("perm", {1, 0, 2})}, 1,
                           "attn_batch_first")->output(0);
  } else {
    in[0] = pl.q.materialize ? materialize(rw, pl.q) : pl.q.src;
    in[1] = pl.k.materialize ? materialize(rw, pl.k) : pl.k.src;
    in[2] = pl.v.materialize ? materialize(rw, pl.v) : pl.v.src;
  }
  if (pl.head_scale) in[0] = apply_head_scale(rw, pl, in[0]);  // a per-head factor onto Q
  // Terms added on Swin's [B', nW, H, S, S] window view are tiled to [B'·nW, ·, S, S] (window_view.h).
  for (MaskTerm& t : pl.terms) {
    if (!t.batch_windows) continue;
    Value* tiled = tile_window_term(rw, t.v, t.batch_windows, in[0]);
    FUSE_CHECK(tiled, "window term checked in analyze()");
    for (Value*& b : pl.add_bias)
      if (b == t.v) b = tiled;
    t.v = tiled;
    t.batch_windows = 0;
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
  // Additive terms added before (part of) the scale are carried scaled: (s + m)·c = s·c + m·c.
  const DType bias_dt = dtype_of(in[0]) == DType::Undefined ? DType::Float : dtype_of(in[0]);
  for (MaskTerm& t : pl.terms) {
    if (t.where || t.factor == 1.0) continue;
    Value* sv = rw.create_node("", "Mul", {t.v, rw.add_scalar("attn_mask_scale", bias_dt, t.factor)}, {}, 1,
                               "attn_bias_scaled")->output(0);
    for (Value*& b : pl.add_bias)
      if (b == t.v) b = sv;
    t.v = sv;
    t.factor = 1.0;
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
  Value* mask = sliced_mask(rw, pl.mask, pl.mask_slice_ends);
  if (mask && pl.mask_keep_is_one)  // the term kept keys where the mask is 1, not where it is nonzero
    mask = rw.create_node("", "Equal", {mask, rw.add_scalar("attn_mask_one", dtype_of(mask), 1.0)}, {}, 1, "attn_keep")
               ->output(0);
  in[3] = mask && pl.mask_inverted ? rw.create_node("", "Not", {mask}, {}, 1, "attn_keep")->output(0) : mask;
  in[4] = ab;
  in[5] = pl.k.past;  // KV cache: past_key / past_value ([B, Hkv, S_past, D], as the graph has them)
  in[6] = pl.v.past;
  if (!pl.sink_values.empty())  // the proven per-head sink logits (sinks.h), as float32 [H]
    in.push_back(rw.add_constant("attn_sinks", Tensor::from_floats(pl.sink_values, {pl.num_heads})));
  while (!in.empty() && !in.back()) in.pop_back();
  float fill = (pl.keep && !pl.combined) || pl.mask ? static_cast<float>(pl.fill) : -std::numeric_limits<float>::max();
  std::vector<Attribute> attrs = {
      Attribute::make_int("num_heads", pl.num_heads), Attribute::make_int("kv_num_heads", pl.kv_heads),
      Attribute::make_float("scale", static_cast<float>(pl.scale)), Attribute::make_int("causal", pl.causal ? 1 : 0),
      Attribute::make_float("mask_filter_value", fill)};
  // torch SDPA's guard Where(IsNaN(P), 0, P) is folded into the op: a row with no visible
  // key gives 0 (docs/fused_ops.md), which the kernels do in their 1/l step for free.
  if (pl.nan_to_zero) attrs.push_back(Attribute::make_int("masked_rows_zero", 1));
  if (pl.softcap > 0) attrs.push_back(Attribute::make_float("softcap", static_cast<float>(pl.softcap)));
  if (pl.window > 0) attrs.push_back(Attribute::make_int("window", pl.window));
  const bool cache = pl.k.present != nullptr;
  // Shape(present) readers (e.g. a causal mask sized from the cache) read the same shape
  // built from the inputs instead: [B, Hkv, S_past + S_new, D] = past's with S_new added.
  // Slices [a, b) of Shape(past) and the total length [S_past + S_new] (1-element int64 tensors).
  auto past_dims = [&](const HeadPath& hp, int64_t a, int64_t b) {
    Value* ps = rw.create_node("", "Shape", {hp.past}, {}, 1, "attn_past_shape")->output(0);
    return rw.create_node("", "Slice", {ps, rw.add_int64s("attn_s", {a}), rw.add_int64s("attn_e", {b})}, {}, 1,
                          "attn_past_dims")->output(0);
  };
  auto total_len = [&](const HeadPath& hp) {
    const int64_t sa = src_axis(hp, 1);
    Value* ns = rw.create_node("", "Shape", {hp.src}, {Attribute::make_int("start", sa), Attribute::make_int("end", sa + 1)},
                               1, "attn_new_len")->output(0);
    return rw.create_node("", "Add", {past_dims(hp, 2, 3), ns}, {}, 1, "attn_total_len")->output(0);
  };
  // Replaces Shape node c (reading a rank-r value) by `full` or the part its start/end attributes select.
  auto replace_shape = [&](Node* c, Value* full, int64_t r) {
    Value* out = full;
    if (c->has_attr("start") || c->has_attr("end")) {
      int64_t a = c->attr_int("start", 0), b = c->attr_int("end", r);
      a = std::clamp(a < 0 ? a + r : a, int64_t{0}, r);
      b = std::clamp(b < 0 ? b + r : b, int64_t{0}, r);
      out = rw.create_node("", "Slice", {full, rw.add_int64s("attn_s", {a}), rw.add_int64s("attn_e", {std::max(a, b)})},
                           {}, 1, "attn_shape_part")->output(0);
    }
    rw.replace_all_uses(c->output(0), out);
    rw.erase_node(c);
  };
  for (const HeadPath* hp : {&pl.k, &pl.v}) {
    if (!cache) break;
    std::vector<Node*> readers;
    for (Node* c : hp->present->consumers())
      if (c->is("Shape")) readers.push_back(c);
    if (readers.empty()) continue;
    Value* full = rw.create_node("", "Concat", {past_dims(*hp, 0, 2), total_len(*hp), past_dims(*hp, 3, 4)},
                                 {Attribute::make_int("axis", 0)}, 1, "attn_present_shape")->output(0);
    for (Node* c : readers) replace_shape(c, full, 4);
  }
  // Shape readers of values between the cache Concat and the core (plan.h, PathShape): the
  // same shape built from constants, the batch and the total length.
  for (Node* c : pl.path_shape_reads) {
    const auto ps = path_shape(pl, c->input(0));
    if (!ps) continue;  // analyze() proved it; the graph has not changed since
    std::vector<Value*> parts;
    for (const auto& [what, value] : ps->dims) {
      switch (what) {
        case PathShape::Part::Const: parts.push_back(rw.add_int64s("attn_dim", {value})); break;
        case PathShape::Part::Batch: parts.push_back(past_dims(*ps->hp, 0, 1)); break;
        case PathShape::Part::KvLen: parts.push_back(total_len(*ps->hp)); break;
        case PathShape::Part::BatchTimes:
          parts.push_back(rw.create_node("", "Mul", {past_dims(*ps->hp, 0, 1), rw.add_int64s("attn_heads", {value})}, {},
                                         1, "attn_batch_heads")->output(0));
          break;
      }
    }
    Value* full = rw.create_node("", "Concat", parts, {Attribute::make_int("axis", 0)}, 1, "attn_path_shape")->output(0);
    replace_shape(c, full, static_cast<int64_t>(ps->dims.size()));
  }
  Node* f = rw.create_node("fuseopt", "Attention", in, attrs, cache ? 3 : 1, "Attention");
  if (cache) {
    rw.set_type(f->output(1), pl.k.present->dtype, pl.k.present->shape);
    rw.set_type(f->output(2), pl.v.present->dtype, pl.v.present->shape);
  }
  Value* out = f->output(0);
  if (pl.seq_first_output)  // [B, S, H·Dv] -> [S, B, H·Dv]: the rows of the seq-first 2-D view
    out = rw.create_node("", "Transpose", {out}, {Attribute::make_ints("perm", {1, 0, 2})}, 1, "attn_seq_first")->output(0);
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
    // The keys' length: dim 1 of the key input, or dim 2 of the present keys with a cache.
    Value* kshape = rw.create_node("", "Shape", {cache ? f->output(1) : in.size() > 1 && in[1] ? in[1] : in[0]}, {}, 1,
                                   "attn_k_shape")->output(0);
    auto dim = [&](Value* shp, int64_t i) {
      return rw.create_node("", "Slice", {shp, rw.add_int64s("attn_s", {i}), rw.add_int64s("attn_e", {i + 1})}, {}, 1,
                            "attn_dim")->output(0);
    };
    Value* h = rw.add_int64s("attn_h", {pl.num_heads});
    std::vector<Value*> parts;
    const int64_t kd = cache ? 2 : 1;
    if (attn::rank_of(sv) == 4) parts = {dim(yshape, 0), h, dim(yshape, 1), dim(kshape, kd)};
    else parts = {rw.create_node("", "Mul", {dim(yshape, 0), h}, {}, 1, "attn_bh")->output(0), dim(yshape, 1), dim(kshape, kd)};
    Value* full = rw.create_node("", "Concat", parts, {Attribute::make_int("axis", 0)}, 1, "attn_scores_shape")->output(0);
    std::vector<Node*> readers;
    for (Node* c : sv->consumers())
      if (c->is("Shape")) readers.push_back(c);
    for (Node* c : readers) replace_shape(c, full, static_cast<int64_t>(parts.size()));
  }
  std::vector<Node*> walked;
  for (HeadPath* hp : {&pl.q, &pl.k, &pl.v}) walked.insert(walked.end(), hp->nodes.begin(), hp->nodes.end());
  rw.replace_match(m, f, pattern, {{m.root->output(0), out}});
  // The cache Concats' outputs (the model's present outputs) are the op's present outputs.
  if (cache) {
    rw.replace_all_uses(pl.k.present, f->output(1));
    rw.replace_all_uses(pl.v.present, f->output(2));
  }
  rw.erase_dead(walked);
  if (pl.split) rw.erase_dead({pl.split});
  if (pl.packed_seq_first) {  // the q/k/v Gathers and the unbind chain above them (now unread)
    std::vector<Node*> chain;
    for (const HeadPath* hp : {&pl.q, &pl.k, &pl.v})
      if (hp->src && hp->src->producer) chain.push_back(hp->src->producer);
    for (Node* n = chain.empty() ? nullptr : chain[0]; n && n->input(0) && n->input(0) != pl.packed_seq_first;) {
      n = n->input(0)->producer;
      if (n) chain.push_back(n);
    }
    rw.erase_dead(chain);
  }
}

}  // namespace fuseopt::attn
