// Attention fusion, part 3: the analysis. One structural walk from the output
// Reshape back through P·V, the Softmax, the scores chain (scores_chain.h) and
// Q·Kᵀ produces a Plan: every node of the core, the Q/K/V paths, scale, mask terms and proofs,
// heads, and the first legality failure (rule text). The pass computes it once
// per candidate and carries it from match() to rewrite().
#pragma once
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/attention/head_paths.h"
#include "passes/fusion/attention/mask_proofs.h"

namespace fuseopt::attn {

struct Plan {
  Node* root = nullptr;      // output Reshape
  Node* out_transpose = nullptr;
  Node* pv = nullptr;
  Node* softmax = nullptr;
  Node* qk = nullptr;
  std::vector<Node*> core;   // private chain, root first
  HeadPath q, k, v;
  double scale = 1.0;
  double softcap = 0.0;      // Gemma-2 logit soft-capping: scores = softcap·tanh(scale·QKᵀ / softcap); 0 = none
  std::vector<Value*> add_bias;  // additive terms, forward order
  std::vector<MaskTerm> terms;   // every mask term, forward order
  bool combined = false;         // several terms incl. a Where: one float bias built outside
  bool causal = false;           // a causal mask term was proven (and removed from `terms`)
  int64_t window = 0;            // a sliding-window term was proven: keys at q_pos - j >= window hidden
  bool nan_to_zero = false;      // Where(IsNaN(P), 0, P) after the Softmax -> masked_rows_zero = 1
  bool flat = false;             // bmm-style: P·V (and maybe Q·Kᵀ) on [B·H, S, D] views
  Value* keep = nullptr;         // bool Where condition (true = keep)
  bool keep_inverted = false;    // Where(cond, fill, scores): keep = Not(cond)
  double fill = -std::numeric_limits<double>::infinity();
  int64_t num_heads = -1, kv_heads = -1;
  Node* split = nullptr;         // packed QKV source
  Value* packed_seq_first = nullptr;  // torch MHA: the [S, B, 3E] in-projection whose thirds are q, k, v
  Node* down_cast = nullptr;     // Cast after the Softmax (fp32 softmax back to fp16/bf16)
  Value* mask = nullptr;         // proven key-padding mask [B, S_kv] (replaces the mask term)
  Value* mask_slice_ends[2] = {nullptr, nullptr};  // set: `mask` is read as mask[:B, :S_kv] (scalar B, S_kv)
  bool mask_inverted = false;    // `mask` marks the keys to ignore (torch key_padding_mask): pass Not(mask)
  bool mask_keep_is_one = false; // the term keeps keys where `mask` == 1 (transformers 4's inverted mask): pass Equal(mask, 1)
  Node* up_cast = nullptr;       // the matching Cast of the scores to fp32
  std::optional<double> clamp;   // Max(scores, clamp) with clamp <= lowest finite (scores_clamp.h)
  Value* head_scale = nullptr;   // Q·Kᵀ ⊙ c[h]: a [H, 1, 1] constant moved onto Q (head_scale.h)
  Node* head_scale_node = nullptr;
  Node* clamp_node = nullptr;
  bool flat_output = false;      // the root reshapes to [B·S, H·Dv]
  bool seq_first_output = false; // the root reshapes [S, B, H, Dv] to [S·B, H·Dv] (torch MHA)
  bool spatial_output = false;   // P·V viewed [B, H, h, w, Dv], Transpose(0,2,3,1,4), any root reshape (SAM)
  std::vector<Node*> path_shape_reads;  // Shape of a K/V path value after the cache Concat (rebuilt by the rewrite)
  std::vector<std::string> mask_notes;  // why a mask term stayed attn_bias (not a proven mask)
  // Attention sinks (GPT-OSS, sinks.h): P = Slice(Softmax(Concat(scores, sink column))).
  Node* sink_slice = nullptr;    // the Slice dropping the sink's probability column
  Node* sink_concat = nullptr;   // Concat([scores, sink column], axis -1)
  Node* sink_max = nullptr;      // ReduceMax of the Concat, subtracted before the Softmax (no-op)
  std::vector<float> sink_values;  // the H sink logits, proven (empty: no sinks)
  std::string fail;              // legality failure (rule text)
};


// A value on the K or V path after the cache Concat (e.g. the keys repeated for GQA) whose
// shape a Shape node reads: each dim is a constant, the batch or the keys' total length, so
// the rewrite can rebuild Shape(x) from the op's inputs (past and new keys).
struct PathShape {
  enum class Part { Const, Batch, KvLen, BatchTimes };  // BatchTimes: batch * value ([B·H, ..] views)
  const HeadPath* hp = nullptr;             // the path x is on (its past / src give the lengths)
  std::vector<std::pair<Part, int64_t>> dims;  // per dim of x: what it is (the value for Const)
};
std::optional<PathShape> path_shape(const Plan& pl, const Value* x);

// Structural walk; "" on success (legality problems go to plan.fail).
std::string analyze(const Graph& g, Node* root, Plan& pl);

}  // namespace fuseopt::attn
