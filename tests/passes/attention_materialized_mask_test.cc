// Attention fusion on the boolean [B, 1, S, S] masks transformers 5 materialises
// (masking_utils through torch.export's vmap, or TorchScript's index arithmetic):
//   keep = And(And(ones, kv_idx <= q_idx), attention_mask[b, kv])
//   scores + Where(keep, 0, finfo.min)
// Positive forms become causal=1 + the compact `mask` input and no attn_bias; forms
// that are almost causal (strict <, offset ranges, kv < q + W) or gather
// something that is not attention_mask[b, kv] keep the tensor as attn_bias (the
// fusion still fires, exactly). A sliding window kv > q - W becomes window = W. Every case runs both graphs on the CPU Session.
#include <cmath>
#include <limits>

#include "ir/shape_inference.h"
#include "passes/fusion/attention/plan.h"
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t B = 2, S = 5, H = 2, Dh = 4, D = H * Dh;

enum class Pad { GatherND, FlatGather, Unsqueeze, SliceExpand, None };
enum class Cmp { Causal, CausalGe, Less, Bidirectional, SlidingWindow, SlidingWindowGe, WindowOnly, FutureWindow };

struct Spec {
  Pad pad = Pad::GatherND;
  Cmp cmp = Cmp::Causal;
  int64_t q_offset = 0;         // q_idx = Range(q_offset, S + q_offset)
  int64_t kv_offset = 0;        // kv_idx = Range(kv_offset, S + kv_offset)
  bool gather_square = false;   // GatherND from a [S, S] tensor instead of the [B, S] mask
  bool symbolic = false;        // batch / seq symbolic in the graph inputs
  bool keep_where = false;      // Where(keep, scores, min) instead of scores + Where(keep, 0, min)
  bool outer_expand = false;    // TorchScript's Expand of the And to [B, 1, S, S]
  bool mask_own_dims = false;   // the mask input has its own symbols (dynamo KV-cache steps); S from x
  // The sliding window's W (the Cmp::*Window* forms). 3 of S = 5 hides keys, and no padded
  // query's window is all padding: such a row (all its keys filled with finfo.min in the
  // original, uniform over all S keys) is uniform over its window's keys in the op — the
  // divergence docs/fused_ops.md states for causal rows at padded positions.
  int64_t window = 3;
  bool window_input = false;    // W read from a graph input (not a constant)
  DType t = DType::Float;       // the model's float type (Float16: model.half() before the export)
  float fill = -std::numeric_limits<float>::max();  // the Where's fill (finfo(t).min)
};

// A float tensor as `t` (Float16 rounds each element).
Tensor as_type(const Tensor& f, DType t) {
  if (t == DType::Float) return f;
  Tensor r(t, f.dims);
  for (int64_t i = 0; i < f.numel(); ++i) r.data<uint16_t>()[i] = float_to_half(f.data<float>()[i]);
  return r;
}

Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  int64_t len = static_cast<int64_t>(v.size());
  return b.constant(n, Tensor::from_ints(v, {len}));
}
Value* i64(GraphBuilder& b, const std::string& n, int64_t v) { return b.constant(n, Tensor::from_ints({v}, {})); }
Value* unsq(GraphBuilder& b, Value* x, std::vector<int64_t> axes) { return b.op("Unsqueeze", {x, ints(b, "ax", axes)}); }
Value* to_bool(GraphBuilder& b, Value* x) { return b.op("Cast", {x}, {Attribute::make_int("to", int64_t(DType::Bool))}); }

Value* heads(GraphBuilder& b, Value* x, std::vector<int64_t> perm, const std::string& n) {
  Value* r = b.op("Reshape", {x, ints(b, n + "_shape", {0, 0, H, Dh})}, {}, n + "_split_heads");
  return b.op("Transpose", {r}, {Attribute::make_ints("perm", perm)}, n + "_t");
}

