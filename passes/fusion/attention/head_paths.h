// Attention fusion, part 1: how Q, K and V reach the scores / P·V MatMuls.
// Layout proofs (head-split reshapes, [B·H, S, D] views, composed transposes)
// and the walk from a core operand back to its [B, S, heads·D] source.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/sym_expr.h"

namespace fuseopt::attn {

using Perm = std::vector<int64_t>;

// Transpose(Transpose(x, base), p) == Transpose(x, compose(base, p)).
Perm compose(const Perm& base, const Perm& p);

// How Q, K or V reaches the core.
struct HeadPath {
  Value* src = nullptr;     // [B, S, heads·D] (found head reshape) or [B, heads, S, D] (materialize)
  bool materialize = false;
  bool bshd = false;        // materialize from [B, S, heads, D] (a Reshape only) instead of [B, heads, S, D]
  std::vector<int64_t> to_bshd = {0, 1, 2, 3};  // materialize: Transpose(src, to_bshd) is [B, S, heads, D]
  int64_t unit_axis = -1;   // src is [B, S, W] with a size-1 axis inserted here (Squeeze it to materialize)
  bool seq_first = false;   // src is [S, B, heads·D] (torch nn.MultiheadAttention): materialize = Transpose(1,0,2)
  int64_t heads = -1;       // heads of src (kv heads for K/V)
  int64_t dim = -1;         // head dim
  int64_t repeat = 1;       // GQA: each src head used `repeat` times
  double scale = 1.0;       // scalar Mul/Div folded on the way
  Value* past = nullptr;    // KV cache: Concat(past [B, heads, S_past, D], new, axis 2) on the way
  Value* present = nullptr; //   ... and its output, the op's present_key / present_value
  std::vector<Node*> nodes; // walked nodes (erased when dead after the rewrite)
  std::string fail;         // legality problem (rule 7 / 5), empty when fine
};

// A Reshape whose inferred output shape is its input's, dim for dim: a no-op view.
bool is_identity_reshape(const Node* n);
// Identity, no-op Reshape, one-input Concat, inference Dropout, same-type Cast.
bool is_passthrough(const Node* n);
// Scalar constant multiplier of a Mul/Div node, with the other input.
std::optional<std::pair<double, Value*>> scalar_factor(const Node* n);
// Reshape [B, H, x, y] -> [B·H, x, y], proven from inferred shapes.
bool merges_bh(const Node* r);
// Reshape [B·H, x, y] -> [B, H, x, y] with H known.
bool splits_bh(const Node* r);

// Walks back from a core operand. `want` is the permutation of [B, S, h, D] the
// operand must be (Q, V: 0,2,1,3; Kᵀ: 0,2,3,1); `flat`: the operand is a [B·H, x, y] view.
HeadPath trace_head(Value* v, const Perm& want, bool flat = false);

// The dim of hp.src that is axis k (0 batch, 1 sequence) of the operand's [B, S, heads, D].
std::optional<Dim> src_dim(const HeadPath& hp, int k);
// The keys' sequence length the scores see: the present's (past + new) with a KV cache.
std::optional<Dim> kv_len(const HeadPath& k);
// Every expression known to equal that length: kv_len's, and with a cache also
// S_past + S_new by the Concat's semantics (the present's stored dim may be a name the
// model declared, e.g. "total", which the ONNX dim_param rule makes the same value).
std::vector<SymExpr> kv_lens(const HeadPath& k);
// Index of that axis in hp.src (for proofs on shape tensors built from Shape(src)).
int src_axis(const HeadPath& hp, int k);

}  // namespace fuseopt::attn
