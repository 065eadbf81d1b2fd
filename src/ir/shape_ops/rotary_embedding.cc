// Shape function of fuseopt.RotaryEmbedding (docs/fused_ops.md): Y has X's
// shape and dtype. X is [B, H, S, D], or [B, S, num_heads·D]; cos/sin caches
// without position_ids are [B or 1, S, R/2], with them [max_pos, R/2].
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

void fuseopt_rotary_fn(ShapeContext& c) {
  same_as_input(c);
  const Shape* x = shape_of(c, 0);
  if (!x) return;
  if (x->size() != 3 && x->size() != 4) c.fail("RotaryEmbedding needs X [B, H, S, D] or [B, S, hidden], got " + shp(*x));
  const int64_t heads = c.node().attr_int("num_heads", 0);
  if (x->size() == 3 && heads <= 0) c.fail("RotaryEmbedding with a 3-D X needs num_heads");
  const int64_t r = c.node().attr_int("rotary_embedding_dim", 0);
  const Shape* cs = shape_of(c, 1);
  if (!cs || cs->empty() || !c.has_input(1)) return;
  Dim head = x->size() == 4 ? x->back() : dim_div_exact(x->back(), Dim::of(heads > 0 ? heads : 1));
  Dim half = r > 0 ? Dim::of(r / 2) : dim_div_exact(head, Dim::of(2));
  if (dims_conflict(cs->back(), half)) c.fail("cos_cache " + shp(*cs) + " does not end in rotary_embedding_dim / 2 = " + half.str());
  if (const Shape* ss = shape_of(c, 2); ss && c.has_input(2) && ss->size() == cs->size())
    for (size_t i = 0; i < ss->size(); ++i)
      if (dims_conflict((*ss)[i], (*cs)[i])) c.fail("sin_cache " + shp(*ss) + " and cos_cache " + shp(*cs) + " differ");
}

}  // namespace

FUSEOPT_SHAPE_FN("fuseopt", "RotaryEmbedding", fuseopt_rotary_fn);

}  // namespace fuseopt::shape_ops