// The keep condition [B, 1, S, S] (or [1, 1, S, S] without padding).
Value* keep_mask(GraphBuilder& b, const Spec& s, Value* x, Value* mask) {
  // Lengths read from the graph: S from the mask (the key length), B from x.
  Value* seq = b.op("Squeeze", {b.op("Shape", {s.mask_own_dims ? x : mask},
                                      {Attribute::make_int("start", 1), Attribute::make_int("end", 2)})});
  Value* bat = b.op("Squeeze", {b.op("Shape", {x}, {Attribute::make_int("start", 0), Attribute::make_int("end", 1)})});
  auto range = [&](int64_t off, Value* n) {
    Value* lo = i64(b, "lo", off);
    Value* hi = off ? b.op("Add", {n, lo}) : n;
    return b.op("Range", {lo, hi, i64(b, "one", 1)});
  };
  Value* kv_r = range(s.kv_offset, seq);
  Value* q_r = s.q_offset == s.kv_offset ? kv_r : range(s.q_offset, seq);
  Value* kv = unsq(b, unsq(b, kv_r, {0, 1}), {2});  // [1, 1, 1, S]
  Value* q = unsq(b, unsq(b, q_r, {0, 1}), {3});    // [1, 1, S, 1]
  Value* win = s.window_input ? b.input("window", DType::Int64, {}) : i64(b, "window", s.window);
  Value* cmp = nullptr;
  switch (s.cmp) {
    case Cmp::Causal: cmp = b.op("LessOrEqual", {kv, q}); break;
    case Cmp::CausalGe: cmp = b.op("GreaterOrEqual", {q, kv}); break;
    case Cmp::Less: cmp = b.op("Less", {kv, q}); break;
    case Cmp::Bidirectional: cmp = b.op("GreaterOrEqual", {kv, i64(b, "zero", 0)}); break;
    case Cmp::SlidingWindow:  // transformers' sliding_window_overlay: kv_idx > q_idx - W
      cmp = b.op("And", {b.op("LessOrEqual", {kv, q}), b.op("Greater", {kv, b.op("Sub", {q, win})})});
      break;
    case Cmp::SlidingWindowGe:  // q_idx - (W - 1) <= kv_idx, written the other way round
      cmp = b.op("And", {b.op("LessOrEqual", {b.op("Sub", {q, i64(b, "window_m1", s.window - 1)}), kv}),
                         b.op("GreaterOrEqual", {q, kv})});
      break;
    case Cmp::WindowOnly:  // no causal leaf: later keys stay visible
      cmp = b.op("Greater", {kv, b.op("Sub", {q, win})});
      break;
    case Cmp::FutureWindow:  // kv_idx < q_idx + W: bounds the keys from above, not a window of the past
      cmp = b.op("And", {b.op("LessOrEqual", {kv, q}), b.op("Less", {kv, b.op("Add", {q, win})})});
      break;
  }
  Tensor t(DType::Bool, {});
  t.bytes[0] = 1;
  Value* keep = b.op("And", {b.constant("new_ones", t), cmp});
  Value* padv = nullptr;
  Value* mb = to_bool(b, mask);
  if (s.pad == Pad::GatherND) {
    Value* bi = unsq(b, unsq(b, range(0, bat), {1, 2}), {3});  // [B, 1, 1, 1]
    Value* shp = b.op("Shape", {b.op("Max", {bi, kv})});
    Value* e0 = b.op("Expand", {bi, shp});
    Value* e1 = b.op("Expand", {kv, shp});
    Value* idx = b.op("Concat", {unsq(b, e0, {-1}), unsq(b, e1, {-1})}, {Attribute::make_int("axis", -1)});
    Value* data = mb;
    if (s.gather_square) data = to_bool(b, b.constant("square", Tensor::from_ints(std::vector<int64_t>(S * S, 1), {S, S})));
    padv = b.op("GatherND", {data, idx}, {Attribute::make_int("batch_dims", 0)});
  } else if (s.pad == Pad::FlatGather) {
    Value* bi = unsq(b, unsq(b, unsq(b, range(0, bat), {1}), {2}), {3});
    Value* idx = b.op("Add", {kv, b.op("Mul", {bi, seq})});
    Value* g = b.op("Gather", {b.op("Flatten", {mb}, {Attribute::make_int("axis", 2)}), idx}, {Attribute::make_int("axis", 0)});
    padv = to_bool(b, b.op("Reshape", {b.op("Reshape", {g, ints(b, "flat", {-1})}), b.op("Shape", {idx})}));
  } else if (s.pad == Pad::Unsqueeze) {
    padv = unsq(b, mb, {1, 2});
  } else if (s.pad == Pad::SliceExpand) {  // mask[:, None, None, :S_kv] expanded to [B, 1, S, S]
    Value* sl = b.op("Slice", {unsq(b, mb, {1, 2}), ints(b, "s0", {0}), ints(b, "s_end", {INT64_MAX}), ints(b, "s_ax", {-1})});
    padv = b.op("Expand", {sl, b.op("Concat", {ints(b, "e01", {1, 1}), b.op("Shape", {x}, {Attribute::make_int("start", 1),
                                                                                         Attribute::make_int("end", 2)}),
                                               b.op("Shape", {mask}, {Attribute::make_int("start", 1)})},
                                         {Attribute::make_int("axis", 0)})});
  }
  if (padv) keep = b.op("And", {keep, padv});
  if (s.outer_expand) keep = b.op("Expand", {keep, ints(b, "full", {B, 1, S, S})});
  return keep;
}

