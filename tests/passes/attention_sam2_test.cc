// Attention fusion on SAM2's Hiera image encoder (transformers' Sam2MultiScaleAttention): windows
// of [B', h, w, C], one qkv Linear viewed [B', S, 3, H, D] and unbound on axis 2, heads transposed,
// softmax(q·kᵀ·scale)·v, the output transposed back and viewed [B', h, w, C] in one Reshape (the
// root's target is any view of Y: the same elements in the same order). In the query-pooling
// blocks q is max-pooled on its [B', C, h, w] view and viewed [B', h'·w', H, D] straight from the
// pooled [B', h', w', C] tensor (flat_views' spatial_head_split gives it a [B', S', C] view).
// Negative: a root target whose third entry is 0 (allowzero = 0 would copy H, which Y lacks).
#include <cmath>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t B = 3, Hh = 4, Ww = 4, S = Hh * Ww, H = 2, D = 4, C = H * D;

Value* tr(GraphBuilder& b, Value* v, std::vector<int64_t> perm) {
  return b.op("Transpose", {v}, {Attribute::make_ints("perm", perm)});
}

void build(GraphBuilder& b, bool pool_q, std::vector<int64_t> out_target = {}) {
  Value* x = b.input("x", DType::Float, {B, Hh, Ww, C});
  Value* qkv = b.op("Add", {b.op("MatMul", {x, b.constant("Wqkv", rand_tensor({C, 3 * C}, 1))}),
                            b.constant("bqkv", rand_tensor({3 * C}, 2))}, {}, "qkv");
  Value* v5 = b.op("Reshape", {qkv, ints(b, "qkv5", {B, S, 3, H, D})});
  auto pick = [&](int64_t i, const std::string& n) {
    Value* sl = b.op("Slice", {v5, ints(b, n + "_s", {i}), ints(b, n + "_e", {i + 1}), ints(b, n + "_a", {2})});
    return b.op("Squeeze", {sl, ints(b, n + "_sq", {2})}, {}, n);  // [B, S, H, D]
  };
  Value *q = pick(0, "q"), *k = pick(1, "k"), *v = pick(2, "v");
  int64_t hq = Hh, wq = Ww;
  if (pool_q) {
    Value* q2 = b.op("Reshape", {q, ints(b, "q_hw", {B, Hh, Ww, C})});
    Value* pooled = b.op("MaxPool", {tr(b, q2, {0, 3, 1, 2})},
                         {Attribute::make_ints("kernel_shape", {2, 2}), Attribute::make_ints("strides", {2, 2})}, "q_pool");
    hq = Hh / 2, wq = Ww / 2;
    q = b.op("Reshape", {tr(b, pooled, {0, 2, 3, 1}), ints(b, "q_heads", {-1, hq * wq, H, D})}, {}, "q_heads");
  }
  Value* qs = b.op("Mul", {tr(b, q, {0, 2, 1, 3}), b.scalar("scale", 1.0f / std::sqrt(float(D)))});
  Value* s = b.op("MatMul", {qs, tr(b, k, {0, 2, 3, 1})}, {}, "qk");
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = tr(b, b.op("MatMul", {p, tr(b, v, {0, 2, 1, 3})}, {}, "pv"), {0, 2, 1, 3});
  if (out_target.empty()) out_target = {-1, hq, wq, C};
  o = b.op("Reshape", {o, ints(b, "out_target", out_target)}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({out_target.back(), C}, 3))}, {}, "proj"));
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({B, Hh, Ww, C}, 41, -2, 2)}}; }

}  // namespace

TEST_CASE("Attention: SAM2's windowed attention with a [B, h, w, C] output view fuses", "[passes][Attention]") {
  GraphBuilder b(17);
  build(b, false);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
}

TEST_CASE("Attention: SAM2's pooled queries viewed [B, S', H, D] from [B, h', w', C] fuse after flat_views",
          "[passes][Attention][flat_views]") {
  GraphBuilder b(17);
  build(b, true);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"flat_views", "Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
  SECTION("without flat_views the head split of a rank-4 tensor is refused") {
    GraphBuilder b2(17);
    build(b2, true);
    FusionReport r2 = run_passes(b2.graph(), {"Attention"});
    CHECK(matched(r2, "Attention") == 0);
    CHECK(reasons(r2, "Attention").find("rank 4") != std::string::npos);
  }
}

TEST_CASE("Attention: a root target with a 0 past its first two entries is refused", "[passes][Attention]") {
  GraphBuilder b(17);
  build(b, false, {-1, Hh, 0, Ww * D});  // 0 copies H of [B, S, H, D]: [B, h, H, w·D]
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
}
