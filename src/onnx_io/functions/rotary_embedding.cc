// ONNX definition of fuseopt.RotaryEmbedding (docs/fused_ops.md), in the ops
// of the model's own opset (not the opset-23 RotaryEmbedding, which models at
// opset 14-18 cannot use):
//   X4 = X [B, H, S, D]  (3-D X [B, S, H·D]: Reshape to [B, S, H, D])
//   c, s = Unsqueeze(cos_cache / sin_cache [B|1, S, R/2]) on the head axis
//   x1, x2 = X4[..., :R/2], X4[..., R/2:R]   (interleaved: X4[..., 0:R:2], X4[..., 1:R:2])
//   y1 = x1·c − x2·s,  y2 = x1·s + x2·c
//   Y4 = Concat(y1, y2)  (interleaved: y1, y2 stacked on a new last axis, flattened)
//        ++ X4[..., R:] when R < D;  Y = Y4 (3-D X: Reshape back to [B, S, H·D])
//   rotated_heads = N < H (3-D X only): the rotation above runs on X4[:, :, :N] and
//        Y4 = Concat(that, X4[:, :, N:]) on the head axis (packed Q | K | V, V passes).
// One overload per (R, interleaved, 3-D heads, rotated heads): the split points are constants
// of the body. position_ids is not part of the fused op the pass emits.
#include <cstdint>
#include <limits>

#include "onnx_io/function_bodies.h"
#include "onnx_io/functions/fn_builder.h"
#include "util/error.h"