void build(GraphBuilder& b, const Spec& s) {
  std::vector<std::string> sym = {"batch", "seq"};
  Value* x = s.symbolic ? b.input("x", DType::Float, {-1, -1, D}, {"batch", "seq", ""}) : b.input("x", DType::Float, {B, S, D});
  Value* mask = s.mask_own_dims ? b.input("mask", DType::Int64, {-1, -1}, {"mask_batch", "mask_len"})
                : s.symbolic    ? b.input("mask", DType::Int64, {-1, -1}, sym)
                                : b.input("mask", DType::Int64, {B, S});
  Value* xt = s.t == DType::Float ? x : b.op("Cast", {x}, {Attribute::make_int("to", int64_t(s.t))}, "x_half");
  auto proj = [&](const std::string& n, uint32_t seed) {
    return b.op("MatMul", {xt, b.constant("W" + n, as_type(rand_tensor({D, D}, seed), s.t))});
  };
  Value* q4 = heads(b, proj("q", 3), {0, 2, 1, 3}, "q");
  Value* kt = heads(b, proj("k", 5), {0, 2, 3, 1}, "k");
  Value* v4 = heads(b, proj("v", 7), {0, 2, 1, 3}, "v");
  auto scalar = [&](const std::string& n, float v) { return b.constant(n, as_type(Tensor::scalar_float(v), s.t)); };
  Value* sc = b.op("Mul", {b.op("MatMul", {q4, kt}, {}, "qk"), scalar("c", 1.0f / std::sqrt(float(Dh)))}, {}, "scale");
  Value* keep = keep_mask(b, s, x, mask);
  Value* minv = scalar("min", s.fill);
  if (s.keep_where) sc = b.op("Where", {keep, sc, minv}, {}, "mask_where");
  else sc = b.op("Add", {sc, b.op("Where", {keep, scalar("zero_f", 0.0f), minv}, {}, "where")}, {}, "mask_add");
  Value* p = b.op("Softmax", {sc}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  if (s.t != DType::Float) o = b.op("Cast", {o}, {Attribute::make_int("to", int64_t(DType::Float))}, "y_float");
  b.output(o);
}

std::map<std::string, Tensor> feeds(const Spec& s = {}) {
  // Right padding (the exporters' test data): batch 1 masks its last 2 keys.
  std::map<std::string, Tensor> f = {{"x", rand_tensor({B, S, D}, 41, -2, 2)},
                                     {"mask", Tensor::from_ints({1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {B, S})}};
  if (s.window_input) f["window"] = Tensor::from_ints({s.window}, {});
  return f;
}

// Why the mask term stayed attn_bias: the plan's notes (what `fuseopt -vv` logs).
std::string notes(const Spec& s) {
  GraphBuilder b(18);
  build(b, s);
  infer_shapes(b.graph());
  Node* root = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->name == "out_merge") root = n.get();
  REQUIRE(root);
  attn::Plan pl;
  REQUIRE(attn::analyze(b.graph(), root, pl).empty());
  std::string r;
  for (const std::string& n : pl.mask_notes) r += n + "\n";
  return r;
}

const Node* fused(const Spec& s, GraphBuilder& b) {
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention", "dce"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  // The CPU backend widens half nodes to fp32; the original rounds between them.
  require_same_outputs(*before, b.graph(), feeds(s), s.t == DType::Float ? 1e-4f : 5e-3f);
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") return n.get();
  FAIL("no Attention node");
  return nullptr;
}

// causal=1 + mask = the graph input, no attn_bias, and the S x S mask build is gone.
void expect_compact(const Spec& s, bool causal, bool padding, int64_t window = 0) {
  GraphBuilder b(18);
  const Node* a = fused(s, b);
  CHECK(a->attr_int("causal", -1) == (causal ? 1 : 0));
  CHECK(a->attr_int("window", 0) == window);
  CHECK(a->inputs.size() == (padding ? 4u : 3u));  // Q, K, V (+ mask), no attn_bias (input 4)
  if (padding) {
    REQUIRE(a->input(3));
    CHECK(a->input(3)->name == "mask");
    CHECK(a->attr_float("mask_filter_value", 0) == s.fill);
  }
  CHECK(count_op(b.graph(), "GatherND") == 0);
  CHECK(count_op(b.graph(), "Range") == 0);
  CHECK(count_op(b.graph(), "Where") == 0);
}

// The mask stays a materialised attn_bias tensor (the fusion itself still fires).
void expect_bias(const Spec& s) {
  GraphBuilder b(18);
  const Node* a = fused(s, b);
  CHECK(a->attr_int("causal", -1) == 0);
  CHECK(a->inputs.size() == 5);
  CHECK(a->input(3) == nullptr);
  CHECK(a->input(4) != nullptr);
}

}  // namespace

