// Shape functions: ReduceXxx (axes as attribute before opset 18 / ReduceSum
// 13, as an input after), ArgMax/ArgMin.
#include <set>

#include "ir/shape_ops/common.h"

namespace fuseopt::shape_ops {
namespace {

// keepdims is a flag: ONNX's inference reads 1 as keep and anything else as
// drop, kernels (ours, ONNX Runtime's) read nonzero as keep; only 0 and 1 mean
// one thing (mutate_models.py seed 6: keepdims = 2 came out as invalid).
bool keepdims(const ShapeContext& c) {
  const int64_t k = c.node().attr_int("keepdims", 1);
  if (k != 0 && k != 1) c.fail("keepdims is " + std::to_string(k) + "; it is 0 or 1");
  return k == 1;
}

void reduce(ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t rank = static_cast<int64_t>(s->size());
  const bool keep = keepdims(c);
  const bool noop_empty = c.node().attr_int("noop_with_empty_axes", 0) != 0;
  IntList axes = int_list(c, "axes", 1);
  if (axes.present && !axes.v) {
    // Axes computed at run time: with keepdims the rank is still known.
    if (!keep) return;
    Shape out(s->size());
    for (size_t i = 0; i < s->size(); ++i)
      if ((*s)[i].known() && (*s)[i].value == 1) out[i] = Dim::of(1);
    c.set_output_shape(0, out);
    return;
  }
  std::vector<int64_t> ax = axes.v.value_or(std::vector<int64_t>{});
  if (ax.empty()) {
    if (noop_empty) {
      c.set_output_shape(0, *s);
      return;
    }
    for (int64_t i = 0; i < rank; ++i) ax.push_back(i);
  }
  std::set<int64_t> reduced;
  for (int64_t a : ax) reduced.insert(c.normalize_axis(a, rank));
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced.count(i)) out.push_back((*s)[i]);
    else if (keep) out.push_back(Dim::of(1));
  }
  c.set_output_shape(0, out);
}

void arg_reduce(ShapeContext& c) {
  c.set_output_dtype(0, DType::Int64);
  const Shape* s = shape_of(c, 0);
  if (!s) return;
  const int64_t rank = static_cast<int64_t>(s->size());
  const int64_t axis = c.normalize_axis(c.node().attr_int("axis", 0), rank);
  Shape out = *s;
  if (keepdims(c)) out[axis] = Dim::of(1);
  else out.erase(out.begin() + axis);
  c.set_output_shape(0, out);
}

}  // namespace

#define REDUCE_OP(op) FUSEOPT_SHAPE_FN("", op, reduce)
REDUCE_OP("ReduceMean");
REDUCE_OP("ReduceSum");
REDUCE_OP("ReduceMax");
REDUCE_OP("ReduceMin");
REDUCE_OP("ReduceProd");
REDUCE_OP("ReduceL1");
REDUCE_OP("ReduceL2");
REDUCE_OP("ReduceLogSum");
REDUCE_OP("ReduceLogSumExp");
REDUCE_OP("ReduceSumSquare");
#undef REDUCE_OP
FUSEOPT_SHAPE_FN("", "ArgMax", arg_reduce);
FUSEOPT_SHAPE_FN("", "ArgMin", arg_reduce);

}  // namespace fuseopt::shape_ops
