// concat_heads_merge: Reshape(Concat(head groups [.., n_i, D], axis -2), [.., N·D]) becomes a
// Concat of each group merged to [.., n_i·D] (axis -1), checked against the original on the
// CPU Session; with the Attention fusion after it, ConvBERT's mixed attention (attention heads
// concatenated with span-convolution heads before the output projection) fuses. Negatives:
// a Concat of another axis, a Reshape that does not merge the last two axes, a Concat with a
// second reader.
#include <cmath>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;

namespace {

constexpr int64_t B = 2, S = 5, H = 2, Hc = 1, D = 4, C = 16;

struct Opts {
  std::vector<int64_t> target = {B, S, (H + Hc) * D};  // the merge
  bool second_reader = false;
  bool shape_target = false;  // TorchScript: the target is cat.size()[:-2] + (N·D,)
  bool live_shape = false;    // Shape(cat) is also a graph output
};

// x [B, S, C] -> attention heads [B, S, H, D] ++ "convolution" heads [B, S, Hc, D] -> merged -> Wo.
void build(GraphBuilder& b, const Opts& o = {}) {
  Value* x = b.input("x", DType::Float, {B, S, C});
  auto proj = [&](const std::string& n, int64_t out, uint32_t seed) {
    return b.op("Add", {b.op("MatMul", {x, b.constant("W" + n, rand_tensor({C, out}, seed))}),
                        b.constant("b" + n, rand_tensor({out}, seed + 10))}, {}, n);
  };
  auto heads = [&](Value* v, const std::string& n, bool kt) {
    Value* r = b.op("Reshape", {v, ints(b, n + "_4d", {B, S, H, D})}, {}, n + "_view");
    return b.op("Transpose", {r}, {Attribute::make_ints("perm", kt ? std::vector<int64_t>{0, 2, 3, 1}
                                                                      : std::vector<int64_t>{0, 2, 1, 3})});
  };
  Value* q = heads(proj("q", H * D, 1), "q", false);
  Value* k = heads(proj("k", H * D, 2), "k", true);
  Value* v = heads(proj("v", H * D, 3), "v", false);
  Value* s = b.op("MatMul", {q, k}, {}, "qk");
  s = b.op("Div", {s, b.scalar("sqrt_d", std::sqrt(float(D)))});
  Value* p = b.op("Softmax", {s}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* a = b.op("Transpose", {b.op("MatMul", {p, v}, {}, "pv")}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "permute");
  Value* conv = b.op("Reshape", {proj("conv", Hc * D, 4), ints(b, "conv_4d", {B, S, Hc, D})}, {}, "conv_view");
  Value* cat = b.op("Concat", {a, conv}, {Attribute::make_int("axis", 2)}, "cat");
  Value* target = ints(b, "merge", o.target);
  if (o.shape_target) {
    Value* lead = b.op("Slice", {b.op("Shape", {cat}, {}, "cat_shape"), ints(b, "s0", {0}), ints(b, "s1", {2})});
    target = b.op("Concat", {lead, ints(b, "nd", {(H + Hc) * D})}, {Attribute::make_int("axis", 0)}, "target");
  }
  if (o.live_shape)
    b.output(b.op("Cast", {b.op("Shape", {cat}, {}, "cat_shape_out")}, {Attribute::make_int("to", 1)}, "shape_f"));
  Value* m = b.op("Reshape", {cat, target}, {}, "merge_heads");
  b.output(b.op("MatMul", {m, b.constant("Wo", rand_tensor({o.target.back(), C}, 5))}, {}, "out_proj"));
  if (o.second_reader) b.output(b.op("Relu", {cat}, {}, "other"));
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({B, S, C}, 41, -2, 2)}}; }

}  // namespace

TEST_CASE("concat_heads_merge: head groups concatenated then merged become merged groups concatenated",
          "[passes][concat_heads]") {
  GraphBuilder b(17);
  build(b);
  auto before = clone_graph(b.graph());
  run_passes(b.graph(), {"concat_heads_merge"});
  CHECK(count_op(b.graph(), "Concat") == 1);
  for (const auto& n : b.graph().nodes())
    if (n->is("Concat")) CHECK(n->attr_int("axis", 0) == 2);  // the last axis of [B, S, n·D]
  require_same_outputs(*before, b.graph(), feeds(), 1e-5f);
}

TEST_CASE("concat_heads_merge: a merge target read from the Concat's shape, a Shape reader kept live",
          "[passes][concat_heads]") {
  for (bool live : {false, true}) {
    INFO(std::string(live ? "Shape(cat) is also an output" : "Shape(cat) only feeds the target"));
    Opts o;
    o.shape_target = true;
    o.live_shape = live;
    GraphBuilder b(17);
    build(b, o);
    auto before = clone_graph(b.graph());
    FusionReport r = run_passes(b.graph(), {"concat_heads_merge", "Attention"});
    INFO(reasons(r, "Attention"));
    CHECK(matched(r, "Attention") == 1);
    require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
  }
}

TEST_CASE("Attention: ConvBERT's attention heads concatenated with other heads before the merge fuse",
          "[passes][Attention][concat_heads]") {
  GraphBuilder b(17);
  build(b);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"concat_heads_merge", "Attention"});
  INFO(reasons(r, "Attention"));
  CHECK(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  require_same_outputs(*before, b.graph(), feeds(), 1e-4f);
}

TEST_CASE("concat_heads_merge: other concatenations and reshapes are left alone", "[passes][concat_heads]") {
  SECTION("a Concat of the sequence axis") {
    GraphBuilder b(17);
    Value* x = b.input("x", DType::Float, {B, S, H, D});
    Value* y = b.input("y", DType::Float, {B, S, H, D});
    Value* cat = b.op("Concat", {x, y}, {Attribute::make_int("axis", 1)}, "cat");
    b.output(b.op("Reshape", {cat, ints(b, "merge", {B, 2 * S, H * D})}, {}, "merge"));
    run_passes(b.graph(), {"concat_heads_merge"});
    CHECK(count_op(b.graph(), "Reshape") == 1);
  }
  SECTION("a Reshape that does not merge the last two axes") {
    Opts o;
    o.target = {B * S, H + Hc, D};  // rank 3, but the last two axes are not merged
    GraphBuilder b(17);
    build(b, o);
    run_passes(b.graph(), {"concat_heads_merge"});
    int merges = 0;
    for (const auto& n : b.graph().nodes()) merges += n->is("Concat") && n->attr_int("axis", 0) == 2 &&
                                                       n->input(0)->shape && n->input(0)->shape->size() == 4;
    CHECK(merges == 1);  // the original head-axis Concat is still there
  }
  SECTION("a Concat with a second reader") {
    Opts o;
    o.second_reader = true;
    GraphBuilder b(17);
    build(b, o);
    auto before = clone_graph(b.graph());
    run_passes(b.graph(), {"concat_heads_merge"});
    CHECK(count_op(b.graph(), "Concat") == 1);
    CHECK(count_op(b.graph(), "Reshape") == count_op(*before, "Reshape"));
  }
}