TEST_CASE("Attention mask: transformers-5 dynamo causal + GatherND padding -> causal=1 + mask", "[passes][Attention]") {
  for (bool symbolic : {false, true}) {
    INFO("symbolic " << symbolic);
    Spec s;
    s.symbolic = symbolic;
    expect_compact(s, true, true);
  }
}

TEST_CASE("Attention mask: TorchScript's flat Gather at b*S + kv, Expand of the And, q >= kv", "[passes][Attention]") {
  for (bool symbolic : {false, true}) {
    INFO("symbolic " << symbolic);
    Spec s;
    s.pad = Pad::FlatGather;
    s.cmp = Cmp::CausalGe;
    s.outer_expand = !symbolic;
    s.symbolic = symbolic;
    expect_compact(s, true, true);
  }
}

TEST_CASE("Attention mask: padding through Unsqueeze (or Slice + Expand), a keep-Where on the scores, causal only", "[passes][Attention]") {
  Spec s;
  s.pad = Pad::Unsqueeze;
  s.keep_where = true;
  expect_compact(s, true, true);
  Spec c;
  c.pad = Pad::None;
  expect_compact(c, true, false);
  for (bool symbolic : {false, true}) {
    Spec e;
    e.pad = Pad::SliceExpand;
    e.symbolic = symbolic;
    expect_compact(e, true, true);
  }
}

TEST_CASE("Attention mask: bidirectional (kv_idx >= 0) + padding -> mask only", "[passes][Attention]") {
  for (Pad p : {Pad::GatherND, Pad::FlatGather}) {
    Spec s;
    s.pad = p;
    s.cmp = Cmp::Bidirectional;
    s.symbolic = true;
    expect_compact(s, false, true);
  }
}

TEST_CASE("Attention mask: almost-causal forms stay attn_bias, with the reason", "[passes][Attention]") {
  SECTION("kv < q (strict) excludes the diagonal") {
    Spec s;
    s.cmp = Cmp::Less;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("Less") && Contains("is not a causal or key-padding term") &&
                             Contains("nor a sliding window"));
  }
  SECTION("offset ranges: q from 1 (j <= i + 1)") {
    Spec s;
    s.q_offset = 1;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("the query index is not Range(S_kv - S_q, S_kv)"));
  }
  SECTION("both ranges from 1 (the same comparison, but not Range(0, S_kv) key indices)") {
    Spec s;
    s.q_offset = s.kv_offset = 1;
    s.pad = Pad::None;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("the key index is not Range(0, S_kv)"));
  }
  SECTION("kv < q + W bounds the keys from above: not a window over the past") {
    Spec s;
    s.cmp = Cmp::FutureWindow;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("Less") && Contains("nor a sliding window"));
  }
}

