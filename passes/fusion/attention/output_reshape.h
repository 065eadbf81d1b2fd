// Attention fusion: proofs about the output side (the root Reshape after the head transpose).
#pragma once
#include <cstdint>

#include "ir/graph.h"
#include "passes/fusion/attention/plan.h"

namespace fuseopt::attn {

// Reshape [B, H, S, Dv] -> [B, H, h, w, Dv] with S = h·w (SAM's windows viewed 2-D).
bool splits_sequence_2d(const Node* r);
// Reshape [B·H, S, Dv] -> [B, H, h, w, Dv] with H known, S = h·w (transformers-4 SAM, ViTDet: bmm).
bool splits_flat_sequence_2d(const Node* r);

// Sets pl.flat_output (the rewrite applies the root's target to Y) or pl.fail for the root
// Reshape: the seq-first [S·B, H·Dv] rows (torch MHA), the [B, S, H·Dv] / [B·S, H·Dv] views,
// or, after a windowed [B, h, w, H, Dv] transpose, any target without 0 entries.
void check_output_reshape(Node* root, Plan& pl, int64_t H);

}  // namespace fuseopt::attn
