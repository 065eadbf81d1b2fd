// TiedEmbedding: a GEMM whose weight is the embedding table transposed (the
// exporters' constant-folded copy of a tied lm_head / MLM decoder) reads the
// table with transB = 1; the copy goes. Positive: MatMul, FusedMatMul with
// bias, LayerNormLinear, a copy that is the table itself under transB = 1.
// Negative: one element differs (untied head), no Gather reads the table, a
// table of another dtype.
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {

constexpr int64_t V = 11, H = 6;  // vocabulary (odd, as GPT-2's 50257), hidden

Tensor transposed(const Tensor& t) {
  Tensor r(t.dtype, {t.dims[1], t.dims[0]});
  for (int64_t i = 0; i < t.dims[0]; ++i)
    for (int64_t j = 0; j < t.dims[1]; ++j) r.data<float>()[j * t.dims[0] + i] = t.data<float>()[i * t.dims[1] + j];
  return r;
}

struct Lm {
  GraphBuilder b{17};
  Value* table = nullptr;
  Value* hidden = nullptr;  // Gather(table, ids): [2, 3, H]
};

// ids [2, 3] -> Gather(E) -> hidden; the head is added by each test.
void embed(Lm& lm, const Tensor& e) {
  Value* ids = lm.b.input("ids", DType::Int64, {2, 3});
  lm.table = lm.b.constant("embed_tokens", e);
  lm.hidden = lm.b.op("Gather", {lm.table, ids}, {Attribute::make_int("axis", 0)}, "embed");
}

std::map<std::string, Tensor> feeds() { return {{"ids", Tensor::from_ints({0, 3, 10, 7, 7, 1}, {2, 3})}}; }

bool has_initializer(const Graph& g, const std::string& name) {
  for (const Value* v : g.initializers)
    if (v->name == name) return true;
  return false;
}

const Node* find_op(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->op_type == op) return n.get();
  return nullptr;
}

}  // namespace

TEST_CASE("TiedEmbedding: a MatMul on the transposed copy reads the table (GPT-2 lm_head)", "[passes][TiedEmbedding]") {
  Lm lm;
  const Tensor e = rand_tensor({V, H}, 1);
  embed(lm, e);
  lm.b.output(lm.b.op("MatMul", {lm.hidden, lm.b.constant("lm_head_t", transposed(e))}, {}, "lm_head"));
  auto before = clone_graph(lm.b.graph());
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 1);
  CHECK(count_op(lm.b.graph(), "MatMul") == 0);
  const Node* f = find_op(lm.b.graph(), "FusedMatMul");
  REQUIRE(f);
  CHECK(f->input(1) == lm.table);
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(f->attr_string("activation", "") == "none");
  CHECK(!has_initializer(lm.b.graph(), "lm_head_t"));  // the copy is gone
  require_same_outputs(*before, lm.b.graph(), feeds());
}

TEST_CASE("TiedEmbedding: FusedMatMul with a bias (BERT MLM decoder) keeps its bias", "[passes][TiedEmbedding]") {
  Lm lm;
  const Tensor e = rand_tensor({V, H}, 2);
  embed(lm, e);
  Value* logits = lm.b.op("FusedMatMul", {lm.hidden, lm.b.constant("decoder_t", transposed(e)),
                                          lm.b.constant("decoder_bias", rand_tensor({V}, 3))},
                          {Attribute::make_int("transB", 0), Attribute::make_float("alpha", 1.0f),
                           Attribute::make_string("activation", "none")},
                          "decoder", "fuseopt");
  lm.b.output(logits);
  auto before = clone_graph(lm.b.graph());
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 1);
  const Node* f = find_op(lm.b.graph(), "FusedMatMul");
  REQUIRE(f);
  CHECK(f->input(1) == lm.table);
  CHECK(f->input(2)->name == "decoder_bias");
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(!has_initializer(lm.b.graph(), "decoder_t"));
  require_same_outputs(*before, lm.b.graph(), feeds());
}