TEST_CASE("Attention mask: a sliding window (kv > q - W) -> causal=1 + window=W + mask", "[passes][Attention]") {
  // W = 3 of S = 5 keys: the window hides keys, so the check compares a real difference.
  for (bool symbolic : {false, true}) {
    for (Cmp cmp : {Cmp::SlidingWindow, Cmp::SlidingWindowGe}) {
      INFO("symbolic " << symbolic << " form " << int(cmp));
      Spec s;
      s.cmp = cmp;
      s.symbolic = symbolic;
      expect_compact(s, true, true, 3);
    }
  }
  SECTION("window 2, no padding") {
    Spec s;
    s.cmp = Cmp::SlidingWindow;
    s.window = 2;
    s.pad = Pad::None;
    expect_compact(s, true, false, 2);
  }
  SECTION("a window without a causal leaf (later keys stay visible)") {
    Spec s;
    s.cmp = Cmp::WindowOnly;
    expect_compact(s, false, true, 3);
  }
  SECTION("a window wider than the sequence hides nothing and is kept all the same") {
    Spec s;
    s.cmp = Cmp::SlidingWindow;
    s.window = 4096;
    expect_compact(s, true, true, 4096);
  }
}

TEST_CASE("Attention mask: sliding windows that are not provable stay attn_bias, with the reason", "[passes][Attention]") {
  SECTION("W from a graph input (not a constant)") {
    Spec s;
    s.cmp = Cmp::SlidingWindow;
    s.window_input = true;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("Greater") && Contains("nor a sliding window"));
  }
  SECTION("W = 0 hides every key") {
    Spec s;
    s.cmp = Cmp::SlidingWindow;
    s.window = 0;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("hides every key"));
  }
  SECTION("a window over key indices that are not Range(0, S_kv) (both ranges from 1)") {
    Spec s;
    s.cmp = Cmp::WindowOnly;
    s.q_offset = s.kv_offset = 1;
    s.pad = Pad::None;
    expect_bias(s);
    CHECK_THAT(notes(s), Contains("the key index is not Range(0, S_kv)"));
  }
  SECTION("q from 1 is the same comparison one key narrower: window 2, exact") {
    Spec s;
    s.cmp = Cmp::WindowOnly;
    s.q_offset = 1;
    s.pad = Pad::None;
    expect_compact(s, false, false, 2);
  }
}

TEST_CASE("Attention mask: a gather from a tensor that is not the keys' [B, S_kv] mask stays attn_bias", "[passes][Attention]") {
  Spec s;
  s.gather_square = true;  // GatherND of a [S, S] table at (b, kv)
  s.cmp = Cmp::Bidirectional;
  expect_bias(s);
  CHECK_THAT(notes(s), Contains("not a gather of the keys' [B, S_kv] mask"));
}

