// Rotary position embeddings (RoPE) => fuseopt.RotaryEmbedding(X, cos, sin)
//
//   half-split (HF rotate_half: Llama, Mistral, Qwen, Gemma, NeoX, Phi, StableLM, Falcon, ModernBERT):
//     rot = Concat(Neg(xr[..., h:R]), xr[..., :h])              h = R/2
//   interleaved (GPT-J rotate_every_two, RoFormer):
//     rot = Reshape(Concat(Unsqueeze(Neg(xr[..., 1::2]), -1), Unsqueeze(xr[..., 0::2], -1)), xr's shape)
//   y   = Add(Mul(xr, C), Mul(rot, S))
//   partial rotary (NeoX, Phi, StableLM, GPT-J):  xr = x[..., :R],  root = Concat(y, x[..., R:])
//
// x is [B, H, S, D] (rotary after the head transpose) or [B, S, H, D] (GPT-J:
// before it; the op then takes the 3-D [B, S, H·D] view with num_heads and
// its output is viewed back). A head-transposed x = Transpose(0,2,1,3)(y) is
// read the same way from y, its output going back through Reshape + Transpose:
// the plain head-split Q/K the Attention pass takes without re-layout copies.
// The caches the op takes are [B or 1, S, R/2]:
//   half-split: C is f(Concat(a, a)) on the last axis, f a chain of
//     elementwise ops (Cos/Sin, Cast, Mul/Div/Add/Sub by a scalar constant)
//     seen through Unsqueezes: its two halves are equal by construction, and
//     f(a) is the half the op needs. f(a) is built once per model (the same
//     nodes are reused by every layer) -- Cos/Sin of the half, not per layer.
//     A constant C (folded by const_fold for static shapes) is checked
//     element by element and its first half is the cache.
//   interleaved: C is repeat_interleave(c, 2) on the last axis
//     (Reshape(Concat(u, u) | Expand(u, ..2) | Tile(u, 1..2)), u = Unsqueeze(c, last)):
//     c is the cache.
//   Unit head axes are squeezed away (and a missing batch axis added) once per model.
//
// Legality (DESIGN.md rules, rotary reading):
//   1. interior values (slices, Neg, Concat, the Muls) read only inside the match.
//   2. cos/sin are provably the matching halves (the forms above), with the same cache shape.
//   3. the Muls by cos/sin broadcast over heads only (and over batch when C's batch is 1);
//      S and R/2 of the caches are x's.
//   4. the Slices split the last axis exactly at h and R (interleaved: start 0/1, step 2),
//      the Neg is on the second half (odd elements), rotate_half concatenates -x2 first;
//      partial: x[..., R:] concatenated back unchanged, after the rotated part.
//   5. x, cos and sin have one float dtype.
//
// Order 450: after QkvPack (400), before Attention (500), which then sees the op's
// output (viewed as [B, H, S, D]) where it used to see the rotary Add.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "pass/pass.h"
#include "passes/fusion/attention_util.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

// The captures of this fusion's pattern (the names reports and -v logs print).
namespace cap {
const ValueCapture C{"C"}, S{"S"}, rot_shape{"rot_shape"}, x{"x"}, xr{"xr"};
const NodeCapture add{"add"}, cat_pass{"cat_pass"}, mul_cos{"mul_cos"}, mul_sin{"mul_sin"}, neg{"neg"},
    rot{"rot"}, sl_neg{"sl_neg"}, sl_pass{"sl_pass"}, sl_pos{"sl_pos"}, sl_rot{"sl_rot"}, stack{"stack"},
    uq_neg{"uq_neg"}, uq_pos{"uq_pos"};
}  // namespace cap

using attn::const_of;  // an initializer, folded constant or Constant node's value

std::optional<std::vector<int64_t>> const_ints(const Value* v) {
  const Tensor* t = const_of(v);
  if (!t || !dtype_is_integer(t->dtype)) return std::nullopt;
  return t->to_int_vector();
}

bool dim_is(const Dim& d, int64_t v) { return d.known() && d.value == v; }