namespace fuseopt {
namespace {

using fnbody::FnBuilder;

// The rotated width R: the attribute, or the head size when it is 0 (then X's shape must say it).
int64_t rotary_dim(const Node& n) {
  const int64_t r = n.attr_int("rotary_embedding_dim", 0);
  if (r > 0) return r;
  const Value* x = n.input(0);
  FUSE_CHECK(x && x->shape && !x->shape->empty() && x->shape->back().known(),
             "fuseopt.RotaryEmbedding " << n.label() << ": rotary_embedding_dim is 0 and the head size is unknown");
  int64_t d = x->shape->back().value;
  if (x->shape->size() == 3) {
    const int64_t h = n.attr_int("num_heads", 0);
    FUSE_CHECK(h > 0 && d % h == 0, "fuseopt.RotaryEmbedding " << n.label() << ": 3-D input needs num_heads");
    d /= h;
  }
  return d;
}

bool three_d(const Node& n) {
  const Value* x = n.input(0);
  return x && x->shape && x->shape->size() == 3;
}

// fuseopt's packed form: the heads that rotate when fewer than num_heads (0 = all of them).
int64_t rotated_heads(const Node& n) {
  const int64_t r = n.attr_int("rotated_heads", 0);
  return three_d(n) && r > 0 && r < n.attr_int("num_heads", 0) ? r : 0;
}

std::string overload_of(const Graph&, const Node& n) {
  std::string ov = "r" + std::to_string(rotary_dim(n)) + (n.attr_int("interleaved", 0) ? "_interleaved" : "_half");
  if (three_d(n)) ov += "_h" + std::to_string(n.attr_int("num_heads", 0));
  if (n.attr_int("rotary_embedding_dim", 0) != 0) ov += "_pass";  // X[..., R:] concatenated back
  if (rotated_heads(n) != 0) ov += "_rot" + std::to_string(rotated_heads(n));
  return ov;
}

std::string unsqueeze(FnBuilder& f, const std::string& x, int64_t axis) {
  if (f.opset() >= 13) return f.node("Unsqueeze", {x, f.ints({axis})});
  onnx::AttributeProto a;
  a.set_name("axes");
  a.set_type(onnx::AttributeProto::INTS);
  a.add_ints(axis);
  return f.node("Unsqueeze", {x}, "", {a});
}

// X[..., start:end:step] on the last axis.
std::string slice_last(FnBuilder& f, const std::string& x, int64_t start, int64_t end, int64_t step = 1) {
  std::vector<std::string> in{x, f.ints({start}), f.ints({end}), f.ints({-1})};
  if (step != 1) in.push_back(f.ints({step}));
  return f.node("Slice", in);
}

onnx::FunctionProto build_one(const Graph& g, const Node& n, const std::string& ov) {
  const int64_t r = rotary_dim(n);
  const bool inter = n.attr_int("interleaved", 0) != 0;
  const bool flat = three_d(n);
  const int64_t heads = n.attr_int("num_heads", 0);
  FnBuilder f("RotaryEmbedding", ov, {"X", "cos_cache", "sin_cache"}, {"Y"},
              {"interleaved", "rotary_embedding_dim", "num_heads", "rotated_heads"}, g.opset(""), fnbody::elem_type(n));
  constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
  // Every target dim spelled out, no -1: with a batch of 0 ONNX refuses a -1 next
  // to a product of 0 (the same as fuseopt.Attention's body, mutate_models.py s5 m287).
  auto dims = [&](const std::string& x, int64_t from, int64_t to) {
    return f.node("Slice", {f.node("Shape", {x}), f.ints({from}), f.ints({to})});
  };
  auto concat0 = [&](const std::vector<std::string>& parts) {
    return f.node("Concat", parts, "", {FnBuilder::attr_int("axis", 0)});
  };
  std::string x4 = "X";
  if (flat) {
    std::string h = f.ints({heads});
    x4 = f.node("Reshape", {"X", concat0({dims("X", 0, 2), h, f.node("Div", {dims("X", 2, 3), h})})});
  }
  const int64_t rot_heads = rotated_heads(n);
  std::string whole = x4;  // [B, S, H, D]; with rotated_heads the rotation sees its first heads only
  if (rot_heads) x4 = f.node("Slice", {whole, f.ints({0}), f.ints({rot_heads}), f.ints({2})});
  const int64_t head_axis = flat ? 2 : 1;  // [B, S, H, D] or [B, H, S, D]
  std::string c = unsqueeze(f, "cos_cache", head_axis);
  std::string s = unsqueeze(f, "sin_cache", head_axis);
  std::string x1 = inter ? slice_last(f, x4, 0, r, 2) : slice_last(f, x4, 0, r / 2);
  std::string x2 = inter ? slice_last(f, x4, 1, r, 2) : slice_last(f, x4, r / 2, r);
  std::string y1 = f.node("Sub", {f.node("Mul", {x1, c}), f.node("Mul", {x2, s})});
  std::string y2 = f.node("Add", {f.node("Mul", {x1, s}), f.node("Mul", {x2, c})});
  std::string rot;
  if (inter) {
    std::string pairs = f.node("Concat", {unsqueeze(f, y1, -1), unsqueeze(f, y2, -1)}, "",
                               {FnBuilder::attr_int("axis", -1)});
    // [..., R/2, 2] -> [..., R]: X4's leading dims, then R.
    std::string lead = f.node("Slice", {f.node("Shape", {x4}), f.ints({0}), f.ints({-1})});
    std::string shape = f.node("Concat", {lead, f.ints({r})}, "", {FnBuilder::attr_int("axis", 0)});
    rot = f.node("Reshape", {pairs, shape});
  } else {
    rot = f.node("Concat", {y1, y2}, "", {FnBuilder::attr_int("axis", -1)});
  }
  // The pass-through part X[..., R:] whenever R is given (empty when R == D).
  const bool partial = n.attr_int("rotary_embedding_dim", 0) != 0;
  std::string y4 = rot;
  if (partial) y4 = f.node("Concat", {rot, slice_last(f, x4, r, kEnd)}, "", {FnBuilder::attr_int("axis", -1)});
  if (rot_heads) {
    std::string rest = f.node("Slice", {whole, f.ints({rot_heads}), f.ints({kEnd}), f.ints({2})});
    y4 = f.node("Concat", {y4, rest}, "", {FnBuilder::attr_int("axis", 2)});
  }
  if (flat) {
    f.node("Reshape", {y4, concat0({dims(y4, 0, 2), f.node("Mul", {dims(y4, 2, 3), dims(y4, 3, 4)})})}, "Y");
  } else {
    f.node("Identity", {y4}, "Y");
  }
  return f.take();
}

void build_rotary(const Graph& g, const std::vector<const Node*>& nodes, std::vector<onnx::FunctionProto>& out) {
  fnbody::per_overload(g, nodes, out, overload_of, build_one);
}

FunctionBodyRegistrar rotary_body("fuseopt", "RotaryEmbedding", build_rotary);
FunctionOverloadRegistrar rotary_overload("fuseopt", "RotaryEmbedding", overload_of);

}  // namespace
}  // namespace fuseopt