// ---- static-shape exports: constant folding turned the causal term (and the padding
// gather's index grid) into constant tensors --------------------------------------------
namespace {

enum class Table { Causal, OffByOne, TopLeft, Flipped, Window };
enum class ConstPad { GatherND, FlatGather, GatherNDBatch0, None };

struct ConstSpec {
  int64_t sq = 3, skv = 7;  // a KV-cache step: keys [0, skv), queries at skv - sq ..
  Table table = Table::Causal;
  ConstPad pad = ConstPad::GatherND;
  bool additive = false;  // a float 0 / finfo.min table added to the scores (no padding)
};

// The table's keep(i, j) (or its additive 0 / finfo.min form).
Tensor const_table(const ConstSpec& s) {
  const bool add = s.additive;
  Tensor t(add ? DType::Float : DType::Bool, {1, 1, s.sq, s.skv});
  for (int64_t i = 0; i < s.sq; ++i)
    for (int64_t j = 0; j < s.skv; ++j) {
      int64_t lim = i + s.skv - s.sq;                 // bottom-right causal
      if (s.table == Table::OffByOne) lim += 1;      // one more key per row
      if (s.table == Table::TopLeft) lim = i;        // top-left aligned
      bool keep = j <= lim;
      if (s.table == Table::Window) keep = keep && i + s.skv - s.sq - j < 3;  // a 3-key sliding window
      if (s.table == Table::Flipped && i == s.sq - 1 && j == 1) keep = !keep;
      const int64_t p = i * s.skv + j;
      if (add) reinterpret_cast<float*>(t.bytes.data())[p] = keep ? 0.0f : -std::numeric_limits<float>::max();
      else t.bytes[p] = keep ? 1 : 0;
    }
  return t;
}

void build_const(GraphBuilder& b, const ConstSpec& s) {
  Value* x = b.input("x", DType::Float, {B, s.sq, D});
  Value* xkv = b.input("xkv", DType::Float, {B, s.skv, D});
  Value* mask = s.pad == ConstPad::None ? nullptr : b.input("mask", DType::Int64, {B, s.skv});
  auto proj = [&](Value* in, const std::string& n, uint32_t seed) {
    return b.op("MatMul", {in, b.constant("W" + n, rand_tensor({D, D}, seed))});
  };
  Value* q4 = heads(b, proj(x, "q", 3), {0, 2, 1, 3}, "q");
  Value* kt = heads(b, proj(xkv, "k", 5), {0, 2, 3, 1}, "k");
  Value* v4 = heads(b, proj(xkv, "v", 7), {0, 2, 1, 3}, "v");
  Value* sc = b.op("Mul", {b.op("MatMul", {q4, kt}, {}, "qk"), b.scalar("c", 1.0f / std::sqrt(float(Dh)))}, {}, "scale");
  Value* minv = b.scalar("min", -std::numeric_limits<float>::max());
  if (s.additive) {
    sc = b.op("Add", {sc, b.constant("causal_table", const_table(s))}, {}, "mask_add");
  } else {
    Value* keep = b.constant("causal_table", const_table(s));
    if (mask) {
      Value* mb = to_bool(b, mask);
      Value* padv = nullptr;
      if (s.pad == ConstPad::FlatGather) {  // TorchScript, folded: idx = b * S_kv + j
        std::vector<int64_t> idx;
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t j = 0; j < s.skv; ++j) idx.push_back(bb * s.skv + j);
        Value* g = b.op("Gather", {b.op("Flatten", {mb}, {Attribute::make_int("axis", 2)}),
                                   b.constant("flat_idx", Tensor::from_ints(idx, {B, 1, 1, s.skv}))},
                        {Attribute::make_int("axis", 0)});
        padv = b.op("Reshape", {b.op("Reshape", {g, ints(b, "flat", {-1})}), ints(b, "grid_dims", {B, 1, 1, s.skv})});
      } else {  // dynamo, folded: the (b, j) grid
        std::vector<int64_t> idx;
        for (int64_t bb = 0; bb < B; ++bb)
          for (int64_t j = 0; j < s.skv; ++j) {
            idx.push_back(s.pad == ConstPad::GatherNDBatch0 ? 0 : bb);
            idx.push_back(j);
          }
        padv = b.op("GatherND", {mb, b.constant("grid", Tensor::from_ints(idx, {B, 1, 1, s.skv, 2}))},
                    {Attribute::make_int("batch_dims", 0)});
      }
      keep = b.op("And", {keep, padv});
    }
    sc = b.op("Add", {sc, b.op("Where", {keep, b.scalar("zero_f", 0.0f), minv}, {}, "where")}, {}, "mask_add");
  }
  Value* p = b.op("Softmax", {sc}, {Attribute::make_int("axis", -1)}, "softmax");
  Value* o = b.op("MatMul", {p, v4}, {}, "pv");
  o = b.op("Transpose", {o}, {Attribute::make_ints("perm", {0, 2, 1, 3})}, "out_t");
  o = b.op("Reshape", {o, ints(b, "merge", {0, 0, -1})}, {}, "out_merge");
  b.output(o);
}

std::map<std::string, Tensor> const_feeds(const ConstSpec& s) {
  std::vector<int64_t> m(B * s.skv, 1);
  // Batch 1: its last two keys padded (right padding; a left-padded row with no visible
  // key differs by design, docs/fused_ops.md).
  m[2 * s.skv - 1] = m[2 * s.skv - 2] = 0;
  std::map<std::string, Tensor> f = {{"x", rand_tensor({B, s.sq, D}, 41, -2, 2)},
                                     {"xkv", rand_tensor({B, s.skv, D}, 43, -2, 2)}};
  if (s.pad != ConstPad::None) f["mask"] = Tensor::from_ints(m, {B, s.skv});
  return f;
}