bool same_dim(const Dim& a, const Dim& b) {
  if (a.known() || b.known()) return a.known() && b.known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::optional<Shape> shape_of(const Value* v) {
  if (const Tensor* t = const_of(v)) {
    Shape s;
    for (int64_t d : t->dims) s.push_back(Dim::of(d));
    return s;
  }
  if (!v || !v->shape) return std::nullopt;
  return *v->shape;
}

// Axes of an Unsqueeze/Squeeze (attribute before opset 13, constant input after).
std::optional<std::vector<int64_t>> axes_of(const Node* n) {
  if (n->has_attr("axes")) return n->attr_ints("axes");
  if (n->input(1)) return const_ints(n->input(1));
  return std::nullopt;
}

// A Slice on the last axis of a rank-`rank` tensor: (start, end, step), all constant.
struct SliceSpec {
  int64_t start = 0, end = 0, step = 1;
};
std::optional<SliceSpec> last_axis_slice(const Node* sl, int64_t rank) {
  if (!sl || !sl->is("Slice") || sl->inputs.size() < 3) return std::nullopt;
  auto starts = const_ints(sl->input(1)), ends = const_ints(sl->input(2));
  std::optional<std::vector<int64_t>> axes = std::vector<int64_t>{0}, steps = std::vector<int64_t>{1};
  if (sl->input(3)) axes = const_ints(sl->input(3));
  if (sl->input(4)) steps = const_ints(sl->input(4));
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
      steps->size() != 1)
    return std::nullopt;
  const int64_t a = (*axes)[0] < 0 ? (*axes)[0] + rank : (*axes)[0];
  if (a != rank - 1) return std::nullopt;
  return SliceSpec{(*starts)[0], (*ends)[0], (*steps)[0]};
}

bool is_last_axis(int64_t axis, int64_t rank) { return axis == -1 || axis == rank - 1; }

// ---- cos / sin caches ------------------------------------------------------------

// How a cache the op takes ([B|1, S, R/2]) is obtained from the model's C / S operand.
struct CachePlan {
  Value* base = nullptr;               // the half (or interleaved source) the replay starts from
  const Tensor* const_full = nullptr;  // half-split constant C: base is its first half (built in rewrite)
  std::vector<std::pair<const Node*, int>> replay;  // elementwise nodes (+ chain input slot), base first
  std::string labels;                  // axes of base: subset of "BHSD" in order ('D' = the rotary axis)
  Shape dims;                          // base's shape (last = R/2)
  Shape cache;                         // the cache's [b, S, R/2]
};

// Elementwise ops that keep "the two halves are equal" / commute with taking a
// slice of the last axis: unary maps and scalar-constant arithmetic.
std::optional<int> elementwise_chain_slot(const Node* n) {
  if (n->is("Cos") || n->is("Sin") || n->is("Neg") || n->is("Identity")) return 0;
  if (n->is("Cast")) return dtype_is_float(static_cast<DType>(n->attr_int("to", 0))) ? std::optional<int>(0) : std::nullopt;
  if ((n->is("Mul") || n->is("Div") || n->is("Add") || n->is("Sub")) && n->inputs.size() == 2) {
    for (int side = 0; side < 2; ++side) {
      const Tensor* k = const_of(n->input(1 - side));
      if (k && k->numel() == 1 && !const_of(n->input(side))) return side;
    }
  }
  return std::nullopt;
}

// Walks back from v through Unsqueezes (dropping their unit axes from `labels`)
// and elementwise ops (appended to `replay` in the order they are applied,
// the one nearest the returned value first).
Value* peel(Value* v, std::string& labels, std::vector<std::pair<const Node*, int>>& replay) {
  for (int depth = 0; depth < 16 && v && v->producer; ++depth) {
    const Node* n = v->producer;
    if (n->is("Unsqueeze")) {
      auto axes = axes_of(n);
      const int64_t r = static_cast<int64_t>(labels.size());
      if (!axes) break;
      std::vector<bool> drop(labels.size(), false);
      bool ok = true;
      for (int64_t a : *axes) {
        const int64_t k = a < 0 ? a + r : a;
        if (k < 0 || k >= r) ok = false;
        else drop[k] = true;
      }
      if (!ok) break;
      std::string in;
      for (size_t i = 0; i < labels.size(); ++i)
        if (!drop[i]) in += labels[i];
      labels = in;
      v = n->input(0);
      continue;
    }
    if (auto slot = elementwise_chain_slot(n)) {
      replay.push_back({n, *slot});
      v = n->input(*slot);
      continue;
    }
    break;
  }
  std::reverse(replay.begin(), replay.end());
  return v;
}

