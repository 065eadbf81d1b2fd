// Attention fusion: attention sinks (GPT-OSS). transformers' eager GPT-OSS attention appends
// one learned logit per head to each row of the scores and drops its probability:
//   combined = Concat([w, Expand(Reshape(sinks, [1, H, 1, 1]), [B, H, S, 1])], -1)
//   combined = combined - ReduceMax(combined, -1, keepdims)    (optional)
//   P = Slice(Softmax(combined), 0 : -1 on the last axis);  out = P·V
// -> fuseopt.Attention with input 7 sinks [H] (passes/fusion/attention/sinks.h). Positive
// cases fuse each broadcast spelling (Reshape + Expand, a [1, H, 1, 1] initializer expanded
// to a Shape-built target as the dynamo exporter writes it, Unsqueeze, Tile, one logit for all
// heads, expanded or tiled over them), with and without the max subtraction, at opsets 17 and 18, and compare with the
// original graph on the CPU Session, fully padded rows included (all mass on the sink: 0).
// Negative cases check the rule and the reason the report gives.
#include <cmath>
#include <limits>

#include "support/fusion_check.h"
#include "support/int_constant.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 2, Dh = 4, D = H * Dh;

struct Form {
  char sink = 'R';          // R Reshape [H] + Expand; C [1,H,1,1] + Expand(Shape target); U Unsqueeze; T Tile;
                            // O one for all; H one for all, Tile repeating it over the heads
  bool max_sub = true;      // combined - ReduceMax(combined, -1, keepdims)
  float fill = -std::numeric_limits<float>::max();  // padding Where fill
  int64_t opset = 18;
  // Negative variants:
  char bad = 0;  // Q sink per query row, N batch, I sink from a graph input, K slice keeps the sink,
                 // A Concat on axis 2, F sink column first, M ReduceMax over the query axis, X no Slice,
                 // S a Shape read of the probabilities with the sink column
};

Value* heads(GraphBuilder& b, Value* x, const std::vector<int64_t>& perm, const std::string& n) {
  Value* r = b.op("Reshape", {x, ints(b, n + "_shape", {0, 0, H, Dh})}, {}, n + "_split_heads");
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", perm)}, n + "_t");
}

// Max over the last axis, keepdims 1 (axes an input from opset 18, an attribute before).
Value* reduce_max(GraphBuilder& b, Value* x, int64_t opset, int64_t axis) {
  if (opset >= 18) return b.op("ReduceMax", {x, ints(b, "max_axes", {axis})}, {Attribute::make_int("keepdims", 1)}, "rmax");
  return b.op("ReduceMax", {x}, {Attribute::make_ints("axes", {axis}), Attribute::make_int("keepdims", 1)}, "rmax");
}