TEST_CASE("TiedEmbedding: LayerNormLinear (final RMSNorm + lm_head, Llama)", "[passes][TiedEmbedding]") {
  Lm lm;
  const Tensor e = rand_tensor({V, H}, 4);
  embed(lm, e);
  Value* y = lm.b.op("LayerNormLinear", {lm.hidden, lm.b.constant("gamma", rand_tensor({H}, 5, 0.5f, 1.5f)), nullptr,
                                         lm.b.constant("lm_head_t", transposed(e))},
                     {Attribute::make_float("epsilon", 1e-6f), Attribute::make_int("rms", 1),
                      Attribute::make_int("transB", 0), Attribute::make_string("activation", "none")},
                     "lm_head", "fuseopt");
  lm.b.output(y);
  auto before = clone_graph(lm.b.graph());
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 1);
  const Node* f = find_op(lm.b.graph(), "LayerNormLinear");
  REQUIRE(f);
  CHECK(f->input(3) == lm.table);
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(!has_initializer(lm.b.graph(), "lm_head_t"));
  require_same_outputs(*before, lm.b.graph(), feeds());
}

TEST_CASE("TiedEmbedding: a transB copy that is the table itself", "[passes][TiedEmbedding]") {
  Lm lm;
  const Tensor e = rand_tensor({V, H}, 6);
  embed(lm, e);
  lm.b.output(lm.b.op("FusedMatMul", {lm.hidden, lm.b.constant("lm_head", e)},
                      {Attribute::make_int("transB", 1), Attribute::make_string("activation", "none")}, "lm_head",
                      "fuseopt"));
  auto before = clone_graph(lm.b.graph());
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 1);
  const Node* f = find_op(lm.b.graph(), "FusedMatMul");
  REQUIRE(f);
  CHECK(f->input(1) == lm.table);
  CHECK(f->attr_int("transB", 0) == 1);
  CHECK(!has_initializer(lm.b.graph(), "lm_head"));
  require_same_outputs(*before, lm.b.graph(), feeds());
}

// ---- legality --------------------------------------------------------------------------

TEST_CASE("TiedEmbedding rule 2: an untied head (one element differs) is left alone",
          "[passes][TiedEmbedding][legality]") {
  Lm lm;
  const Tensor e = rand_tensor({V, H}, 7);
  embed(lm, e);
  Tensor w = transposed(e);
  w.data<float>()[w.numel() - 1] += 1e-3f;  // the last element: every other one is compared first
  lm.b.output(lm.b.op("MatMul", {lm.hidden, lm.b.constant("lm_head_t", w)}, {}, "lm_head"));
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 0);
  CHECK(count_op(lm.b.graph(), "MatMul") == 1);
  CHECK(has_initializer(lm.b.graph(), "lm_head_t"));
  CHECK_THAT(reasons(r, "TiedEmbedding"), Contains("rule 2") && Contains("lm_head_t") && Contains("untied"));
}

TEST_CASE("TiedEmbedding: a transposed constant no Gather reads is not an embedding table",
          "[passes][TiedEmbedding][legality]") {
  GraphBuilder b(17);
  const Tensor e = rand_tensor({V, H}, 8);
  Value* x = b.input("x", DType::Float, {2, H});
  Value* other = b.op("MatMul", {b.input("y", DType::Float, {2, V}), b.constant("not_a_table", e)}, {}, "other");
  b.output(other);
  b.output(b.op("MatMul", {x, b.constant("w_t", transposed(e))}, {}, "head"));
  FusionReport r = run_passes(b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 0);
  CHECK(count_op(b.graph(), "MatMul") == 2);
}

TEST_CASE("TiedEmbedding: a table of another dtype is not a candidate", "[passes][TiedEmbedding][legality]") {
  Lm lm;
  embed(lm, Tensor(DType::Double, {V, H}));  // zeros
  lm.b.output(lm.hidden);
  Value* x = lm.b.input("x", DType::Float, {2, H});
  lm.b.output(lm.b.op("MatMul", {x, lm.b.constant("lm_head_t", Tensor(DType::Float, {H, V}))}, {}, "lm_head"));
  FusionReport r = run_passes(lm.b.graph(), {"TiedEmbedding", "dce"});
  CHECK(matched(r, "TiedEmbedding") == 0);
  CHECK(has_initializer(lm.b.graph(), "lm_head_t"));
}
