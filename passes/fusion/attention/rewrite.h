// Attention fusion, part 4: the rewrite of a matched core into fuseopt.Attention.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/attention/plan.h"
#include "rewrite/pattern.h"
#include "rewrite/rewriter.h"

namespace fuseopt::attn {

// The values between P·V and the root, each with the chain node that reads it: the
// transposed output (read by the root), the P·V output or its [B, H, S, Dv] view (read by
// the Transpose), and bmm-style the [B·H, S, Dv] P·V output (read by that view).
std::vector<std::pair<Value*, Node*>> output_side(Node* root);
// v's readers other than the chain node are all Shape nodes (and there is one).
bool only_shape_readers(const Value* v, const Node* chain);
// Scores / probabilities of the match whose only readers outside it are Shape nodes:
// their shapes are rebuilt from the fused op's inputs and output by the rewrite.
std::vector<Value*> score_values_read_for_shape(const Match& m);

// Replaces the match by fuseopt.Attention as `pl` (the match's plan) describes;
// `pattern` labels the fused node for the report and --dot.
void rewrite_attention(const Match& m, Plan& pl, Rewriter& rw, const std::string& pattern);

// Shared with the ONNX Attention pass (passes/fusion/onnx_attention.cc):
// [B, heads, S, D] (or [B, S, heads, D], seq-first, ...) as hp describes it -> [B, S, heads·D].
Value* materialize(Rewriter& rw, const HeadPath& hp);
// mask[:B, :S_kv] where a proof gave the slice's ends (KeepProof::slice_ends), else mask.
Value* sliced_mask(Rewriter& rw, Value* mask, Value* const ends[2]);

}  // namespace fuseopt::attn
