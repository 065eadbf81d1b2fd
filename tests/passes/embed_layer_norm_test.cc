// EmbedLayerNorm fusion: 2-3 embedding Gathers summed, then LayerNormalization /
// fuseopt.LayerNorm / fuseopt.SkipLayerNorm (after the SkipLayerNorm pass): the
// BERT, RoBERTa and DistilBERT forms, broadcast position ids; legality rules
// 1, 2, 5, 6, the Gather axis and the table width, each with its reason.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t kB = 2, kS = 5, kH = 8;

struct EmbSpec {
  bool token_types = true;           // 3 lookups (BERT) or 2 (DistilBERT)
  bool pos_from_slice = false;       // position ids = Slice of a [1, 16] constant buffer (BERT ts export)
  std::vector<int64_t> pos_dims{1, kS};
  bool leak_word = false;            // the word lookup is also a graph output (rule 1)
  bool table_input = false;          // the word table is a graph input (rule 2)
  int64_t type_axis = 0;             // Gather axis of the token-type lookup
  int64_t type_width = kH;           // width of the token-type table
  int64_t ln_axis = -1;              // LayerNormalization axis
  DType pos_dtype = DType::Float;    // dtype of the position table
  bool nested_right = false;         // word + (type + pos) instead of (word + type) + pos
};

Value* gather(GraphBuilder& b, Value* table, Value* ids, int64_t axis, const std::string& name) {
  return b.op("Gather", {table, ids}, {Attribute::make_int("axis", axis)}, name);
}

Tensor half_table(int64_t v, int64_t h) { return Tensor(DType::Float16, {v, h}); }

void build(GraphBuilder& b, const EmbSpec& s) {
  Value* ids = b.input("input_ids", DType::Int64, {kB, kS});
  Value* word_t = s.table_input ? b.input("word_table", DType::Float, {30, kH})
                                : b.constant("word_table", rand_tensor({30, kH}, 1));
  Value* word = gather(b, word_t, ids, 0, "word");
  Value* pos_ids;
  if (s.pos_from_slice) {
    Value* buf = b.constant("position_buffer", Tensor::from_ints({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {1, 16}));
    pos_ids = b.op("Slice", {buf, b.constant("starts", Tensor::from_ints({0}, {1})),
                             b.constant("ends", Tensor::from_ints({kS}, {1})), b.constant("axes", Tensor::from_ints({1}, {1}))});
  } else {
    pos_ids = b.input("position_ids", DType::Int64, s.pos_dims);
  }
  Value* pos_t = s.pos_dtype == DType::Float ? b.constant("pos_table", rand_tensor({16, kH}, 2, -2.f, 2.f))
                                             : b.constant("pos_table", half_table(16, kH));
  Value* pos = gather(b, pos_t, pos_ids, 0, "position");
  Value* sum;
  if (s.token_types) {
    Value* tt = b.input("token_type_ids", DType::Int64, {kB, kS});
    Value* type_t = s.type_axis == 0 ? b.constant("type_table", rand_tensor({2, s.type_width}, 3))
                                     : b.constant("type_table", rand_tensor({2, kH}, 3));
    Value* type = gather(b, type_t, s.type_axis == 0 ? tt : b.input("type_cols", DType::Int64, {1, kH}), s.type_axis,
                         "token_type");
    sum = s.nested_right ? b.op("Add", {word, b.op("Add", {type, pos})}) : b.op("Add", {b.op("Add", {word, type}), pos});
  } else {
    sum = b.op("Add", {word, pos});
  }
  const bool two_axes = s.ln_axis != -1;
  Value* gamma = b.constant("gamma", rand_tensor(two_axes ? std::vector<int64_t>{kS, kH} : std::vector<int64_t>{kH}, 4, 0.5f, 1.5f));
  Value* beta = b.constant("beta", rand_tensor(two_axes ? std::vector<int64_t>{kS, kH} : std::vector<int64_t>{kH}, 5));
  b.output(b.op("LayerNormalization", {sum, gamma, beta},
                {Attribute::make_int("axis", s.ln_axis), Attribute::make_float("epsilon", 1e-12f)}, "embeddings_ln"));
  if (s.leak_word) b.output(word);
}

Tensor ids_tensor(std::vector<int64_t> dims, int64_t v, int64_t seed) {
  Tensor t(DType::Int64, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<int64_t>()[i] = ((i * 7 + seed * 3) % (2 * v)) - v;  // [-v, v-1]
  return t;
}

std::map<std::string, Tensor> feeds(const EmbSpec& s) {
  std::map<std::string, Tensor> f{{"input_ids", ids_tensor({kB, kS}, 30, 1)}};
  if (s.token_types) f["token_type_ids"] = ids_tensor({kB, kS}, 2, 2);
  if (!s.pos_from_slice) f["position_ids"] = ids_tensor(s.pos_dims, 16, 3);
  return f;
}

// Both passes, as the pipeline runs them (SkipLayerNorm first takes the last Add).
FusionReport run_fusion(Graph& g) { return run_passes(g, {"SkipLayerNorm", "EmbedLayerNorm"}); }

const Node* only_node(const Graph& g) { return g.nodes().front().get(); }

}  // namespace

TEST_CASE("EmbedLayerNorm: BERT form, 3 lookups, position ids sliced from a buffer", "[passes][EmbedLayerNorm]") {
  EmbSpec s;
  s.pos_from_slice = true;
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 1);
  CHECK(count_domain_op(b.graph(), "fuseopt", "EmbedLayerNorm") == 1);
  CHECK(count_op(b.graph(), "Gather") == 0);
  CHECK(count_op(b.graph(), "Add") == 0);
  CHECK(count_domain_op(b.graph(), "fuseopt", "SkipLayerNorm") == 0);
  require_same_outputs(*before, b.graph(), feeds(s));
}