std::string const_notes(const ConstSpec& s) {
  GraphBuilder b(18);
  build_const(b, s);
  infer_shapes(b.graph());
  Node* root = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->name == "out_merge") root = n.get();
  REQUIRE(root);
  attn::Plan pl;
  REQUIRE(attn::analyze(b.graph(), root, pl).empty());
  std::string r;
  for (const std::string& n : pl.mask_notes) r += n + "\n";
  return r;
}

// Fuses and checks the outputs; returns the Attention node.
const Node* const_fused(const ConstSpec& s, GraphBuilder& b) {
  build_const(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention", "dce"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  CHECK(count_op(b.graph(), "Softmax") == 0);
  require_same_outputs(*before, b.graph(), const_feeds(s), 1e-4f);
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") return n.get();
  FAIL("no Attention node");
  return nullptr;
}

// causal=1 unless the table is all true (S_q = 1: every key visible), which drops out.
void expect_const_compact(const ConstSpec& s, bool padding) {
  GraphBuilder b(18);
  const Node* a = const_fused(s, b);
  CHECK(a->attr_int("causal", -1) == (s.sq > 1 ? 1 : 0));
  CHECK(a->inputs.size() == (padding ? 4u : 3u));
  if (padding) {
    REQUIRE(a->input(3));
    CHECK(a->input(3)->name == "mask");
    CHECK(a->attr_float("mask_filter_value", 0) == -std::numeric_limits<float>::max());
  }
  CHECK(count_op(b.graph(), "GatherND") == 0);
  CHECK(count_op(b.graph(), "Where") == 0);
}

void expect_const_bias(const ConstSpec& s) {
  GraphBuilder b(18);
  const Node* a = const_fused(s, b);
  CHECK(a->attr_int("causal", -1) == 0);
  CHECK(a->inputs.size() == 5);
  CHECK(a->input(4) != nullptr);
}

}  // namespace

TEST_CASE("Attention mask: constant-folded causal table + constant padding grid -> causal=1 + mask", "[passes][Attention]") {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{3, 7}, {5, 5}, {1, 4}}) {
    for (ConstPad p : {ConstPad::GatherND, ConstPad::FlatGather}) {
      INFO("S_q " << sq << ", S_kv " << skv << ", flat gather " << (p == ConstPad::FlatGather));
      ConstSpec s;
      s.sq = sq;
      s.skv = skv;
      s.pad = p;
      expect_const_compact(s, true);
    }
  }
  SECTION("a float additive table (0 / finfo.min), no padding") {
    ConstSpec s;
    s.additive = true;
    s.pad = ConstPad::None;
    expect_const_compact(s, false);
  }
}

TEST_CASE("Attention mask: a constant-folded causal table under a sliding window -> causal=1 + window", "[passes][Attention]") {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{3, 7}, {5, 5}}) {
    for (bool additive : {false, true}) {
      INFO("S_q " << sq << ", S_kv " << skv << ", additive " << additive);
      ConstSpec s;
      s.sq = sq;
      s.skv = skv;
      s.table = Table::Window;
      s.additive = additive;
      if (additive) s.pad = ConstPad::None;
      GraphBuilder b(18);
      const Node* a = const_fused(s, b);
      CHECK(a->attr_int("causal", -1) == 1);
      CHECK(a->attr_int("window", 0) == 3);
      CHECK(a->input(4) == nullptr);
    }
  }
}

