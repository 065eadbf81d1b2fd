// Shape functions for ops that had none: GridSample (2-D: [N, C, H, W] and
// grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]).
#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

void grid_sample_fn(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* x = shape_of(c, 0);
  const Shape* g = shape_of(c, 1);
  if (!x || !g) return;
  if (x->size() != 4 || g->size() != 4) return;  // N-D (opset 20) left unknown
  c.set_output_shape(0, Shape{(*x)[0], (*x)[1], (*g)[1], (*g)[2]});
}

}  // namespace

FUSEOPT_SHAPE_FN("", "GridSample", grid_sample_fn);

}  // namespace fuseopt::shape_ops
