// Attention: the scaled-dot-product core of every transformer export
//
//   Reshape([B,S,H·Dv]) <- Transpose(0,2,1,3) <- MatMul(P, V4)
//   P  = Softmax(last axis)( bias/mask ops ( scale ( MatMul(Q4, K4ᵀ) ) ) )
//   Q4 = Transpose(0,2,1,3)(Reshape(q [B,S,H·Dh] -> [B,S,H,Dh]))      (or rotary'd [B,H,S,Dh])
//   K4ᵀ= Transpose(0,2,3,1)(Reshape(k)), or Transpose(0,1,3,2)(Transpose(0,2,1,3)(...)), GQA
//        repeat (Unsqueeze(2)/Expand/Reshape) allowed on the way
//   V4 = Transpose(0,2,1,3)(Reshape(v))
// => fuseopt.Attention(qkv packed | q, k, v, mask?, attn_bias?) -> [B, S, H·Dv]
//
// The root is the final Reshape. Matching is by hand (many exporter spellings):
// transposes are composed, Identity / same-type Cast / one-input Concat /
// Dropout pass through, scalar Mul/Div on the scores, on Q or on K multiply
// into `scale`. Mask terms: additive tensors (Add) go to attn_bias unchanged;
// Where(cond, scores, fill) goes to attn_bias as a bool with
// mask_filter_value = fill. Q/K reaching the core not as a head reshape (rotary
// applied in [B,H,S,D] layout) are brought back to [B,S,H·D] by a Transpose +
// Reshape outside the fused op. When Q, K and V are outputs 0/1/2 of one Split
// of the last axis (the QKV pass makes that, GPT-2 exports have it), the Split
// input is passed packed.
//
// Legality (DESIGN rule 7 + 1, 5): scale factors are constants and are applied
// before every mask term; head reshapes split only the last axis into
// num_heads × head_dim with known sizes; K and V agree on kv heads; mask terms
// are additive float tensors of rank <= 4 or one bool Where with a scalar fill;
//
// The pass is split by job: head_paths (layout proofs, Q/K/V tracing),
// mask_proofs (key-padding / causal proofs), plan (the analysis, run once per
// candidate: match() computes the Plan, check() and rewrite() use it), rewrite
// (the rewrite and the Shape-reader rewiring). This file is the pass itself.
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>

#include "pass/fusion_report.h"
#include "pass/pass.h"
#include "passes/fusion/attention/plan.h"
#include "passes/fusion/attention/rewrite.h"
#include "passes/fusion/attention/unmatched.h"
#include "util/error.h"

namespace fuseopt {
namespace {

class AttentionFusion : public FusionPass {
 public:
  std::string name() const override { return "Attention"; }
  std::string description() const override {
    return "QK^T/scale/mask/Softmax/V with head reshapes -> fuseopt.Attention (packed QKV when a Split feeds it)";
  }
  int run(Rewriter& rw, PassContext& ctx) override {
    // Head sizes come from reshape shapes: refresh inferred shapes first (metadata only).
    rw.infer_shapes();
    plan_.reset();
    reached_.clear();
    int n = FusionPass::run(rw, ctx);
    plan_.reset();
    report_unmatched(rw.graph(), ctx);
    return n;
  }
  // The driver calls match(), then (on a structural match) kept_outputs() and check(),
  // then rewrite() for the same root with the graph unchanged in between: the plan
  // computed here is the one check() and rewrite() use.
  MatchResult match(const Graph& g, Node* root) const override {
    MatchResult r;
    plan_.reset();
    if (!root->is("Reshape")) { r.reason = "not a Reshape"; return r; }
    attn::Plan pl;
    std::string why = attn::analyze(g, root, pl);
    if (pl.softmax && !reached_.count(pl.softmax))  // for report_unmatched: the first walk's outcome
      reached_[pl.softmax] = why.empty() ? "" : "candidate " + root->label() + " stopped: " + why;
    else if (pl.softmax && why.empty())
      reached_[pl.softmax] = "";
    if (!why.empty()) { r.reason = why; return r; }
    Match m;
    m.root = root;
    std::set<Node*> seen;
    for (Node* n : pl.core)
      if (seen.insert(n).second) m.matched.push_back(n);
    r.match = std::move(m);
    plan_ = std::move(pl);
    return r;
  }
  // Shape nodes reading the transposed output only need its shape, which a view
  // of the fused output gives (see rewrite): that value is not private.
  std::vector<const Value*> kept_outputs(const Match& m) const override {
    std::vector<const Value*> kept;
    // Seq-first outputs (torch MHA) have no free view of the fused output with their shape.
    const bool seq_first = plan_ && plan_->root == m.root && (plan_->seq_first_output || plan_->spatial_output);
    for (auto [v, chain] : attn::output_side(m.root))
      if (!seq_first && attn::only_shape_readers(v, chain)) kept.push_back(v);
    for (Value* v : attn::score_values_read_for_shape(m)) kept.push_back(v);
    return kept;
  }
  Status check(const Graph&, const Match& m) const override {
    const attn::Plan& pl = plan_for(m);
    if (!pl.fail.empty()) return Status::reject(pl.fail);
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    attn::Plan& pl = plan_for(m);
    for (const std::string& note : pl.mask_notes)
      spdlog::debug("Attention: {}: mask term kept as attn_bias: {}", m.root->label(), note);
    attn::rewrite_attention(m, pl, rw, name());
    plan_.reset();
  }

 private:
  // The plan of the last structural match (FusionPass's match/check/rewrite are const).
  mutable std::optional<attn::Plan> plan_;
  // Softmax nodes a candidate's walk reached this sweep: "" when the candidate was structural
  // (its rejection, if any, is in the report), else why the walk stopped.
  mutable std::map<const Node*, std::string> reached_;
  // Softmax nodes given a report line, by name, for the graph they are in (withdrawn once fused).
  std::set<std::string> reported_;
  const Graph* reported_graph_ = nullptr;

  // A Softmax that looks like attention and stayed unfused with no rejection to say why gets
  // one, rooted at the Softmax (unmatched.h); one that a later round fuses loses it again.
  void report_unmatched(const Graph& g, PassContext& ctx) {
    if (&g != reported_graph_) {
      reported_.clear();
      reported_graph_ = &g;
    }
    std::set<std::string> present;
    for (const auto& up : g.nodes()) {
      const Node* n = up.get();
      if (!n->is("Softmax")) continue;
      present.insert(n->name);
      auto it = reached_.find(n);
      if (it != reached_.end() && it->second.empty()) continue;  // a structural candidate: reported as such
      std::string why = it != reached_.end() ? it->second : attn::describe_unmatched_softmax(n);
      if (why.empty()) continue;
      ctx.report.record_rejection(pattern_name(), *n, "rule 7: " + why);
      reported_.insert(n->name);
    }
    for (auto it = reported_.begin(); it != reported_.end();) {
      if (present.count(*it)) { ++it; continue; }
      ctx.report.withdraw_rejections(pattern_name(), *it);
      it = reported_.erase(it);
    }
  }
  attn::Plan& plan_for(const Match& m) const {
    FUSE_CHECK(plan_ && plan_->root == m.root, "internal: Attention plan missing for " << m.root->label());
    return *plan_;
  }
};

}  // namespace

// After QkvPack (400) and RotaryEmbedding (450): it reads the packed QKV Split and
// the rotary op's output as Q/K; before PackedRotary (510), which rewires its nodes.
FUSEOPT_REGISTER_PASS(AttentionFusion, PassCategory::Fusion, 500);

}  // namespace fuseopt
