// flat_views: the two view canonicalizations of attention written on flat [B·H, S, D] tensors
// (transformers-4 SAM, ViTDet), each checked against the original on the CPU Session:
//   select_before_view: qkv.reshape(3, B·H, S, D).unbind(0) (Gather, Slice + Squeeze, or a Split
//     into ones) becomes the unbind of the [3, B, H, S, D] value, then a [B·H, S, D] view of each;
//   spatial_scores_view: decomposed relative positions added on the [B·H, h, w, h, w] view of the
//     [B·H, S, S] scores become terms added to the flat scores.
// With the Attention fusion after them the whole ViTDet block fuses (P·V [B·H, S, D] viewed
// [B, H, h, w, D] directly, plan.cc's flat spatial output). Negatives: a view that does not keep
// axis 0, a reader that is not a selection, a merge to another shape, a rank-4 term.
#include <cmath>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t B = 2, Hh = 2, Ww = 3, S = Hh * Ww, H = 2, D = 4, C = H * D;

enum class Unbind { Gather, Slice, Split };

// The three [B·H, S, D] pieces of x [3, B, H, S, D] viewed [3, B·H, S, D].
std::vector<Value*> unbind(GraphBuilder& b, Value* x5, Unbind how, std::vector<int64_t> target = {3, B * H, S, D}) {
  Value* flat = b.op("Reshape", {x5, ints(b, "flat3", target)}, {}, "flat3");
  std::vector<Value*> out;
  if (how == Unbind::Split) {
    Node* sp = b.node("Split", {flat, ints(b, "ones", {1, 1, 1})}, 3, {Attribute::make_int("axis", 0)}, "", "unbind");
    for (int i = 0; i < 3; ++i) out.push_back(b.op("Squeeze", {sp->outputs[i], ints(b, "sq" + std::to_string(i), {0})}));
    return out;
  }
  for (int64_t i = 0; i < 3; ++i) {
    const std::string n = "pick" + std::to_string(i);
    if (how == Unbind::Gather) {
      out.push_back(b.op("Gather", {flat, b.constant(n, Tensor::from_ints({i}, {}))}, {Attribute::make_int("axis", 0)}));
    } else {
      Value* sl = b.op("Slice", {flat, ints(b, n + "_s", {i}), ints(b, n + "_e", {i + 1}), ints(b, n + "_a", {0})});
      out.push_back(b.op("Squeeze", {sl, ints(b, n + "_sq", {0})}));
    }
  }
  return out;
}

// Decomposed relative positions on the [B·H, h, w, h, w] view of s [B·H, S, S], from q [B·H, S, D].
Value* add_rel_pos(GraphBuilder& b, Value* s, Value* q, bool rank4_term = false) {
  Value* q4 = b.op("Reshape", {q, ints(b, "q_hw", {B * H, Hh, Ww, D})});
  Value* rh = b.op("MatMul", {q4, b.constant("rel_h", rand_tensor({D, Hh}, 11))});  // [B·H, h, w, h]
  Value* rw = b.op("MatMul", {q4, b.constant("rel_w", rand_tensor({D, Ww}, 12))});  // [B·H, h, w, w]
  rh = b.op("Unsqueeze", {rh, ints(b, "ax_h", {4})});
  // rank 4: a constant [h, w, 1, w] that broadcasts from the right (left alone: the rewrite wants rank 5)
  rw = rank4_term ? b.constant("rw4", rand_tensor({Hh, Ww, 1, Ww}, 13)) : b.op("Unsqueeze", {rw, ints(b, "ax_w", {3})});
  Value* s5 = b.op("Reshape", {s, ints(b, "s5", {B * H, Hh, Ww, Hh, Ww})}, {}, "scores_2d");
  s5 = b.op("Add", {s5, rh}, {}, "add_rel_h");
  s5 = b.op("Add", {s5, rw}, {}, "add_rel_w");
  return b.op("Reshape", {s5, ints(b, "s3", {B * H, S, S})}, {}, "scores_flat");
}

// ViTDet / transformers-4 SAM attention on x [B, h, w, C].
void build_vitdet(GraphBuilder& b, Unbind how) {
  Value* x = b.input("x", DType::Float, {B, Hh, Ww, C});
  Value* qkv = b.op("Add", {b.op("MatMul", {x, b.constant("Wqkv", rand_tensor({C, 3 * C}, 1))}),
                            b.constant("bqkv", rand_tensor({3 * C}, 2))}, {}, "qkv");
  Value* v5 = b.op("Reshape", {qkv, ints(b, "qkv5", {B, S, 3, H, D})});
  Value* t5 = b.op("Transpose", {v5}, {Attribute::make_ints("perm", {2, 0, 3, 1, 4})});
  auto qkv3 = unbind(b, t5, how);
  Value* q = b.op("Mul", {qkv3[0], b.scalar("scale", 1.0f / std::sqrt(float(D)))});
  Value* kt = b.op("Transpose", {qkv3[1]}, {Attribute::make_ints("perm", {0, 2, 1})});
  Value* s = add_rel_pos(b, b.op("MatMul", {q, kt}, {}, "qk"), qkv3[0]);
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, qkv3[2]}, {}, "pv");
  o = b.op("Reshape", {o, ints(b, "win", {B, H, Hh, Ww, D})}, {}, "out_window");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 3, 1, 4})}, "out_permute");
  o = b.op("Reshape", {o, ints(b, "out_target", {B, Hh, Ww, C})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({C, C}, 3))}, {}, "proj"));
}

