#include "passes/fusion/attention/head_scale.h"

#include "passes/fusion/attention/plan.h"
#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {
namespace {

// The head count of a [H, 1, 1] / [1, H, 1, 1] constant, else 0.
int64_t heads_of(const Tensor& t) {
  const auto& d = t.dims;
  if (d.size() == 3 && d[1] == 1 && d[2] == 1) return d[0];
  if (d.size() == 4 && d[0] == 1 && d[2] == 1 && d[3] == 1) return d[1];
  return 0;
}

}  // namespace

std::optional<std::pair<Value*, Value*>> per_head_factor(const Node* n) {
  if (!n->is("Mul") || n->inputs.size() != 2 || !n->input(0) || !n->input(1)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    Value* c = n->input(side);
    Value* x = n->input(1 - side);
    if (!c->const_data || !dtype_is_float(c->const_data->dtype) || heads_of(*c->const_data) < 1) continue;
    if (x->producer && x->producer->is("MatMul")) return std::make_pair(c, x);
  }
  return std::nullopt;
}

std::string check_head_scale(const Plan& pl) {
  if (!pl.head_scale) return "";
  const std::string what = "rule 7: the per-head factor in " + pl.head_scale_node->label();
  if (pl.flat) return what + " scales [B*H, S, S_kv] scores (its head axis is not the scores' heads)";
  if (pl.split || pl.packed_seq_first) return what + " would go on Q, which is packed with K and V";
  if (heads_of(*pl.head_scale->const_data) != pl.num_heads)
    return what + " has " + std::to_string(heads_of(*pl.head_scale->const_data)) + " heads, the attention " +
           std::to_string(pl.num_heads);
  if (pl.q.dim <= 0) return what + ": the head dim is not known";
  const DType q = dtype_of(pl.q.src);
  if (q != DType::Undefined && q != pl.head_scale->const_data->dtype)
    return what + " is " + dtype_name(pl.head_scale->const_data->dtype) + ", Q is " + dtype_name(q);
  return "";
}

Value* apply_head_scale(Rewriter& rw, const Plan& pl, Value* q) {
  const Tensor& c = *pl.head_scale->const_data;
  const int64_t h = pl.num_heads, d = pl.q.dim;
  Tensor v(c.dtype, {h * d});
  const size_t es = dtype_size(c.dtype);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < d; ++j)
      std::copy(c.bytes.begin() + i * es, c.bytes.begin() + (i + 1) * es, v.bytes.begin() + (i * d + j) * es);
  Value* vec = rw.add_constant(pl.head_scale->name + "_per_channel", v);
  return rw.create_node("", "Mul", {q, vec}, {}, 1, "attn_q_head_scale")->output(0);
}

}  // namespace fuseopt::attn