// Checks base's labels/dims against x and fills plan.cache ([b, S, R/2]).
Status finish_plan(CachePlan& p, const Shape& x4, const std::string& layout, int64_t half, const Value* operand,
                   const Node* mul) {
  auto fail = [&](const std::string& why) {
    return Status::reject("rule 2: '", operand->name, "' of ", mul->label(), ": ", why);
  };
  if (p.labels.size() != p.dims.size()) return fail("the cache's axes cannot be traced");
  if (p.labels.empty() || p.labels.back() != 'D') return fail("the rotary axis is not the cache's last axis");
  if (!dim_is(p.dims.back(), half))
    return fail("the cache half has " + p.dims.back().str() + " entries, not R/2 = " + std::to_string(half));
  Dim b = Dim::of(1), s = Dim::of(1);
  bool has_s = false;
  for (size_t i = 0; i + 1 < p.labels.size(); ++i) {
    const char l = p.labels[i];
    const Dim& d = p.dims[i];
    const Dim& xd = x4[layout.find(l)];
    if (l == 'H') {
      if (!dim_is(d, 1)) return fail("the cache varies over heads");
    } else if (l == 'B') {
      if (!dim_is(d, 1) && !same_dim(d, xd)) return fail("the cache's batch " + d.str() + " is neither 1 nor x's " + xd.str());
      b = d;
    } else if (l == 'S') {
      if (!same_dim(d, xd)) return fail("the cache's sequence " + d.str() + " is not x's " + xd.str());
      s = d;
      has_s = true;
    }
  }
  if (!has_s && !dim_is(x4[layout.find('S')], 1)) return fail("the cache has no sequence axis");
  p.cache = {b, s, Dim::of(half)};
  return Status::ok();
}

// Half-split: C = f(Concat(a, a)) (or a constant with equal halves).
Status plan_half(Value* c, const std::string& layout, const Shape& x4, int64_t r, const Node* mul, CachePlan& p) {
  auto cs = shape_of(c);
  if (!cs || cs->size() > 4) return Status::reject("rule 2: '", c->name, "' of ", mul->label(), " has unknown rank");
  p.labels = layout.substr(4 - cs->size());
  Value* v = peel(c, p.labels, p.replay);
  const int64_t h = r / 2;
  if (const Tensor* t = const_of(v)) {
    // Folded cos/sin tables: prove the halves equal element by element.
    if (t->dims.empty() || t->dims.back() != r || !dtype_is_float(t->dtype))
      return Status::reject("rule 2: constant '", v->name, "' under ", mul->label(), " is not a [..., R] float table");
    const size_t es = dtype_size(t->dtype);
    const int64_t rows = t->numel() / r;
    for (int64_t i = 0; i < rows; ++i)
      if (std::memcmp(t->bytes.data() + (i * r) * es, t->bytes.data() + (i * r + h) * es, h * es) != 0)
        return Status::reject("rule 2: constant '", v->name, "' under ", mul->label(),
                              " does not repeat its first half: not a rotate_half cos/sin table");
    p.const_full = t;
    p.base = v;
    for (int64_t d : t->dims) p.dims.push_back(Dim::of(d));
    p.dims.back() = Dim::of(h);
    return finish_plan(p, x4, layout, h, c, mul);
  }
  const Node* cat = v ? v->producer : nullptr;
  if (!cat || !cat->is("Concat") || cat->inputs.size() != 2 || cat->input(0) != cat->input(1))
    return Status::reject("rule 2: '", c->name, "' of ", mul->label(),
                          " is not provably Concat(f, f) on the last axis (through elementwise ops): its halves may differ");
  auto fs = shape_of(cat->input(0));
  if (!fs || !is_last_axis(cat->attr_int("axis", 0), static_cast<int64_t>(fs->size())))
    return Status::reject("rule 2: ", cat->label(), " under ", mul->label(), " does not concatenate the last axis");
  p.base = cat->input(0);
  p.dims = *fs;
  return finish_plan(p, x4, layout, h, c, mul);
}