TEST_CASE("EmbedLayerNorm: plain LayerNormalization root, either Add nesting", "[passes][EmbedLayerNorm]") {
  for (bool nested_right : {false, true}) {
    EmbSpec s;
    s.nested_right = nested_right;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = run_one_pass(b.graph(), "EmbedLayerNorm");  // without SkipLayerNorm: the norm is the root
    CHECK(matched(r, "EmbedLayerNorm") == 1);
    CHECK(b.graph().num_nodes() == 1);
    CHECK(only_node(b.graph())->inputs.size() == 8);
    require_same_outputs(*before, b.graph(), feeds(s));
  }
}

TEST_CASE("EmbedLayerNorm: DistilBERT form, 2 lookups, [S] and [B, S] position ids", "[passes][EmbedLayerNorm]") {
  for (std::vector<int64_t> pos : {std::vector<int64_t>{kS}, std::vector<int64_t>{kB, kS}}) {
    EmbSpec s;
    s.token_types = false;
    s.pos_dims = pos;
    GraphBuilder b(17);
    build(b, s);
    auto before = clone_graph(b.graph());
    FusionReport r = run_fusion(b.graph());
    CHECK(matched(r, "EmbedLayerNorm") == 1);
    CHECK(b.graph().num_nodes() == 1);
    const Node* n = only_node(b.graph());
    CHECK(n->op_type == "EmbedLayerNorm");
    CHECK(n->inputs.size() == 6);
    require_same_outputs(*before, b.graph(), feeds(s));
  }
}

TEST_CASE("EmbedLayerNorm: [1, S] position ids broadcast over the batch", "[passes][EmbedLayerNorm]") {
  EmbSpec s;  // position_ids [1, S] as a graph input (RoBERTa-style: any index input)
  GraphBuilder b(17);
  build(b, s);
  auto before = clone_graph(b.graph());
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 1);
  const Node* n = only_node(b.graph());
  REQUIRE(n->output(0)->shape);
  CHECK(shape_str(*n->output(0)->shape) == shape_str(Shape{Dim::of(kB), Dim::of(kS), Dim::of(kH)}));
  require_same_outputs(*before, b.graph(), feeds(s));
}

TEST_CASE("EmbedLayerNorm: opset 14 (fuseopt.LayerNorm root)", "[passes][EmbedLayerNorm]") {
  GraphBuilder b(14);
  Value* ids = b.input("input_ids", DType::Int64, {kB, kS});
  Value* pos_ids = b.input("position_ids", DType::Int64, {1, kS});
  Value* sum = b.op("Add", {gather(b, b.constant("w", rand_tensor({30, kH}, 6)), ids, 0, "word"),
                            gather(b, b.constant("p", rand_tensor({16, kH}, 7)), pos_ids, 0, "pos")});
  b.output(b.op("LayerNorm", {sum, b.constant("gamma", rand_tensor({kH}, 8)), b.constant("beta", rand_tensor({kH}, 9))},
                {Attribute::make_float("epsilon", 1e-5f)}, "ln", "fuseopt"));
  auto before = clone_graph(b.graph());
  FusionReport r = run_passes(b.graph(), {"EmbedLayerNorm"});
  CHECK(matched(r, "EmbedLayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  require_same_outputs(*before, b.graph(),
                       {{"input_ids", ids_tensor({kB, kS}, 30, 4)}, {"position_ids", ids_tensor({1, kS}, 16, 5)}});
}

// ---- legality -------------------------------------------------------------------------

TEST_CASE("EmbedLayerNorm rule 1: a lookup is read elsewhere", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.leak_word = true;
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK(count_op(b.graph(), "Gather") == 3);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 1") && Contains("word"));
}

TEST_CASE("EmbedLayerNorm rule 2: a table that is not a constant", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.table_input = true;
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 2") && Contains("word_table") && Contains("not a constant"));
}

TEST_CASE("EmbedLayerNorm: a Gather on axis 1", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.type_axis = 1;  // Gather(type_table [2, H], [1, H] ids, axis=1) -> [2, 1, H]: broadcasts, but is not a row lookup
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("token_type") && Contains("axis 1"));
}

TEST_CASE("EmbedLayerNorm rule 2: a table narrower than the norm", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.type_width = 1;  // [B, S, 1] lookups broadcast over H: legal ONNX, not an embedding row
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 2") && Contains("type_table") && Contains("width 1"));
}

