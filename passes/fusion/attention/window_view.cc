#include "passes/fusion/attention/window_view.h"

#include <vector>

#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {
namespace {

bool same_dims(const Shape& a, size_t ai, const Shape& b, size_t bi, size_t n) {
  for (size_t k = 0; k < n; ++k)
    if (!attn::dims_same(a[ai + k], b[bi + k])) return false;
  return true;
}

}  // namespace

std::optional<int64_t> window_reshape(const Node* n, WindowReshape dir) {
  if (!n->is("Reshape") || !n->input(0) || !n->output(0) || !n->input(0)->shape || !n->output(0)->shape)
    return std::nullopt;
  const Shape& a = *n->input(0)->shape;
  const Shape& c = *n->output(0)->shape;
  const bool split = dir == WindowReshape::Split;
  const Shape& windowed = split ? c : a;  // the 5-D side: [A, nW, H, S, S]
  // Split: a's dims 1..3 are c's 2..4; merge: a's dims 2..4 are c's 1..3.
  if (a.size() != (split ? 4u : 5u) || c.size() != (split ? 5u : 4u) || !windowed[1].known() ||
      windowed[1].value < 1 || !same_dims(a, split ? 1 : 2, c, split ? 2 : 1, 3))
    return std::nullopt;
  // The 4-D side's dim 0 is (A, nW) flattened: the element count forces it once the other dims agree.
  return windowed[1].value;
}

namespace {

// The term's dims right-aligned to [1, nW | 1, h, S_q, S_kv]; empty when not of that form.
std::vector<int64_t> window_term_dims(const Value* term, int64_t windows) {
  if (!term || !term->shape || term->shape->size() > 5) return {};
  std::vector<int64_t> d(5, 1);
  const size_t off = 5 - term->shape->size();
  for (size_t i = 0; i < term->shape->size(); ++i) {
    const Dim& x = (*term->shape)[i];
    if (!x.known()) return {};
    d[off + i] = x.value;
  }
  if (d[0] != 1 || (d[1] != 1 && d[1] != windows)) return {};
  return d;
}

}  // namespace

bool window_term_ok(const Value* term, int64_t windows) { return !window_term_dims(term, windows).empty(); }

Value* tile_window_term(Rewriter& rw, Value* term, int64_t windows, Value* query) {
  const std::vector<int64_t> d = window_term_dims(term, windows);
  if (d.empty()) return nullptr;
  Value* r = rw.create_node("", "Reshape", {term, rw.add_int64s("attn_window_term", {d[1], d[2], d[3], d[4]})}, {}, 1,
                            "attn_window_term")->output(0);
  if (d[1] == 1)
    r = rw.create_node("", "Expand", {r, rw.add_int64s("attn_windows", {windows, 1, 1, 1})}, {}, 1,
                       "attn_window_expand")->output(0);
  Value* shp = rw.create_node("", "Shape", {query}, {}, 1, "attn_query_shape")->output(0);
  Value* batch = rw.create_node("", "Slice", {shp, rw.add_int64s("attn_b0", {0}), rw.add_int64s("attn_b1", {1})}, {}, 1,
                                "attn_query_batch")->output(0);
  Value* images = rw.create_node("", "Div", {batch, rw.add_int64s("attn_nw", {windows})}, {}, 1, "attn_images")->output(0);
  Value* reps = rw.create_node("", "Concat", {images, rw.add_int64s("attn_ones", {1, 1, 1})},
                               {Attribute::make_int("axis", 0)}, 1, "attn_window_reps")->output(0);
  return rw.create_node("", "Tile", {r, reps}, {}, 1, "attn_window_bias")->output(0);
}

}  // namespace fuseopt::attn