// Interleaved: C = repeat_interleave(c, 2) on the last axis.
Status plan_interleaved(Value* c, const std::string& layout, const Shape& x4, int64_t r, const Node* mul,
                        CachePlan& p) {
  auto reject = [&](const std::string& why) {
    return Status::reject("rule 2: '", c->name, "' of ", mul->label(), " is not repeat_interleave(cache, 2): ", why);
  };
  auto cs = shape_of(c);
  if (!cs || cs->size() > 4) return reject("unknown rank");
  std::string labels = layout.substr(4 - cs->size());
  std::vector<std::pair<const Node*, int>> outer;
  // Elementwise ops after the repeat (Cohere: cos(repeat_interleave(freqs, 2)) * scaling) commute
  // with it — peel takes only unary ops and ones with a scalar constant — so they are replayed on
  // the half cache after those found below the repeat.
  Value* v = peel(c, labels, outer);
  const Node* rs = v ? v->producer : nullptr;
  if (!rs || !rs->is("Reshape")) return reject("no Reshape merging the pairs");
  auto out = shape_of(v), in = shape_of(rs->input(0));
  if (!out || !in || in->size() != out->size() + 1 || !dim_is(in->back(), 2) || !dim_is(out->back(), r))
    return reject(rs->label() + " does not merge [..., R/2, 2] into [..., R]");
  for (size_t i = 0; i + 1 < out->size(); ++i)
    if (!same_dim((*in)[i], (*out)[i])) return reject(rs->label() + " changes a leading dim");
  const Node* rep = rs->input(0)->producer;
  const int64_t tr = static_cast<int64_t>(in->size());
  Value* u = nullptr;
  if (rep && rep->is("Concat") && rep->inputs.size() == 2 && rep->input(0) == rep->input(1) &&
      is_last_axis(rep->attr_int("axis", 0), tr)) {
    u = rep->input(0);
  } else if (rep && rep->is("Tile") && rep->inputs.size() == 2) {
    auto reps = const_ints(rep->input(1));
    std::vector<int64_t> want(tr, 1);
    want.back() = 2;
    if (!reps || *reps != want) return reject(rep->label() + " does not repeat the last axis twice only");
    u = rep->input(0);
  } else if (rep && rep->is("Expand") && rep->inputs.size() == 2) {
    u = rep->input(0);
    auto us = shape_of(u);
    if (!us || us->size() != in->size()) return reject(rep->label() + " changes the rank");
    for (size_t i = 0; i + 1 < us->size(); ++i)
      if (!same_dim((*us)[i], (*in)[i])) return reject(rep->label() + " broadcasts a leading dim");
  } else {
    return reject("the pairs are not two copies of one value");
  }
  auto us = shape_of(u);
  if (!us || static_cast<int64_t>(us->size()) != tr || !dim_is(us->back(), 1)) return reject("the repeated value is not [..., R/2, 1]");
  const Node* uq = u->producer;
  if (!uq || !uq->is("Unsqueeze")) return reject("the repeated value is not an Unsqueeze of the cache");
  auto axes = axes_of(uq);
  if (!axes) return reject(uq->label() + " has no constant axes");
  // Labels of the unsqueezed value: the cache's, then the pair axis; other inserted axes are unit axes.
  std::string ul = labels + "P";
  std::vector<bool> drop(ul.size(), false);
  bool last = false;
  for (int64_t a : *axes) {
    const int64_t k = a < 0 ? a + tr : a;
    if (k < 0 || k >= tr) return reject(uq->label() + " has an out-of-range axis");
    drop[k] = true;
    last = last || k == tr - 1;
  }
  if (!last) return reject(uq->label() + " does not add the pair axis last");
  std::string base_labels;
  for (size_t i = 0; i < ul.size(); ++i)
    if (!drop[i]) base_labels += ul[i];
  p.labels = base_labels;
  Value* b = peel(uq->input(0), p.labels, p.replay);
  p.replay.insert(p.replay.end(), outer.begin(), outer.end());
  auto bs = shape_of(b);
  if (!bs) return reject("the cache's shape is unknown");
  p.base = b;
  p.dims = *bs;
  return finish_plan(p, x4, layout, r / 2, c, mul);
}

// ---- rewrite helpers ---------------------------------------------------------------

bool same_attr(const Attribute& a, const Attribute& b) {
  return a.name == b.name && a.kind == b.kind && a.i == b.i && a.f == b.f && a.s == b.s && a.ints == b.ints &&
         a.floats == b.floats && a.ref_attr_name == b.ref_attr_name && !a.t && !b.t && a.opaque.empty() &&
         b.opaque.empty();
}

bool same_input(const Value* a, const Value* b) {
  if (a == b) return true;
  const Tensor* x = const_of(a);
  const Tensor* y = const_of(b);
  return x && y && x->dtype == y->dtype && x->dims == y->dims && x->bytes == y->bytes;
}

// An existing node computing exactly op(inputs, attrs), or a new one: what a
// rewrite builds from the shared cos/sin tables is built once per model.
Value* get_or_create(Rewriter& rw, const std::string& op, const std::vector<Value*>& inputs,
                     const std::vector<Attribute>& attrs, const std::string& hint) {
  for (const Value* in : inputs) {
    if (!in || const_of(in)) continue;
    for (Node* c : in->consumers()) {
      if (c->op_type != op || !c->domain.empty() || c->inputs.size() != inputs.size() || c->outputs.size() != 1 ||
          c->attrs.size() != attrs.size() || !rw.alive(c))
        continue;
      bool same = true;
      for (size_t i = 0; same && i < inputs.size(); ++i) same = same_input(c->input(i), inputs[i]);
      for (size_t i = 0; same && i < attrs.size(); ++i) same = same_attr(c->attrs[i], attrs[i]);
      if (same) return c->output(0);
    }
    break;  // the first variable input's consumers hold any earlier copy
  }
  return rw.create_node("", op, inputs, attrs, 1, hint)->output(0);
}

