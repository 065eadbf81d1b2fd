// Attention fusion, part of the analysis (plan.h): attention sinks (GPT-OSS). transformers'
// eager GPT-OSS attention appends one learned logit per head to every row of the scores,
// normalises the row with it and drops its probability:
//
//   combined = Concat([scores, Expand(Reshape(sinks, [1, H, 1, 1]), [B, H, S_q, 1])], axis -1)
//   combined = combined - ReduceMax(combined, -1, keepdims)       (optional: a no-op for Softmax)
//   P = Slice(Softmax(combined, -1), 0 : S_kv on the last axis)   -> P·V
//
// which is fuseopt.Attention's `sinks` input (7, [H], docs/fused_ops.md). Walking back from
// P·V the Slice comes first (take_sink_slice), then from the Softmax's input the max
// subtraction and the Concat (take_sink_prefix); once the head count is known,
// check_sinks proves the rest: the sink column is the Concat's last operand and one column
// wide, it is a broadcast of H constants over [B, ·, S_q, 1] along the head axis only (not
// per query row, batch or key), and the Slice keeps exactly the S_kv score columns.
#pragma once
#include <string>

#include "passes/fusion/attention/plan.h"

namespace fuseopt::attn {

// n (on P's way back from P·V) is a Slice: recorded in pl.sink_slice and the core; its data
// input is where the walk goes on. Only the first Slice is taken (false otherwise).
bool take_sink_slice(Node* n, Plan& pl);

// From the Softmax's input: Sub(x, ReduceMax(x)) and Concat(scores, sink) as far as they are
// there, joined to pl.core; returns the value the scores chain continues from. A Concat that
// is not a last-axis sink column (another axis, the sink first, more operands) is taken
// anyway, with the reason in pl.fail, so the report says why the block stayed unfused.
Value* take_sink_prefix(Plan& pl);

// After the heads are known (pl.num_heads): the proofs above; fills pl.sink_values or sets
// pl.fail with the reason. Also a Slice without a sink Concat, or a Concat without the Slice.
void check_sinks(Plan& pl);

}  // namespace fuseopt::attn
