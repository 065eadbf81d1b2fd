// Tied LM head / MLM decoder: a GEMM whose weight is the token-embedding table
// (transposed) reads the table itself.
//
//   E [V, H] read by Gather(E, ids)      (the embedding lookup, axis 0)
//   G = MatMul(X, W) | FusedMatMul(X, W, bias?) | LayerNormLinear(.., W, ..)
//   with op(W) == Eᵀ element for element  (op: transB)
// => G reads E with transB = 1; a MatMul becomes FusedMatMul(X, E){transB=1}.
//
// Both PyTorch exporters write a tied lm_head (GPT-2, Llama with tied
// embeddings, BERT/RoBERTa masked-LM decoders) as a second initializer: the
// constant-folded transpose of the embedding table. Reading the table with
// transB=1 is exact (the same numbers, the product only reads them in another
// order; cuBLASLt's transposed-B layout is the nn.Linear one, no slower), and
// the copy, V·H elements (94 MB of fp32 at BERT's 30522 x 768, 154 MB at
// GPT-2's 50257 x 768), is no longer saved, uploaded or converted to fp16.
//
// Legality: rule 2 (W and E constants, 2-D, same dtype, E read by a Gather on
// axis 0 as its data input); the values must be equal exactly (bitwise), else
// rejected (an untied head of the same shape, e.g. Llama without
// tie_word_embeddings, is named in the report and left alone).
#include <algorithm>
#include <cstring>

#include "pass/pass.h"

namespace fuseopt {
namespace {

// Where the GEMM keeps its weight.
int weight_slot(const Node* n) {
  if (n->is("MatMul")) return n->inputs.size() == 2 ? 1 : -1;
  if (n->domain != "fuseopt") return -1;
  if (n->op_type == "FusedMatMul") return 1;
  if (n->op_type == "LayerNormLinear") return 3;
  return -1;
}

// Read by a row lookup: a Gather on axis 0, or fuseopt.EmbedLayerNorm, whose
// tables are inputs 2, 4, 6 (that pass runs first and takes the Gathers in).
bool is_embedding_table(const Value* e) {
  for (const Use& u : e->uses) {
    if (u.index == 0 && u.node->is("Gather") && u.node->attr_int("axis", 0) == 0) return true;
    if (u.node->domain == "fuseopt" && u.node->op_type == "EmbedLayerNorm" && u.index >= 2 && u.index % 2 == 0)
      return true;
  }
  return false;
}

// op(W) as [K, N] equals Eᵀ, i.e. E [N, K] is op(W)ᵀ: with transB = 0 (W is
// [K, N]) element (n, k) of E is W[k, n]; with transB = 1 (W is [N, K]) E and W
// are the same bytes. Compared element by element in 64 x 64 tiles.
bool equals_transposed_view(const Tensor& w, bool trans_b, const Tensor& e) {
  if (trans_b) return w.bytes == e.bytes;
  const int64_t K = w.dims[0], N = w.dims[1];
  const size_t es = dtype_size(w.dtype);
  const uint8_t* pw = w.bytes.data();
  const uint8_t* pe = e.bytes.data();
  constexpr int64_t kTile = 64;
  for (int64_t k0 = 0; k0 < K; k0 += kTile)
    for (int64_t n0 = 0; n0 < N; n0 += kTile)
      for (int64_t k = k0; k < std::min(K, k0 + kTile); ++k)
        for (int64_t n = n0; n < std::min(N, n0 + kTile); ++n)
          if (std::memcmp(pw + (k * N + n) * es, pe + (n * K + k) * es, es) != 0) return false;
  return true;
}

// The values match() binds (by hand: the weight and the table it copies).
namespace cap {
const ValueCapture W{"W"}, E{"E"};
}  // namespace cap

class TiedEmbeddingFusion : public FusionPass {
 public:
  std::string name() const override { return "TiedEmbedding"; }
  std::string description() const override {
    return "a GEMM weight that is the embedding table transposed (tied lm_head / MLM decoder) -> read the table, "
           "transB=1";
  }

  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r;
    const int slot = weight_slot(root);
    Value* w = slot < 0 ? nullptr : root->input(static_cast<size_t>(slot));
    if (!w || !w->const_data || w->const_data->dims.size() != 2) {
      r.reason = "not a GEMM with a constant 2-D weight";
      return r;
    }
    const Tensor& wt = *w->const_data;
    const bool tb = root->attr_int("transB", 0) != 0;
    const int64_t K = tb ? wt.dims[1] : wt.dims[0], N = tb ? wt.dims[0] : wt.dims[1];
    // Structural candidate: an embedding table of the transposed shape and the same dtype.
    for (Value* e : g.initializers) {
      if (e == w || !e->const_data || e->const_data->dtype != wt.dtype) continue;
      if (e->const_data->dims != std::vector<int64_t>{N, K} || !is_embedding_table(e)) continue;
      Match m;
      m.root = root;
      m.matched.push_back(root);
      m.values[cap::W.name] = w;
      m.values[cap::E.name] = e;
      r.match = std::move(m);
      return r;
    }
    r.reason = root->label() + ": no embedding table of shape [N, K] = [" + std::to_string(N) + ", " +
               std::to_string(K) + "]";
    return r;
  }

  Status check(const Graph&, const Match& m) const override {
    const Value* w = m.value(cap::W);
    const Value* e = m.value(cap::E);
    const bool tb = m.root->attr_int("transB", 0) != 0;
    if (!equals_transposed_view(*w->const_data, tb, *e->const_data))
      return Status::reject("rule 2: weight '", w->name, "' of ", m.root->label(), " is not the embedding table '",
                            e->name, "' transposed (an untied head)");
    return Status::ok();
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* g = m.root;
    Value* e = m.value(cap::E);
    // op(W) == Eᵀ, so the GEMM reads E transposed whatever its transB was.
    const int64_t tb = 1;
    if (g->is("MatMul")) {
      Node* f = rw.create_node("fuseopt", "FusedMatMul", {g->input(0), e},
                               {Attribute::make_int("transB", tb), Attribute::make_float("alpha", 1.0f),
                                Attribute::make_string("activation", "none")},
                               1, g->name);
      rw.replace_match(m, f, name(), {{g->output(0), f->output(0)}});
      return;
    }
    // A fused GEMM keeps its node (and its label in the report): only the
    // weight and its layout change.
    rw.set_input(g, static_cast<size_t>(weight_slot(g)), e);
    rw.set_attr(g, Attribute::make_int("transB", tb));
  }
};

}  // namespace
// After LayerNormLinear (600): the other fusions see the exporter's own form first.
FUSEOPT_REGISTER_PASS(TiedEmbeddingFusion, PassCategory::Fusion, 650);
}  // namespace fuseopt