// The first half of a [..., R] constant as [..., R/2].
Tensor first_half(const Tensor& t) {
  const int64_t r = t.dims.back(), h = r / 2;
  std::vector<int64_t> dims = t.dims;
  dims.back() = h;
  Tensor out(t.dtype, dims);
  const size_t es = dtype_size(t.dtype);
  const int64_t rows = t.numel() / r;
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(out.bytes.data() + i * h * es, t.bytes.data() + i * r * es, h * es);
  return out;
}

Value* axes_input(Rewriter& rw, const std::vector<int64_t>& axes) { return rw.add_int64s("rotary_axes", axes); }

Value* squeeze_like(Rewriter& rw, const std::string& op, Value* v, const std::vector<int64_t>& axes) {
  if (rw.opset() >= 13) return get_or_create(rw, op, {v, axes_input(rw, axes)}, {}, "rotary_cache");
  return get_or_create(rw, op, {v}, {Attribute::make_ints("axes", axes)}, "rotary_cache");
}

// Builds the [b, S, R/2] cache of a plan (reusing nodes built for earlier layers).
Value* build_cache(Rewriter& rw, const CachePlan& p) {
  Value* v = p.base;
  std::string labels = p.labels;
  if (p.const_full) {
    // Straight to [b, S, R/2]: drop unit head axes, add a unit batch axis.
    Tensor t = first_half(*p.const_full);
    std::vector<int64_t> dims;
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] != 'H') dims.push_back(t.dims[i]);
    if (labels.find('B') == std::string::npos) dims.insert(dims.begin(), 1);
    if (labels.find('S') == std::string::npos) dims.insert(dims.end() - 1, 1);
    t.dims = dims;
    const std::string hint = p.base->name + "_rotary_half";
    Value* existing = rw.graph().find(hint);
    if (existing && existing->const_data && existing->const_data->dims == t.dims && existing->const_data->bytes == t.bytes)
      v = existing;
    else
      v = rw.add_constant(hint, std::move(t));
    labels = "BSD";
  }
  for (const auto& [n, slot] : p.replay) {
    std::vector<Value*> ins = n->inputs;
    ins[slot] = v;
    v = get_or_create(rw, n->op_type, ins, n->attrs, "rotary_cache");
  }
  if (size_t hpos = labels.find('H'); hpos != std::string::npos) {
    v = squeeze_like(rw, "Squeeze", v, {static_cast<int64_t>(hpos)});
    labels.erase(hpos, 1);
  }
  if (labels.find('B') == std::string::npos) {
    v = squeeze_like(rw, "Unsqueeze", v, {0});
    labels.insert(labels.begin(), 'B');
  }
  if (labels.find('S') == std::string::npos) v = squeeze_like(rw, "Unsqueeze", v, {1});
  return v;
}

// y [B, S, H, D] as [B, S, H·D]: the 3-D tensor y was split from when y is
// such a head-split Reshape, else a new Reshape (a view either way).
Value* flat_view(Rewriter& rw, Value* y, int64_t width, const std::string& hint) {
  if (const Node* rp = y->producer; rp && rp->is("Reshape")) {
    auto in = shape_of(rp->input(0)), out = shape_of(y);
    if (in && out && in->size() == 3 && out->size() == 4 && same_dim((*in)[0], (*out)[0]) &&
        same_dim((*in)[1], (*out)[1]) && dim_is((*in)[2], width))
      return rp->input(0);
  }
  return rw.create_node("", "Reshape", {y, rw.add_int64s("rotary_flat", {0, 0, -1})}, {}, 1, hint)->output(0);
}

// ---- the pass --------------------------------------------------------------------------

class RotaryEmbeddingFusion : public FusionPass {
 public:
  std::string name() const override { return "RotaryEmbedding"; }
  std::string description() const override {
    return "x*cos + rotate_half|rotate_every_two(x)*sin (full or partial rotary) -> fuseopt.RotaryEmbedding";
  }

  Pattern pattern() const override {
    Pattern full = core(Any(cap::xr));
    Pattern sl_rot = Op("Slice", cap::x).allow_extra_inputs().as(cap::sl_rot);
    Pattern partial =
        Op("Concat", core(sl_rot), Op("Slice", cap::x).allow_extra_inputs().as(cap::sl_pass)).commutative().as(cap::cat_pass);
    return AnyOf({partial, full});
  }

