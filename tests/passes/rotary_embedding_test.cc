// RotaryEmbedding fusion: HF rotate_half (full and partial rotary, Llama /
// NeoX / Phi), the interleaved rotate_every_two of GPT-J ([B, S, H, D], the
// 3-D op form) and RoFormer ([B, H, S, D]), fp32 and fp16, the cos/sin
// tables built once per model; and one negative test per legality rule with
// the report's reason.
#include <limits>

#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kB = 2, kH = 3, kS = 5;
constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

enum class Neg { SecondHalf, FirstHalf };

struct Spec {
  int64_t d = 8;             // head size
  int64_t r = 8;             // rotated width (< d: partial rotary)
  bool interleaved = false;  // rotate_every_two
  bool bshd = false;         // x is [B, S, H, D] (GPT-J: rotary before the head transpose)
  bool tile_repeat = false;  // interleaved cos as Concat(u, u) instead of Expand(u, ..2)
  DType dt = DType::Float;
  bool ts_chain = false;     // cos = Cast(Mul(Cos(emb), 1.0)): the TorchScript spelling
  // Legality variations.
  int64_t split = -1;        // slice point of rotate_half (-1: R/2)
  Neg neg = Neg::SecondHalf;
  bool x1_first = false;     // Concat(x1, -x2)
  bool pass_first = false;   // partial: Concat(x_pass, y)
  bool neg_is_output = false;
  bool cos_not_doubled = false;  // cos = Cos(g) with g [1, S, R] an input
  bool cos_per_head = false;     // freqs [1, H, S, R/2]: cos varies over heads
  bool cos_other_dtype = false;  // cos in float16 under a float32 x
  // Interleaved, Cohere's spelling: cos(repeat_interleave(freqs, 2)) * scaling, the elementwise ops
  // after the repeat; with a [R] vector instead of the scalar they no longer commute with it.
  bool cos_after_repeat = false;
  bool scaling_vector = false;
};

Value* ints(GraphBuilder& b, const std::string& n, std::vector<int64_t> v) {
  return b.constant(n, Tensor::from_ints(v, {static_cast<int64_t>(v.size())}));
}

Value* slice(GraphBuilder& b, Value* x, int64_t start, int64_t end, int64_t step = 1) {
  static int k = 0;
  const std::string p = "sl" + std::to_string(k++);
  std::vector<Value*> in{x, ints(b, p + "_s", {start}), ints(b, p + "_e", {end}), ints(b, p + "_a", {-1})};
  if (step != 1) in.push_back(ints(b, p + "_t", {step}));
  return b.op("Slice", in);
}

Value* unsqueeze(GraphBuilder& b, Value* x, std::vector<int64_t> axes) {
  static int k = 0;
  return b.op("Unsqueeze", {x, ints(b, "uq" + std::to_string(k++), axes)});
}

std::vector<int64_t> x_dims(const Spec& s) {
  return s.bshd ? std::vector<int64_t>{kB, kS, kH, s.d} : std::vector<int64_t>{kB, kH, kS, s.d};
}