TEST_CASE("Attention mask: constant tables that are not exactly bottom-right causal stay attn_bias", "[passes][Attention]") {
  SECTION("off by one (j <= i + S_kv - S_q + 1)") {
    ConstSpec s;
    s.table = Table::OffByOne;
    expect_const_bias(s);
    CHECK_THAT(const_notes(s), Contains("causal_table") && Contains("is not the bottom-right causal table") &&
                                   Contains("element [0, 5] differs"));
  }
  SECTION("top-left aligned (j <= i) with S_q != S_kv") {
    ConstSpec s;
    s.table = Table::TopLeft;
    expect_const_bias(s);
    CHECK_THAT(const_notes(s), Contains("is not the bottom-right causal table"));
  }
  SECTION("one flipped element") {
    ConstSpec s;
    s.table = Table::Flipped;
    expect_const_bias(s);
    CHECK_THAT(const_notes(s), Contains("element [2, 1] differs"));
  }
  SECTION("a float additive table, top-left aligned") {
    ConstSpec s;
    s.additive = true;
    s.pad = ConstPad::None;
    s.table = Table::TopLeft;
    expect_const_bias(s);
    CHECK_THAT(const_notes(s), Contains("is not the bottom-right causal table"));
  }
  SECTION("a constant gather grid that reads batch 0 for every batch") {
    ConstSpec s;
    s.pad = ConstPad::GatherNDBatch0;
    expect_const_bias(s);
    CHECK_THAT(const_notes(s), Contains("are not the (b, j) grid"));
  }
}

// model.half() exports mask with finfo(float16).min = -65504 added to fp16 scores: taken as the
// mask fill (docs/fused_ops.md); any other finite fill, or -65504 added to fp32 scores (where it
// does not absorb a score), stays attn_bias with the reason.
TEST_CASE("Attention mask: float16 exports' finfo(float16).min fill -> causal=1 + mask", "[passes][Attention]") {
  for (Pad p : {Pad::GatherND, Pad::FlatGather}) {
    Spec s;
    s.pad = p;
    s.t = DType::Float16;
    s.fill = -65504.0f;
    expect_compact(s, true, true);
  }
  Spec other;
  other.t = DType::Float16;
  other.fill = -60000.0f;
  expect_bias(other);
  CHECK_THAT(notes(other), Contains("nor float16's lowest (-65504)"));
  Spec fp32;
  fp32.fill = -65504.0f;
  expect_bias(fp32);
  CHECK_THAT(notes(fp32), Contains("is not <= -1e30"));
}

// The dynamo exporter's KV-cache steps give attention_mask its own symbols, so its dims are not
// provably [B, S_kv]; a GatherND at the proven (b, kv) grid reads mask[:B, :S_kv] whatever they
// are: the rewrite slices it (ends = the grid's Range limits) and the op gets the compact mask.
// Checked with a mask larger than [B, S_kv] (the original reads its top-left block). The flat
// Gather (index b*S_kv + kv assumes the row length) is not sliced: it stays attn_bias.
TEST_CASE("Attention mask: a GatherND'd mask of unprovable dims is sliced to [B, S_kv]", "[passes][Attention]") {
  Spec s;
  s.mask_own_dims = true;
  GraphBuilder b(18);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"Attention", "dce"});
  INFO(reasons(r, "Attention"));
  REQUIRE(matched(r, "Attention") == 1);
  const Node* a = nullptr;
  for (const auto& n : b.graph().nodes())
    if (n->op_type == "Attention") a = n.get();
  REQUIRE(a);
  CHECK(a->attr_int("causal", -1) == 1);
  REQUIRE(a->inputs.size() == 4u);
  REQUIRE(a->input(3));
  REQUIRE(a->input(3)->producer);
  CHECK(a->input(3)->producer->op_type == "Slice");
  CHECK(count_op(b.graph(), "GatherND") == 0);
  for (int extra : {0, 3}) {
    INFO("mask columns beyond S_kv: " << extra);
    std::vector<int64_t> m((B + 1) * (S + extra), 1);
    for (int64_t j = S - 2; j < S + extra; ++j) m[1 * (S + extra) + j] = 0;  // batch 1 pads its last keys
    for (int64_t j = 0; j < S + extra; ++j) m[2 * (S + extra) + j] = 0;      // a row the op never reads
    std::map<std::string, Tensor> f{{"x", rand_tensor({B, S, D}, 41, -2, 2)},
                                    {"mask", Tensor::from_ints(m, {B + 1, S + extra})}};
    require_same_outputs(*before, b.graph(), f, 1e-4f);
  }
  Spec flat = s;
  flat.pad = Pad::FlatGather;
  expect_bias(flat);
}