void build(GraphBuilder& b, const Form& f) {
  Value* x = b.input("x", DType::Float, {B, S, D});
  Value* mask = b.input("mask", DType::Int64, {B, S});
  auto proj = [&](const std::string& n, uint32_t seed) {
    return b.op("MatMul", {x, b.constant("W" + n, rand_tensor({D, D}, seed))}, {}, n + "_proj");
  };
  Value* q4 = heads(b, proj("q", 1), {0, 2, 1, 3}, "q");
  Value* kt = heads(b, proj("k", 2), {0, 2, 3, 1}, "k");
  Value* v4 = heads(b, proj("v", 3), {0, 2, 1, 3}, "v");
  Value* s = b.op("Mul", {b.op("MatMul", {q4, kt}, {}, "qk"), b.scalar("scale", 0.5f)}, {}, "scaled");
  Value* keep = b.op("Cast", {b.op("Unsqueeze", {mask, ints(b, "m_axes", {1, 2})})}, {Attribute::make_int("to", 9)});
  s = b.op("Where", {keep, s, b.scalar("fill", f.fill)}, {}, "masked");
  // The sink column [B, H, S, 1] (or [B, H, 1, S] for the Concat on axis 2).
  const Tensor logits = rand_tensor({H}, 17, -1.5f, 1.5f);
  const std::vector<int64_t> col = f.bad == 'A' ? std::vector<int64_t>{B, H, 1, S} : std::vector<int64_t>{B, H, S, 1};
  Value* sink = nullptr;
  switch (f.bad ? 'X' : f.sink) {
    case 'R': sink = b.op("Reshape", {b.constant("sinks", logits), ints(b, "sink_view", {1, -1, 1, 1})}); break;
    case 'C': sink = b.constant("sinks", Tensor::from_floats({logits.data<float>()[0], logits.data<float>()[1]}, {1, H, 1, 1})); break;
    case 'U': sink = b.op("Unsqueeze", {b.constant("sinks", Tensor::from_floats({0.3f, -0.7f}, {H})), ints(b, "sink_axes", {0, 2, 3})}); break;
    case 'T': sink = b.constant("sinks", Tensor::from_floats({0.3f, -0.7f}, {1, H, 1, 1})); break;
    case 'O':
    case 'H': sink = b.constant("sinks", Tensor::from_floats({0.4f}, {1, 1, 1, 1})); break;
    default: sink = b.constant("sinks", Tensor::from_floats({0.3f, -0.7f}, {1, H, 1, 1})); break;
  }
  if (f.bad == 'Q') sink = b.constant("sinks_q", rand_tensor({1, H, S, 1}, 19));
  if (f.bad == 'N') sink = b.constant("sinks_b", rand_tensor({B, 1, 1, 1}, 19));
  if (f.bad == 'I') sink = b.input("sinks_in", DType::Float, {1, H, 1, 1});
  if (!f.bad && (f.sink == 'T' || f.sink == 'H')) {
    sink = b.op("Tile", {sink, ints(b, "reps", {B, f.sink == 'H' ? H : 1, S, 1})}, {}, "sink_col");
  } else if (!f.bad && f.sink == 'C') {  // the dynamo exporter's target: Concat(Shape(x)[0:1], [1], Shape(mask)[1:2], [1])
    Value* bdim = b.op("Shape", {x}, {Attribute::make_int("start", 0), Attribute::make_int("end", 1)});
    Value* sdim = b.op("Shape", {mask}, {Attribute::make_int("start", 1), Attribute::make_int("end", 2)});
    Value* one = ints(b, "one", {1});
    Value* target = b.op("Concat", {bdim, one, sdim, one}, {Attribute::make_int("axis", 0)});
    sink = b.op("Expand", {sink, target}, {}, "sink_col");
  } else {
    sink = b.op("Expand", {sink, ints(b, "sink_target", col)}, {}, "sink_col");
  }
  const int64_t cat_axis = f.bad == 'A' ? 2 : -1;
  Value* cat = f.bad == 'F' ? b.op("Concat", {sink, s}, {Attribute::make_int("axis", cat_axis)}, "combined")
                            : b.op("Concat", {s, sink}, {Attribute::make_int("axis", cat_axis)}, "combined");
  if (f.max_sub || f.bad == 'M')
    cat = b.op("Sub", {cat, reduce_max(b, cat, f.opset, f.bad == 'M' ? 2 : -1)}, {}, "shifted");
  Value* p = b.op("Softmax", {cat}, {Attribute::make_int("axis", -1)}, "softmax");
  if (f.bad == 'S') b.output(b.op("Shape", {p}, {}, "p_shape"));  // S_kv + 1 wide: no rebuilt shape serves it
  if (f.bad != 'X') {
    std::vector<int64_t> starts = {0}, ends = {-1}, axes = {cat_axis == 2 ? 2 : 3};
    if (f.bad == 'K') starts = {1}, ends = {std::numeric_limits<int64_t>::max()};
    if (f.bad == 'F') starts = {1}, ends = {std::numeric_limits<int64_t>::max()};
    if (f.opset >= 10)
      p = b.op("Slice", {p, ints(b, "starts", starts), ints(b, "ends", ends), ints(b, "axes", axes)}, {}, "drop_sink");
  } else {
    // No Slice: P·V reads every column, the sink's too (V given one more key row).
    v4 = b.op("Concat", {v4, b.constant("v_extra", rand_tensor({B, H, 1, Dh}, 23))}, {Attribute::make_int("axis", 2)});
  }
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(b.op("MatMul", {o, b.constant("Wo", rand_tensor({D, D}, 13))}, {}, "out_proj"));
}

