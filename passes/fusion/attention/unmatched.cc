// Attention fusion: the report's line for a Softmax that no candidate reached. The pass starts
// from the output Reshape after P·V (attention_pass.cc), so a form whose output side it does not
// know never becomes a candidate and, before this, left nothing in the report (session 30:
// ConvBERT, ViTDet, SAM2, Hiera, GPT-OSS, XLNet all showed "matched 0, rejected 0"). The line
// names what reads P and the few nodes after P·V, which is where a new form differs.
#include "passes/fusion/attention/unmatched.h"

#include "passes/fusion/attention_util.h"

namespace fuseopt::attn {

namespace {

// v comes from a MatMul of two computed operands (Q·Kᵀ) through the ops a scores chain uses.
bool from_qk(const Value* v, int depth) {
  if (!v || !v->producer || depth > 8) return false;
  const Node* n = v->producer;
  if (n->is("MatMul") || n->is("Einsum"))
    return n->inputs.size() == 2 && !const_of(n->input(0)) && !const_of(n->input(1));
  if (n->is("Concat") || n->is("Add") || n->is("Sub") || n->is("Mul") || n->is("Div") || n->is("Where") ||
      n->is("Max") || n->is("Min")) {
    for (const Value* i : n->inputs)
      if (from_qk(i, depth + 1)) return true;
    return false;
  }
  if (n->is("Reshape") || n->is("Transpose") || n->is("Cast") || n->is("Tanh") || n->is("Identity") ||
      n->is("Squeeze") || n->is("Unsqueeze"))
    return from_qk(n->input(0), depth + 1);
  return false;
}

std::string node_str(const Node* n) {
  std::string s = n->op_type;
  if (n->is("Transpose")) {
    s += "(";
    const auto perm = n->attr_ints("perm");
    for (size_t i = 0; i < perm.size(); ++i) s += (i ? "," : "") + std::to_string(perm[i]);
    s += ")";
  }
  if (n->output(0) && n->output(0)->shape) s += " " + shape_str(*n->output(0)->shape);
  return s + " '" + n->name + "'";
}

}  // namespace

std::string describe_unmatched_softmax(const Node* sm) {
  if (!sm->input(0) || !sm->output(0) || !from_qk(sm->input(0), 0)) return "";
  const auto readers = sm->output(0)->consumers();
  const Node* pv = nullptr;
  for (const Node* r : readers)
    if (r->is("MatMul") && r->input(0) == sm->output(0)) pv = r;
  if (!pv) {
    std::string s = "no fusion root: P is read by";
    for (const Node* r : readers) s += " " + node_str(r);
    return s + ", not a P·V MatMul";
  }
  std::string s = "no fusion root: after P·V " + node_str(pv);
  const Node* n = pv;
  for (int k = 0; k < 3 && n->output(0); ++k) {
    const auto next = n->output(0)->consumers();
    if (next.size() != 1) {
      s += next.empty() ? " (no reader)" : " (" + std::to_string(next.size()) + " readers)";
      break;
    }
    n = next[0];
    s += " -> " + node_str(n);
  }
  return s + "; the fusion starts from a Reshape merging the heads after Transpose(0,2,1,3) of P·V (or the "
             "[B*H, S, D], seq-first and windowed views of that)";
}

}  // namespace fuseopt::attn