// cos and sin as the Mul operands of x ([1, 1, S, R] or [1, S, 1, R]).
std::pair<Value*, Value*> tables(GraphBuilder& b, const Spec& s) {
  const int64_t h = s.r / 2;
  const DType cdt = s.cos_other_dtype ? DType::Float16 : s.dt;
  auto finish = [&](Value* t) {
    if (s.ts_chain) t = b.op("Mul", {t, b.scalar(b.graph().unique_name("one"), 1.0f)});
    if (cdt != DType::Float) t = b.op("Cast", {t}, {Attribute::make_int("to", static_cast<int64_t>(cdt))});
    return t;
  };
  if (!s.interleaved) {
    Value* emb;
    if (s.cos_not_doubled) {
      emb = b.input("freqs", DType::Float, {1, kS, s.r});
    } else if (s.cos_per_head) {
      Value* f = b.input("freqs", DType::Float, {1, kH, kS, h});
      emb = b.op("Concat", {f, f}, {Attribute::make_int("axis", -1)});
    } else {
      Value* f = b.input("freqs", DType::Float, {1, kS, h});
      emb = b.op("Concat", {f, f}, {Attribute::make_int("axis", -1)});
    }
    Value* c = finish(b.op("Cos", {emb}));
    Value* sn = finish(b.op("Sin", {emb}));
    if (s.cos_per_head) return {c, sn};
    const int64_t head_axis = s.bshd ? 2 : 1;
    return {unsqueeze(b, c, {head_axis}), unsqueeze(b, sn, {head_axis})};
  }
  // Interleaved: repeat_interleave(table [1, S, R/2], 2) on the last axis.
  Value* f = b.input("freqs", DType::Float, {1, kS, h});
  auto repeat = [&](Value* t) {
    t = finish(t);
    if (s.bshd) {  // GPT-J dynamo: Unsqueeze([2, 4]) -> Expand(.., 2) -> Reshape [1, -1, 1, R]
      Value* u = unsqueeze(b, t, {2, 4});
      Value* e = b.op("Expand", {u, ints(b, b.graph().unique_name("ex"), {1, 1, 1, 1, 2})});
      return b.op("Reshape", {e, ints(b, b.graph().unique_name("rs"), {1, -1, 1, s.r})});
    }
    // RoFormer: Unsqueeze(1) -> Unsqueeze(-1) -> Concat(u, u) -> Reshape [1, 1, -1, R]
    Value* u = unsqueeze(b, unsqueeze(b, t, {1}), {-1});
    Value* p = s.tile_repeat ? b.op("Tile", {u, ints(b, b.graph().unique_name("tl"), {1, 1, 1, 1, 2})})
                             : b.op("Concat", {u, u}, {Attribute::make_int("axis", -1)});
    return b.op("Reshape", {p, ints(b, b.graph().unique_name("rs"), {1, 1, -1, s.r})});
  };
  if (s.cos_after_repeat) {
    Value* rf = repeat(f);
    Value* scaling = s.scaling_vector ? b.constant(b.graph().unique_name("scaling"), rand_tensor({s.r}, 3, 0.5f, 1.5f))
                                      : b.scalar(b.graph().unique_name("scaling"), 0.75f);
    return {b.op("Mul", {b.op("Cos", {rf}), scaling}), b.op("Mul", {b.op("Sin", {rf}), scaling})};
  }
  return {repeat(b.op("Cos", {f})), repeat(b.op("Sin", {f}))};
}

// y = x*cos + rot(x)*sin on xr (partial: Concat(y, x[..., R:])).
Value* rope(GraphBuilder& b, const Spec& s, Value* x, Value* cos, Value* sin) {
  const bool partial = s.r < s.d;
  Value* xr = partial ? slice(b, x, 0, s.r) : x;
  Value* rot;
  if (!s.interleaved) {
    const int64_t h = s.split > 0 ? s.split : s.r / 2;
    Value* x1 = slice(b, xr, 0, h);
    Value* x2 = slice(b, xr, h, kEnd);
    Value* n = s.neg == Neg::SecondHalf ? b.op("Neg", {x2}) : b.op("Neg", {x1});
    if (s.neg_is_output) b.output(n);
    Value* other = s.neg == Neg::SecondHalf ? x1 : x2;
    rot = s.x1_first ? b.op("Concat", {other, n}, {Attribute::make_int("axis", -1)})
                     : b.op("Concat", {n, other}, {Attribute::make_int("axis", -1)});
  } else {
    Value* even = slice(b, xr, 0, kEnd, 2);
    Value* odd = slice(b, xr, 1, kEnd, 2);
    Value* st = b.op("Concat", {unsqueeze(b, b.op("Neg", {odd}), {-1}), unsqueeze(b, even, {-1})},
                     {Attribute::make_int("axis", -1)});
    std::vector<int64_t> shape = x_dims(s);
    shape.back() = s.r;
    rot = b.op("Reshape", {st, ints(b, b.graph().unique_name("rot_shape"), shape)});
  }
  Value* y = b.op("Add", {b.op("Mul", {xr, cos}), b.op("Mul", {rot, sin})});
  if (!partial) return y;
  Value* pass = slice(b, x, s.r, kEnd);
  return s.pass_first ? b.op("Concat", {pass, y}, {Attribute::make_int("axis", -1)})
                      : b.op("Concat", {y, pass}, {Attribute::make_int("axis", -1)});
}