  // GPT-J's TorchScript export computes the pair-merging Reshape's target from
  // Shape(stack): those shape nodes serve the match only and go with it.
  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r = match_pattern(built_pattern(), root);
    if (!r || !r.match->has("rot_shape")) return r;
    Match& m = *r.match;
    std::vector<Node*> cone;
    std::vector<Value*> todo{m.value(cap::rot_shape)};
    while (!todo.empty() && cone.size() < 32) {
      Value* v = todo.back();
      todo.pop_back();
      Node* n = v ? v->producer : nullptr;
      if (!n || m.covers(n) || std::find(cone.begin(), cone.end(), n) != cone.end()) continue;
      if (!(n->is("Shape") || n->is("Slice") || n->is("Concat") || n->is("Gather") || n->is("Unsqueeze") ||
            n->is("Squeeze") || n->is("Cast")))
        continue;
      cone.push_back(n);
      if (n->is("Shape")) continue;
      for (Value* in : n->inputs) todo.push_back(in);
    }
    // Keep only nodes whose every consumer is in the match or the cone.
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < cone.size(); ++i) {
        bool own = !cone[i]->outputs.empty();
        for (Value* o : cone[i]->outputs) {
          if (!o) continue;
          if (o->is_graph_output) own = false;
          for (Node* c : o->consumers())
            if (!m.covers(c) && std::find(cone.begin(), cone.end(), c) == cone.end()) own = false;
        }
        if (!own) {
          cone.erase(cone.begin() + i);
          changed = true;
          break;
        }
      }
    }
    for (Node* n : cone) m.matched.push_back(n);
    return r;
  }

  Status check(const Graph&, const Match& m) const override {
    Plan p;
    return plan(m, p);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Plan p;
    if (!plan(m, p)) return;  // check() accepted this match: cannot happen
    Value* cos = build_cache(rw, p.cos);
    Value* sin = build_cache(rw, p.sin);
    std::vector<Attribute> attrs;
    if (p.interleaved) attrs.push_back(Attribute::make_int("interleaved", 1));
    if (p.r < p.d) attrs.push_back(Attribute::make_int("rotary_embedding_dim", p.r));
    // The op reads [B, S, H, D] tensors as [B, S, H·D] (num_heads): GPT-J's x, and
    // the [B, S, H, D] source of a head transpose x = Transpose(0,2,1,3)(y) (Llama &
    // co.), whose output then goes back through Reshape + Transpose, which the
    // Attention pass reads as its plain head-split Q/K (no re-layout copies).
    Value* x = p.x;
    Value* bshd = nullptr;
    int64_t heads = p.heads;
    bool transpose_back = false;
    if (p.layout == "BSHD") {
      bshd = x;
    } else if (const Node* t = x->producer; t && t->is("Transpose") && t->attr_ints("perm") == std::vector<int64_t>{0, 2, 1, 3}) {
      auto ys = shape_of(t->input(0));
      if (ys && ys->size() == 4 && (*ys)[2].known() && dim_is((*ys)[3], p.d)) {
        bshd = t->input(0);
        heads = (*ys)[2].value;
        transpose_back = true;
      }
    }
    if (bshd) {
      attrs.push_back(Attribute::make_int("num_heads", heads));
      x = flat_view(rw, bshd, heads * p.d, m.root->name + "_rotary_in");
    }
    Node* f = rw.create_node("fuseopt", "RotaryEmbedding", {x, cos, sin}, attrs, 1, m.root->name + "_rotary");
    Value* out = f->output(0);
    if (bshd) {
      out = rw.create_node("", "Reshape", {out, rw.add_int64s("rotary_heads", {0, 0, heads, p.d})}, {}, 1,
                           m.root->name + "_rotary_heads")
                ->output(0);
      if (transpose_back)
        out = rw.create_node("", "Transpose", {out}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, 1,
                             m.root->name + "_rotary_bhsd")
                  ->output(0);
    }
    rw.replace_match(m, f, name(), {{m.root->output(0), out}});
  }

 private:
  struct Plan {
    Value* x = nullptr;  // the op's input (x, or xr for full rotary)
    std::string layout;  // "BHSD" or "BSHD"
    bool interleaved = false;
    int64_t r = 0, d = 0, heads = 0;
    CachePlan cos, sin;
  };

  // Add(Mul(xr, C), Mul(rot(xr), S)) for both rotation spellings.
  static Pattern core(const Pattern& xr) {
    Pattern half = Op("Concat", Op("Neg", Op("Slice", xr).allow_extra_inputs().as(cap::sl_neg)).as(cap::neg),
                      Op("Slice", xr).allow_extra_inputs().as(cap::sl_pos))
                       .commutative()
                       .as(cap::rot);
    Pattern stack =
        Op("Concat", Op("Unsqueeze", Op("Neg", Op("Slice", xr).allow_extra_inputs().as(cap::sl_neg)).as(cap::neg)).allow_extra_inputs().as(cap::uq_neg),
           Op("Unsqueeze", Op("Slice", xr).allow_extra_inputs().as(cap::sl_pos)).allow_extra_inputs().as(cap::uq_pos))
            .commutative()
            .as(cap::stack);
    Pattern inter = Op("Reshape", stack, Any(cap::rot_shape)).as(cap::rot);
    return Op("Add", Op("Mul", xr, Any(cap::C)).commutative().as(cap::mul_cos),
              Op("Mul", AnyOf({half, inter}), Any(cap::S)).commutative().as(cap::mul_sin))
        .commutative()
        .as(cap::add);
  }

  Status plan(const Match& m, Plan& p) const {
    const bool partial = m.has(cap::cat_pass);
    Value* xr = partial ? m.value(cap::sl_rot) : m.value(cap::xr);
    Value* x = partial ? m.value(cap::x) : xr;
    const Node* mul_cos = m.node(cap::mul_cos);
    const Node* mul_sin = m.node(cap::mul_sin);
    p.interleaved = m.has(cap::stack);
    auto xrs = shape_of(xr), xs = shape_of(x);
    if (!xrs || !xs || xrs->size() != 4 || xs->size() != 4)
      return Status::reject("rule 4: '", x->name, "' is not a tensor of known rank 4 ([B, H, S, D] or [B, S, H, D])");
    if (!xrs->back().known() || !xs->back().known())
      return Status::reject("rule 4: the head size of '", x->name, "' is unknown: the split points cannot be proven");
    p.r = xrs->back().value;
    p.d = xs->back().value;
    if (p.r % 2 || p.r <= 0) return Status::reject("rule 4: rotary width ", p.r, " of '", xr->name, "' is odd");
    const int64_t h = p.r / 2;

    // Rule 5 first: everything below compares shapes of values of one dtype.
    if (Status s = fusion::same_float_dtype({x, m.value(cap::C), m.value(cap::S)}, m.root); !s) return s;
    if (fusion::value_dtype(x) == DType::Undefined)
      return Status::reject("rule 5: dtype of '", x->name, "' is unknown");

    // Partial rotary: xr = x[..., :R], root = Concat(y, x[..., R:]) in this order.
    if (partial) {
      const Node* cat = m.node(cap::cat_pass);
      const Node* sr = m.node(cap::sl_rot);
      const Node* sp = m.node(cap::sl_pass);
      auto a = last_axis_slice(sr, 4), b = last_axis_slice(sp, 4);
      if (!is_last_axis(cat->attr_int("axis", 0), 4))
        return Status::reject("rule 4: ", cat->label(), " does not concatenate the last axis");
      // R == D (Phi-3's TorchScript export slices all of x and concatenates an empty rest) is full rotary.
      if (!a || a->start != 0 || a->step != 1 || a->end != p.r || p.r > p.d)
        return Status::reject("rule 4: ", sr->label(), " is not x[..., 0:R] of the last axis (R <= head size ", p.d, ")");
      if (!b || b->start != p.r || b->step != 1 || b->end < p.d)
        return Status::reject("rule 4: ", sp->label(), " is not the pass-through part x[..., ", p.r, ":] of the last axis");
      if (cat->input(0) != m.value(cap::add))
        return Status::reject("rule 4: ", cat->label(), " puts the pass-through part ", sp->label(),
                              " before the rotated part: not concatenated back in order");
    }

    // The rotation: Slices at exactly h and R (or even/odd), Neg on the second half, -x2 first.
    const Node* sn = m.node(cap::sl_neg);
    const Node* spos = m.node(cap::sl_pos);
    auto neg = last_axis_slice(sn, 4), pos = last_axis_slice(spos, 4);
    if (!neg || !pos)
      return Status::reject("rule 4: ", (!neg ? sn : spos)->label(), " is not a constant slice of the last axis");
    if (p.interleaved) {
      if (neg->step != 2 || pos->step != 2 || neg->end < p.r || pos->end < p.r || (neg->start != 1 && neg->start != 0) ||
          (pos->start != 0 && pos->start != 1) || neg->start == pos->start)
        return Status::reject("rule 4: ", sn->label(), " and ", spos->label(),
                              " are not the even/odd elements x[..., 0::2], x[..., 1::2]");
      if (neg->start != 1)
        return Status::reject("rule 4: ", m.node(cap::neg)->label(), " negates the even elements, not the odd ones");
      for (const NodeCapture* u : {&cap::uq_neg, &cap::uq_pos}) {
        auto ax = axes_of(m.node(*u));
        if (!ax || ax->size() != 1 || ((*ax)[0] != -1 && (*ax)[0] != 4))
          return Status::reject("rule 4: ", m.node(*u)->label(), " does not add a last axis");
      }
      const Node* st = m.node(cap::stack);
      if (!is_last_axis(st->attr_int("axis", 0), 5))
        return Status::reject("rule 4: ", st->label(), " does not stack on the last axis");
      if (st->input(0) != m.value(cap::uq_neg))
        return Status::reject("rule 4: ", st->label(), " stacks x1 before -x2: not rotate_every_two");
      auto rs = shape_of(m.value(cap::rot));
      bool same = rs && rs->size() == 4;
      for (size_t i = 0; same && i < 4; ++i) same = same_dim((*rs)[i], (*xrs)[i]);
      if (!same)
        return Status::reject("rule 4: ", m.node(cap::rot)->label(), " does not give back x's shape ", shape_str(*xrs));
    } else {
      const Node* rot = m.node(cap::rot);
      if (!is_last_axis(rot->attr_int("axis", 0), 4))
        return Status::reject("rule 4: ", rot->label(), " does not concatenate the last axis");
      const bool neg_hi = neg->start == h && neg->end >= p.r && neg->step == 1;
      const bool pos_lo = pos->start == 0 && pos->end == h && pos->step == 1;
      const bool neg_lo = neg->start == 0 && neg->end == h && neg->step == 1;
      const bool pos_hi = pos->start == h && pos->end >= p.r && pos->step == 1;
      if (neg_lo && pos_hi)
        return Status::reject("rule 4: ", m.node(cap::neg)->label(), " negates the first half, not the second");
      if (!neg_hi || !pos_lo)
        return Status::reject("rule 4: ", sn->label(), " and ", spos->label(), " do not split the last axis at R/2 = ", h,
                              " and R = ", p.r);
      if (rot->input(0) != m.value(cap::neg))
        return Status::reject("rule 4: ", rot->label(), " concatenates x1 before -x2: not rotate_half");
    }

    // Layout from cos's broadcast: [b, 1, S, R] (BHSD) or [b, S, 1, R] (BSHD), b = 1 or B.
    bool bhsd = true, bshd = true;
    for (const ValueCapture* which : {&cap::C, &cap::S}) {
      const Value* c = m.value(*which);
      const Node* mul = which == &cap::C ? mul_cos : mul_sin;
      auto cs = shape_of(c);
      if (!cs || cs->size() > 4)
        return Status::reject("rule 3: '", c->name, "' of ", mul->label(), " has unknown rank or rank > 4");
      Shape c4(4 - cs->size(), Dim::of(1));
      c4.insert(c4.end(), cs->begin(), cs->end());
      auto fits = [&](int head, int seq) {
        return dim_is(c4[head], 1) && same_dim(c4[seq], (*xrs)[seq]) &&
               (dim_is(c4[0], 1) || same_dim(c4[0], (*xrs)[0])) && dim_is(c4[3], p.r);
      };
      bhsd = bhsd && fits(1, 2);
      bshd = bshd && fits(2, 1);
      if (!bhsd && !bshd)
        return Status::reject("rule 3: '", c->name, "' ", shape_str(*cs), " of ", mul->label(),
                              " does not broadcast over the heads (and batch) of ", shape_str(*xrs), " only");
    }
    p.layout = bhsd ? "BHSD" : "BSHD";
    if (p.layout == "BSHD") {
      if (!(*xs)[2].known()) return Status::reject("rule 4: the head count of '", x->name, "' is unknown");
      p.heads = (*xs)[2].value;
    }

    // The caches.
    Value* c = m.value(cap::C);
    Value* s = m.value(cap::S);
    if (p.interleaved) {
      if (Status st = plan_interleaved(c, p.layout, *xrs, p.r, mul_cos, p.cos); !st) return st;
      if (Status st = plan_interleaved(s, p.layout, *xrs, p.r, mul_sin, p.sin); !st) return st;
    } else {
      if (Status st = plan_half(c, p.layout, *xrs, p.r, mul_cos, p.cos); !st) return st;
      if (Status st = plan_half(s, p.layout, *xrs, p.r, mul_sin, p.sin); !st) return st;
    }
    for (int i = 0; i < 3; ++i)
      if (!same_dim(p.cos.cache[i], p.sin.cache[i]))
        return Status::reject("rule 2: the cos cache ", shape_str(p.cos.cache), " and sin cache ",
                              shape_str(p.sin.cache), " of ", m.root->label(), " differ in shape");
    p.x = x;
    return Status::ok();
  }
};

}  // namespace
// After QkvPack (400), before Attention (500): see "Order 450" at the top of the file.
FUSEOPT_REGISTER_PASS(RotaryEmbeddingFusion, PassCategory::Fusion, 450);
}  // namespace fuseopt
