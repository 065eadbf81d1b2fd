// Attention's report line for a Softmax no candidate reached (unmatched.h): a form whose output
// side the pass does not know (P·V's heads concatenated with other heads before the merge; P read
// by a Slice, as with attention sinks) is named in the report at its Softmax, with what follows
// P·V; a Softmax of a weight projection (a MoE router) is not attention and gets no line; a form
// the pass fuses leaves none.
#include <cmath>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t B = 2, H = 2, S = 5, D = 4;

// softmax(q·kᵀ / √D) on q, k, v [B, H, S, D] inputs; returns P.
Value* probs(GraphBuilder& b) {
  Value* q = b.input("q", DType::Float, {B, H, S, D});
  Value* k = b.input("k", DType::Float, {B, H, S, D});
  Value* s = b.op("MatMul", {q, b.op("Transpose", {k}, {Attribute::make_ints("perm", {0, 1, 3, 2})})}, {}, "qk");
  s = b.op("Div", {s, b.scalar("sqrt_d", std::sqrt(float(D)))});
  return b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "attn_softmax");
}

}  // namespace

TEST_CASE("Attention report: a Softmax no candidate reached is named, with what follows P·V", "[passes][Attention]") {
  SECTION("heads concatenated with other heads before the merge") {
    GraphBuilder b(17);
    Value* p = probs(b);
    Value* v = b.input("v", DType::Float, {B, H, S, D});
    Value* o = b.op("Transpose", {b.op("MatMul", {p, v}, {}, "pv")}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
    Value* other = b.input("other", DType::Float, {B, S, 1, D});
    Value* cat = b.op("Concat", {o, other}, {Attribute::make_int("axis", 2)}, "heads_cat");
    b.output(b.op("Reshape", {cat, ints(b, "merge", {B, S, (H + 1) * D})}));
    FusionReport r = run_passes(b.graph(), {"Attention"});
    CHECK(matched(r, "Attention") == 0);
    const std::string why = reasons(r, "Attention");
    CHECK(why.find("Softmax 'attn_softmax'") != std::string::npos);
    CHECK(why.find("no fusion root: after P·V MatMul") != std::string::npos);
    CHECK(why.find("Concat") != std::string::npos);
  }
  SECTION("P read by a Slice (attention sinks)") {
    GraphBuilder b(17);
    Value* p = probs(b);
    Value* v = b.input("v", DType::Float, {B, H, S - 1, D});
    Value* kept = b.op("Slice", {p, ints(b, "s0", {0}), ints(b, "s1", {S - 1}), ints(b, "ax", {3})}, {}, "drop_sink");
    b.output(b.op("MatMul", {kept, v}));
    FusionReport r = run_passes(b.graph(), {"Attention"});
    CHECK(reasons(r, "Attention").find("P is read by Slice") != std::string::npos);
  }
}

TEST_CASE("Attention report: a router's Softmax gets no line, a fused block none", "[passes][Attention]") {
  {
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {B, S, 8});
    Value* logits = b.op("MatMul", {x, b.constant("W_gate", rand_tensor({8, 4}, 1))});
    b.output(b.op("Softmax", {logits}, {Attribute::make_int("axis", -1)}, "router"));
    FusionReport r = run_passes(b.graph(), {"Attention"});
    CHECK(reasons(r, "Attention").empty());
  }
  GraphBuilder b(17);
  Value* p = probs(b);
  Value* v = b.input("v", DType::Float, {B, H, S, D});
  Value* o = b.op("Transpose", {b.op("MatMul", {p, v}, {}, "pv")}, {Attribute::make_ints("perm", {0, 2, 1, 3})});
  b.output(b.op("Reshape", {o, ints(b, "merge", {B, S, H * D})}));
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 1);
  CHECK(reasons(r, "Attention").empty());
}
