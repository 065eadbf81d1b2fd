// Attention fusion on SAM's (segment-anything ViT) windowed attention, as the exporters write
// transformers' SamVisionAttention: one packed qkv Linear on [B, h, w, C] viewed
// [B, S, 3, H, D], permuted (2, 0, 3, 1, 4) and viewed [3, B·H, S, D], unbound (Gather or
// Slice + Squeeze) into q, k, v, each viewed [B, H, S, D]; scores q·scale · kᵀ plus a
// relative-position term, softmax, P·V; the output viewed [B, H, h, w, D] (S = h·w), permuted
// (0, 2, 3, 1, 4) and reshaped to [B, h, w, H·D]. The operands are taken whole as 4-D tensors
// (re-laid out outside the op) and the root's own target is applied to Y, whose elements are
// in the same order. Negative: an output permutation that moves the heads elsewhere.
#include <cmath>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t B = 2, Hh = 2, Ww = 3, S = Hh * Ww, H = 2, D = 4, C = H * D;

void build(GraphBuilder& b, bool slices, std::vector<int64_t> out_perm = {0, 2, 3, 1, 4}) {
  Value* x = b.input("x", DType::Float, {B, Hh, Ww, C});
  Value* qkv = b.op("Add", {b.op("MatMul", {x, b.constant("Wqkv", rand_tensor({C, 3 * C}, 1))}),
                            b.constant("bqkv", rand_tensor({3 * C}, 2))}, {}, "qkv");
  Value* v5 = b.op("Reshape", {qkv, ints(b, "qkv5", {B, S, 3, H, D})});
  Value* t5 = b.op("Transpose", {v5}, {Attribute::make_ints("perm", {2, 0, 3, 1, 4})});
  Value* flat = b.op("Reshape", {t5, ints(b, "qkv_flat", {3, B * H, S, D})});
  auto pick = [&](int64_t i, const std::string& n) {
    Value* one;
    if (slices) {
      Value* sl = b.op("Slice", {flat, ints(b, n + "_s", {i}), ints(b, n + "_e", {i + 1}), ints(b, n + "_a", {0})});
      one = b.op("Squeeze", {sl, ints(b, n + "_sq", {0})});
    } else {
      one = b.op("Gather", {flat, b.constant(n + "_i", Tensor::from_ints({i}, {}))}, {Attribute::make_int("axis", 0)});
    }
    return b.op("Reshape", {one, ints(b, n + "_4d", {B, H, S, D})}, {}, n + "_view");
  };
  Value *q = pick(0, "q"), *k = pick(1, "k"), *v = pick(2, "v");
  Value* qs = b.op("Mul", {q, b.scalar("scale", 1.0f / std::sqrt(float(D)))});
  Value* kt = b.op("Transpose", {k}, {Attribute::make_ints("perm", {0, 1, 3, 2})});
  Value* s = b.op("MatMul", {qs, kt}, {}, "qk");
  s = b.op("Add", {s, b.constant("rel_pos", rand_tensor({1, H, S, S}, 7, -1, 1))}, {}, "rel_pos_add");
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v}, {}, "pv");
  o = b.op("Reshape", {o, ints(b, "win", {B, H, Hh, Ww, D})}, {}, "out_window");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", out_perm)}, "out_permute");
  o = b.op("Reshape", {o, ints(b, "out_target", {B, Hh, Ww, C})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({C, C}, 3))}, {}, "proj"));
}

}  // namespace

TEST_CASE("Attention: SAM's windowed attention (packed qkv unbound, [B, h, w, C] output) fuses",
          "[passes][Attention]") {
  for (bool slices : {false, true}) {
    INFO("unbind by " << (slices ? "Slice + Squeeze" : "Gather"));
    GraphBuilder b(17);
    build(b, slices);
    auto before = clone_graph(b.graph());
    FusionReport r = run_passes(b.graph(), {"Attention"});
    INFO(reasons(r, "Attention"));
    REQUIRE(matched(r, "Attention") == 1);
    CHECK(count_op(b.graph(), "Softmax") == 0);
    require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, Hh, Ww, C}, 41, -2, 2)}}, 1e-4f);
  }
}

TEST_CASE("Attention: a windowed output permutation that moves the heads elsewhere is not fused",
          "[passes][Attention]") {
  GraphBuilder b(17);
  build(b, false, {0, 2, 1, 3, 4});  // [B, h, H, w, D]: not Y's element order
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
}