// Q and K of one layer share the cos/sin operands (as exports do).
void build(GraphBuilder& b, const Spec& s) {
  auto [cos, sin] = tables(b, s);
  for (const char* n : {"q", "k"}) b.output(rope(b, s, b.input(n, s.dt, x_dims(s)), cos, sin));
}

Tensor in_dtype(const Tensor& t, DType dt) {
  if (dt == DType::Float) return t;
  Tensor h(DType::Float16, t.dims);
  for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(t.data<float>()[i]);
  return h;
}

std::vector<float> as_floats(const Tensor& t) {
  std::vector<float> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype == DType::Float16 ? half_to_float(t.data<uint16_t>()[i]) : t.data<float>()[i];
  return v;
}

std::map<std::string, Tensor> feeds(const Spec& s) {
  std::map<std::string, Tensor> f;
  f["q"] = in_dtype(rand_tensor(x_dims(s), 3, -2.0f, 2.0f), s.dt);
  f["k"] = in_dtype(rand_tensor(x_dims(s), 4, -2.0f, 2.0f), s.dt);
  std::vector<int64_t> fd = {1, kS, s.cos_not_doubled ? s.r : s.r / 2};
  if (s.cos_per_head) fd = {1, kH, kS, s.r / 2};
  f["freqs"] = rand_tensor(fd, 5, 0.0f, 6.0f);
  return f;
}

// Both graphs on the CPU backend (fp16 models compute in fp32 there), same numbers.
void require_same(const Graph& before, const Graph& after, const Spec& s) {
  auto want = run_cpu(before, feeds(s));
  auto got = run_cpu(after, feeds(s));
  REQUIRE(want.size() == got.size());
  const float tol = s.dt == DType::Float ? 1e-5f : 2e-3f;
  for (size_t o = 0; o < want.size(); ++o) {
    REQUIRE(got[o].dims == want[o].dims);
    auto w = as_floats(want[o]), g = as_floats(got[o]);
    for (size_t i = 0; i < w.size(); ++i) {
      INFO("output " << o << " element " << i << ": got " << g[i] << ", want " << w[i]);
      REQUIRE(!std::isnan(g[i]));
      REQUIRE(std::fabs(g[i] - w[i]) <= tol * std::max(1.0f, std::fabs(w[i])));
    }
  }
}

// Fuses (RotaryEmbedding + DCE) and checks the per-layer primitives are gone.
FusionReport fuse_and_check(const Spec& s) {
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"RotaryEmbedding", "dce"});
  INFO(reasons(r, "RotaryEmbedding"));
  CHECK(matched(r, "RotaryEmbedding") == 2);
  const Graph& g = b.graph();
  CHECK(count_domain_op(g, "fuseopt", "RotaryEmbedding") == 2);
  CHECK(count_op(g, "Neg") == 0);
  CHECK(count_op(g, "Slice") == 0);
  CHECK(count_op(g, "Concat") == 0);
  CHECK(count_op(g, "Add") == 0);
  // The tables are computed once for both Q and K (one Cos, one Sin on the half).
  CHECK(count_op(g, "Cos") == 1);
  CHECK(count_op(g, "Sin") == 1);
  for (const auto& n : g.nodes()) {
    if (n->domain != "fuseopt") continue;
    CHECK(n->attr_int("interleaved", 0) == (s.interleaved ? 1 : 0));
    CHECK(n->attr_int("rotary_embedding_dim", 0) == (s.r < s.d ? s.r : 0));
    CHECK(n->attr_int("num_heads", 0) == (s.bshd ? kH : 0));
  }
  require_same(*before, g, s);
  // And the saved model (with its function body) loads and runs the same.
  auto saved = clone_graph(g);
  require_same(*before, *saved, s);
  return r;
}