std::map<std::string, Tensor> feeds(bool fully_padded) {
  std::vector<int64_t> m = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
  if (fully_padded) std::fill(m.begin(), m.begin() + S, 0);  // batch 0: no visible key, all mass on the sink
  return {{"x", rand_tensor({B, S, D}, 41, -3, 3)}, {"mask", Tensor::from_ints(m, {B, S})}};
}

const Node* attention(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "Attention" && n->domain == "fuseopt") return n.get();
  return nullptr;
}

void fuses(const Form& f) {
  INFO("sink " << f.sink << (f.max_sub ? " max_sub" : "") << " fill " << f.fill << " opset " << f.opset);
  GraphBuilder b(f.opset);
  build(b, f);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  CHECK(count_op(b.graph(), "ReduceMax") == 0);
  CHECK(count_op(b.graph(), "Slice") == 0);
  const Node* a = attention(b.graph());
  REQUIRE(a);
  REQUIRE(a->inputs.size() == 8);
  const Tensor* sinks = a->input(7) ? a->input(7)->const_data.get() : nullptr;
  REQUIRE(sinks);
  CHECK(sinks->dims == std::vector<int64_t>{H});
  CHECK(sinks->dtype == DType::Float);
  for (bool padded : {false, true}) {
    INFO((padded ? "batch 0 fully padded" : "partly padded"));
    require_same_outputs(*before, b.graph(), feeds(padded), 1e-5f);
  }
}

std::string rejected(const Form& f) {
  GraphBuilder b(f.opset);
  build(b, f);
  FusionReport r = run_passes(b.graph(), {"Attention"});
  CHECK(matched(r, "Attention") == 0);
  CHECK(count_op(b.graph(), "Softmax") == 1);
  return reasons(r, "Attention");
}

}  // namespace

TEST_CASE("Attention sinks: every broadcast spelling fuses with input 7 and matches", "[passes][attention]") {
  for (char sink : {'R', 'C', 'U', 'T', 'O', 'H'}) fuses({sink});
  fuses({'R', false});                                           // no max subtraction
  fuses({'C', true, -std::numeric_limits<float>::infinity()});  // -inf fill: the sink still takes the row, 0 not NaN
  fuses({'R', true, -std::numeric_limits<float>::max(), 17});   // ReduceMax axes as an attribute
}

TEST_CASE("Attention sinks: a sink that is not one logit per head is refused", "[passes][attention]") {
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'Q'}), Contains("rule 7") && Contains("query axis"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'N'}), Contains("rule 7") && Contains("batch axis"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'I'}), Contains("rule 7") && Contains("not a constant"));
}

TEST_CASE("Attention sinks: the Slice, the Concat and the max must be the sink's", "[passes][attention]") {
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'K'}), Contains("rule 7") && Contains("drops leading score columns"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'A'}), Contains("rule 7") && Contains("on axis 2"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'F'}), Contains("rule 7") && Contains("sink column first"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'M'}), Contains("rule 7") && Contains("not the row max"));
  CHECK_THAT(rejected({'R', false, -3e38f, 18, 'X'}), Contains("rule 7") && Contains("not sliced off"));
  CHECK_THAT(rejected({'R', true, -3e38f, 18, 'S'}), Contains("rule 1") && Contains("includes the sink column"));
}