int reshapes_to_rank(const Graph& g, size_t rank) {
  int n = 0;
  for (const auto& node : g.nodes())
    n += node->is("Reshape") && node->output(0)->shape && node->output(0)->shape->size() == rank;
  return n;
}

}  // namespace

TEST_CASE("flat_views: an axis-0 unbind of a view that keeps axis 0 moves before the view", "[passes][flat_views]") {
  for (Unbind how : {Unbind::Gather, Unbind::Slice, Unbind::Split}) {
    INFO("unbind spelling " << static_cast<int>(how));
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {3, B, H, S, D});
    auto pieces = unbind(b, x, how);
    b.output(b.op("Add", {b.op("Mul", {pieces[0], pieces[1]}), pieces[2]}));
    auto before = clone_graph(b.graph());
    run_passes(b.graph(), {"flat_views"});
    CHECK(reshapes_to_rank(b.graph(), 4) == 0);  // the [3, B·H, S, D] view is gone
    CHECK(reshapes_to_rank(b.graph(), 3) == 3);  // one [B·H, S, D] view per piece
    require_same_outputs(*before, b.graph(), {{"x", rand_tensor({3, B, H, S, D}, 5)}}, 0.0f);
  }
}

TEST_CASE("flat_views: views that do not keep axis 0, and other readers, are left alone", "[passes][flat_views]") {
  SECTION("the view merges axis 0") {
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {3, B, H, S, D});
    Value* flat = b.op("Reshape", {x, ints(b, "t", {3 * B, H, S, D})});
    b.output(b.op("Gather", {flat, b.constant("i", Tensor::from_ints({1}, {}))}, {Attribute::make_int("axis", 0)}));
    run_passes(b.graph(), {"flat_views"});
    CHECK(count_op(b.graph(), "Reshape") == 1);
  }
  SECTION("a reader that is not a selection") {
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {3, B, H, S, D});
    Value* flat = b.op("Reshape", {x, ints(b, "t", {3, B * H, S, D})});
    b.output(b.op("Gather", {flat, b.constant("i", Tensor::from_ints({1}, {}))}, {Attribute::make_int("axis", 0)}));
    b.output(b.op("Relu", {flat}));
    run_passes(b.graph(), {"flat_views"});
    CHECK(count_op(b.graph(), "Reshape") == 1);
    CHECK(count_op(b.graph(), "Gather") == 1);
  }
}

TEST_CASE("flat_views: terms added on the [X, h, w, h, w] view of the scores move to the flat scores",
          "[passes][flat_views]") {
  GraphBuilder b(17);
  Value* s = b.input("s", DType::Float, {B * H, S, S});
  Value* q = b.input("q", DType::Float, {B * H, S, D});
  b.output(b.op("Softmax", {add_rel_pos(b, s, q)}, {Attribute::make_int("axis", -1)}));
  auto before = clone_graph(b.graph());
  run_passes(b.graph(), {"flat_views"});
  CHECK(reshapes_to_rank(b.graph(), 5) == 0);
  require_same_outputs(*before, b.graph(), {{"s", rand_tensor({B * H, S, S}, 6)}, {"q", rand_tensor({B * H, S, D}, 7)}},
                       0.0f);
  SECTION("a rank-4 term is left alone") {
    GraphBuilder b2(17);
    Value* s2 = b2.input("s", DType::Float, {B * H, S, S});
    Value* q2 = b2.input("q", DType::Float, {B * H, S, D});
    b2.output(b2.op("Softmax", {add_rel_pos(b2, s2, q2, true)}, {Attribute::make_int("axis", -1)}));
    run_passes(b2.graph(), {"flat_views"});
    CHECK(reshapes_to_rank(b2.graph(), 5) == 1);
  }
}

TEST_CASE("Attention: ViTDet / transformers-4 SAM attention on flat [B*H, S, D] tensors fuses", "[passes][Attention]") {
  for (Unbind how : {Unbind::Gather, Unbind::Slice, Unbind::Split}) {
    INFO("unbind spelling " << static_cast<int>(how));
    GraphBuilder b(17);
    build_vitdet(b, how);
    auto before = clone_graph(b.graph());
    FusionReport r = run_passes(b.graph(), {"flat_views", "Attention"});
    INFO(reasons(r, "Attention"));
    REQUIRE(matched(r, "Attention") == 1);
    CHECK(count_op(b.graph(), "Softmax") == 0);
    require_same_outputs(*before, b.graph(), {{"x", rand_tensor({B, Hh, Ww, C}, 41, -2, 2)}}, 1e-4f);
  }
}

TEST_CASE("Attention: without the view canonicalizations the flat ViTDet block is refused with its reason",
          "[passes][Attention]") {
  GraphBuilder b(17);
  build_vitdet(b, Unbind::Gather);
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
}