FusionReport reject(const Spec& s) {
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_passes(b.graph(), {"RotaryEmbedding", "dce"});
  CHECK(count_domain_op(b.graph(), "fuseopt", "RotaryEmbedding") == 0);
  return r;
}

}  // namespace

TEST_CASE("RotaryEmbedding: half-split full rotary (Llama dynamo) fuses, tables once", "[passes][RotaryEmbedding]") {
  fuse_and_check({});
  Spec bshd;  // the same rotation before the head transpose: the 3-D op form
  bshd.bshd = true;
  fuse_and_check(bshd);
}

TEST_CASE("RotaryEmbedding: TorchScript cos chain (Mul 1.0) and an fp16 model fuse", "[passes][RotaryEmbedding]") {
  Spec ts;
  ts.ts_chain = true;
  fuse_and_check(ts);
  Spec half;
  half.dt = DType::Float16;
  half.ts_chain = true;
  fuse_and_check(half);
}

TEST_CASE("RotaryEmbedding: partial rotary (NeoX / Phi) fuses with rotary_embedding_dim", "[passes][RotaryEmbedding]") {
  Spec s;
  s.d = 12;
  s.r = 8;
  fuse_and_check(s);
  s.dt = DType::Float16;
  fuse_and_check(s);
}

TEST_CASE("RotaryEmbedding: interleaved GPT-J [B, S, H, D] fuses as the 3-D op", "[passes][RotaryEmbedding]") {
  Spec s;
  s.interleaved = true;
  s.bshd = true;
  s.d = 12;
  s.r = 8;
  fuse_and_check(s);
  s.dt = DType::Float16;
  fuse_and_check(s);
}

TEST_CASE("RotaryEmbedding: interleaved RoFormer [B, H, S, D] fuses (Concat and Tile repeats)", "[passes][RotaryEmbedding]") {
  Spec s;
  s.interleaved = true;
  fuse_and_check(s);
  s.tile_repeat = true;
  fuse_and_check(s);
}

TEST_CASE("RotaryEmbedding: interleaved with cos/sin and a scale after the repeat (Cohere) fuses",
          "[passes][RotaryEmbedding]") {
  Spec s;
  s.interleaved = true;
  s.cos_after_repeat = true;
  fuse_and_check(s);
  s.bshd = true;
  fuse_and_check(s);
}

TEST_CASE("RotaryEmbedding: rule 2, a per-column scale after the repeat", "[passes][RotaryEmbedding]") {
  Spec s;
  s.interleaved = true;
  s.cos_after_repeat = true;
  s.scaling_vector = true;  // varies along R: repeat_interleave(cos(f)) * v is not a repeat of anything
  CHECK_THAT(reasons(reject(s), "RotaryEmbedding"), Contains("rule 2") && Contains("repeat_interleave"));
}

TEST_CASE("RotaryEmbedding: rule 1, an interior value read elsewhere", "[passes][RotaryEmbedding]") {
  Spec s;
  s.neg_is_output = true;
  CHECK_THAT(reasons(reject(s), "RotaryEmbedding"), Contains("rule 1"));
}

TEST_CASE("RotaryEmbedding: rule 2, cos/sin not provably the matching halves", "[passes][RotaryEmbedding]") {
  Spec s;
  s.cos_not_doubled = true;
  CHECK_THAT(reasons(reject(s), "RotaryEmbedding"), Contains("rule 2") && Contains("Concat(f, f)"));
}

TEST_CASE("RotaryEmbedding: rule 3, cos varying over heads", "[passes][RotaryEmbedding]") {
  Spec s;
  s.cos_per_head = true;
  CHECK_THAT(reasons(reject(s), "RotaryEmbedding"), Contains("rule 3") && Contains("heads"));
}