TEST_CASE("EmbedLayerNorm rule 6: a norm over two axes", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.ln_axis = 1;  // over [S, H]
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_one_pass(b.graph(), "EmbedLayerNorm");
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 6") && Contains("axis 1"));
}

TEST_CASE("EmbedLayerNorm rule 5: tables of different dtypes", "[passes][EmbedLayerNorm][legality]") {
  EmbSpec s;
  s.pos_dtype = DType::Float16;  // an fp16 table next to fp32 ones (no Cast: the check must still refuse)
  GraphBuilder b(17);
  build(b, s);
  FusionReport r = run_one_pass_unchecked(b.graph(), "EmbedLayerNorm");
  CHECK(matched(r, "EmbedLayerNorm") == 0);
  CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 5") && Contains("pos_table"));
}

TEST_CASE("EmbedLayerNorm: a lookup's shape read by Shape (DistilBERT TorchScript)", "[passes][EmbedLayerNorm]") {
  // seq_length = inputs_embeds.size(1), and the position ids computed from it: the Shape
  // becomes Concat(Shape(input_ids), [H]) (reading the fused output would be a cycle).
  // A Shape with start/end is not rewritten: rule 1 holds.
  for (bool start_attr : {false, true}) {
    GraphBuilder b(17);
    Value* ids = b.input("input_ids", DType::Int64, {-1, -1}, {"batch", "seq"});
    Value* word = gather(b, b.constant("word_table", rand_tensor({30, kH}, 11)), ids, 0, "word");
    std::vector<Attribute> sa;
    if (start_attr) sa.push_back(Attribute::make_int("start", 1));
    Value* shape = b.op("Shape", {word}, sa, "embeds_shape");
    Value* seq = b.op("Gather", {shape, b.constant("one", Tensor::from_ints({start_attr ? 0 : 1}, {1}))});
    Value* pos_ids = b.op("Range", {b.constant("zero", Tensor::from_ints({0}, {})), b.op("Squeeze", {seq, b.constant("ax", Tensor::from_ints({0}, {1}))}),
                                    b.constant("step", Tensor::from_ints({1}, {}))});
    Value* pos = gather(b, b.constant("pos_table", rand_tensor({16, kH}, 12)), pos_ids, 0, "position");
    b.output(b.op("LayerNormalization", {b.op("Add", {word, pos}), b.constant("gamma", rand_tensor({kH}, 13)),
                                         b.constant("beta", rand_tensor({kH}, 14))},
                  {Attribute::make_float("epsilon", 1e-12f)}));
    b.output(shape);
    auto before = clone_graph(b.graph());
    FusionReport r = run_fusion(b.graph());
    INFO("Shape with start " << start_attr);
    CHECK(matched(r, "EmbedLayerNorm") == (start_attr ? 0 : 1));
    if (start_attr) {
      CHECK_THAT(reasons(r, "EmbedLayerNorm"), Contains("rule 1") && Contains("embeds_shape"));
      continue;
    }
    CHECK(count_op(b.graph(), "Gather") == 1);  // Gather(shape, 1) only
    const std::map<std::string, Tensor> f{{"input_ids", ids_tensor({kB, kS}, 30, 6)}};
    const std::vector<Tensor> want = run_cpu(*before, f), got = run_cpu(b.graph(), f);
    REQUIRE(got.size() == 2);
    CHECK(got[1].to_int_vector() == want[1].to_int_vector());  // the Shape: [B, S, H]
    REQUIRE(got[0].dims == want[0].dims);
    for (int64_t i = 0; i < want[0].numel(); ++i)
      CHECK(std::fabs(got[0].data<float>()[i] - want[0].data<float>()[i]) <= 1e-5f);
  }
}

TEST_CASE("EmbedLayerNorm: static shapes, the position lookup already a constant", "[passes][EmbedLayerNorm]") {
  // With --input-shape, const_fold computes Gather(pos_table, Slice(buffer)) = a [1, S, H] constant.
  GraphBuilder b(17);
  Value* ids = b.input("input_ids", DType::Int64, {kB, kS});
  Value* tt = b.input("token_type_ids", DType::Int64, {kB, kS});
  Value* word = gather(b, b.constant("word_table", rand_tensor({30, kH}, 21)), ids, 0, "word");
  Value* type = gather(b, b.constant("type_table", rand_tensor({2, kH}, 22)), tt, 0, "token_type");
  Value* pos = b.constant("pos_embeddings", rand_tensor({1, kS, kH}, 23));
  b.output(b.op("LayerNormalization", {b.op("Add", {b.op("Add", {word, type}), pos}),
                                       b.constant("gamma", rand_tensor({kH}, 24)), b.constant("beta", rand_tensor({kH}, 25))},
                {Attribute::make_float("epsilon", 1e-12f)}));
  auto before = clone_graph(b.graph());
  FusionReport r = run_fusion(b.graph());
  CHECK(matched(r, "EmbedLayerNorm") == 1);
  CHECK(b.graph().num_nodes() == 1);
  require_same_outputs(*before, b.graph(),
                       {{"input_ids", ids_tensor({kB, kS}, 30, 8)}, {"token_type_ids", ids_tensor({kB, kS}, 2, 9)}});
}