TEST_CASE("RotaryEmbedding: rule 4, split points, Neg half and concat orders", "[passes][RotaryEmbedding]") {
  Spec split;
  split.split = 3;
  CHECK_THAT(reasons(reject(split), "RotaryEmbedding"), Contains("rule 4") && Contains("do not split the last axis"));
  Spec neg;
  neg.neg = Neg::FirstHalf;
  CHECK_THAT(reasons(reject(neg), "RotaryEmbedding"), Contains("rule 4") && Contains("negates the first half"));
  Spec order;
  order.x1_first = true;
  CHECK_THAT(reasons(reject(order), "RotaryEmbedding"), Contains("rule 4") && Contains("x1 before -x2"));
}

TEST_CASE("RotaryEmbedding: rule 4, partial pass-through not concatenated back in order", "[passes][RotaryEmbedding]") {
  Spec s;
  s.d = 12;
  s.r = 8;
  s.pass_first = true;
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_passes(b.graph(), {"RotaryEmbedding", "dce"});
  CHECK_THAT(reasons(r, "RotaryEmbedding"), Contains("rule 4") && Contains("not concatenated back in order"));
  // The rotation of x[..., :R] alone is still exact and fuses; the misplaced Concat stays.
  CHECK(count_op(b.graph(), "Concat") == 2);
}

TEST_CASE("RotaryEmbedding: rule 5, cos in another dtype", "[passes][RotaryEmbedding]") {
  Spec s;
  s.cos_other_dtype = true;
  // Invalid ONNX (Mul of float32 x and float16 cos): only --no-validate input reaches the pass.
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_passes_unchecked(b.graph(), {"RotaryEmbedding", "dce"});
  CHECK(count_domain_op(b.graph(), "fuseopt", "RotaryEmbedding") == 0);
  CHECK_THAT(reasons(r, "RotaryEmbedding"), Contains("rule 5"));
}

namespace {
// Static shapes: const_fold has turned the tables into constants [1, 1, S, R].
std::unique_ptr<Graph> const_table_model(bool equal_halves) {
  GraphBuilder b(17);
  const int64_t d = 8, h = 4;
  auto table = [&](uint32_t seed) {
    Tensor half = rand_tensor({1, 1, kS, h}, seed, -1.0f, 1.0f);
    Tensor t(DType::Float, {1, 1, kS, d});
    for (int64_t s = 0; s < kS; ++s)
      for (int64_t i = 0; i < d; ++i)
        t.data<float>()[s * d + i] = half.data<float>()[s * h + i % h] + (!equal_halves && i == d - 1 ? 0.5f : 0.0f);
    return t;
  };
  Value* cos = b.constant("cos_table", table(11));
  Value* sin = b.constant("sin_table", table(12));
  Spec s;
  for (const char* n : {"q", "k"}) b.output(rope(b, s, b.input(n, DType::Float, x_dims(s)), cos, sin));
  return b.release();
}
}  // namespace

TEST_CASE("RotaryEmbedding: folded constant cos/sin tables fuse with their first half", "[passes][RotaryEmbedding]") {
  auto g = const_table_model(true);
  auto before = clone_graph(*g);
  FusionReport r = run_passes(*g, {"RotaryEmbedding", "dce"});
  INFO(reasons(r, "RotaryEmbedding"));
  CHECK(matched(r, "RotaryEmbedding") == 2);
  CHECK(count_op(*g, "Neg") == 0);
  const Node* f = nullptr;
  for (const auto& n : g->nodes())
    if (n->domain == "fuseopt") f = n.get();
  REQUIRE(f);
  REQUIRE(f->input(1)->const_data);
  CHECK(f->input(1)->const_data->dims == std::vector<int64_t>{1, kS, 4});
  auto f2 = feeds(Spec{});
  f2.erase("freqs");
  require_same_outputs(*before, *g, f2);
}

TEST_CASE("RotaryEmbedding: rule 2, a constant table whose halves differ", "[passes][RotaryEmbedding]") {
  auto g = const_table_model(false);
  FusionReport r = run_passes(*g, {"RotaryEmbedding", "dce"});
  CHECK(count_domain_op(*g, "fuseopt", "RotaryEmbedding") == 0);
  CHECK_THAT(reasons(r, "RotaryEmbedding"), Contains("rule 2") && Contains("does not repeat its first half"));
}
