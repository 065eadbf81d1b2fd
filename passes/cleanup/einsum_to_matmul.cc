// Einsum as MatMul: a two-operand Einsum that is a batched matrix product
// (torch.einsum("bhid,bhjd->bhij", q, k) in hand-written attention, Funnel's
// "bind,bjnd->bnij", projections like "td,dnh->tnh") becomes
//   Transpose(A) · Transpose(B) -> Transpose
// with each Transpose left out where it is the identity. Letters are grouped:
// batch (both operands and the output), contracted (both operands, not the output:
// exactly one), and free letters of one operand kept in the output. One operand keeps
// exactly one free letter (the matrix row / column); the other may keep several, the
// extra ones leading as broadcast dims of MatMul (A [x, batch, m, k] · B [batch, k, n]).
// Left alone: "..." broadcasting, a letter repeated in one operand (a diagonal), a letter
// summed out of one operand alone, two or more contracted letters, free letters of both
// kinds beyond one each, no free letter on a side, other operand counts. The result is
// the same sum of products per element (only the accumulation order may differ, as
// between any two GEMM implementations), and the attention and GEMM fusions see the
// MatMul form every exporter writes for F.scaled_dot_product_attention's decompositions.
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/einsum_equation.h"
#include "pass/pass.h"

namespace fuseopt {
namespace {

struct Plan {
  std::vector<int64_t> perm_a, perm_b, perm_out;  // empty: identity
};

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

bool distinct_letters(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (!std::isalpha(static_cast<unsigned char>(s[i])) || s.find(s[i], i + 1) != std::string::npos) return false;
  return true;
}

// The permutation that lays `from` out in the order of `to` (same letters); empty if identity.
std::vector<int64_t> perm_to(const std::string& from, const std::string& to) {
  std::vector<int64_t> p;
  bool identity = true;
  for (size_t i = 0; i < to.size(); ++i) {
    p.push_back(static_cast<int64_t>(from.find(to[i])));
    identity = identity && p.back() == static_cast<int64_t>(i);
  }
  return identity ? std::vector<int64_t>{} : p;
}

std::optional<Plan> plan_for(const std::string& eq) {
  const einsum::Terms terms = einsum::split_terms(eq);
  if (!terms.explicit_output || terms.text.find("...") != std::string::npos) return std::nullopt;
  const std::vector<std::string>& t = terms.inputs;
  const std::string& out = terms.output;
  if (t.size() != 2 || !distinct_letters(t[0]) || !distinct_letters(t[1]) || !distinct_letters(out)) return std::nullopt;
  const std::string &a = t[0], &b = t[1];
  std::string batch, contracted, free_a, free_b;
  for (char c : a) {
    if (has(b, c) && has(out, c)) batch += c;
    else if (has(b, c)) contracted += c;
    else if (has(out, c)) free_a += c;
    else return std::nullopt;  // summed out of A alone
  }
  for (char c : b)
    if (!has(a, c)) {
      if (!has(out, c)) return std::nullopt;
      free_b += c;
    }
  for (char c : out)
    if (!has(a, c) && !has(b, c)) return std::nullopt;
  if (contracted.size() != 1 || free_a.empty() || free_b.empty() || (free_a.size() > 1 && free_b.size() > 1))
    return std::nullopt;
  // Batch letters in output order; the row / column letter is the free letter that comes
  // last in the output, the other free letters lead as broadcast dims.
  std::string batch_out;
  for (char c : out)
    if (has(batch, c)) batch_out += c;
  auto by_out = [&](std::string s) {
    std::sort(s.begin(), s.end(), [&](char x, char y) { return out.find(x) < out.find(y); });
    return s;
  };
  free_a = by_out(free_a);
  free_b = by_out(free_b);
  const char m = free_a.back(), n = free_b.back();
  const std::string lead_a = free_a.substr(0, free_a.size() - 1), lead_b = free_b.substr(0, free_b.size() - 1);
  const char k = contracted[0];
  const std::string a_layout = lead_a + batch_out + m + k;
  const std::string b_layout = lead_b + batch_out + k + n;
  // MatMul broadcasts the leading dims of the operand that has them.
  const std::string y_layout = lead_a + lead_b + batch_out + m + n;
  Plan p;
  p.perm_a = perm_to(a, a_layout);
  p.perm_b = perm_to(b, b_layout);
  p.perm_out = perm_to(y_layout, out);
  return p;
}

class EinsumToMatMul : public Pass {
 public:
  std::string name() const override { return "einsum_to_matmul"; }
  std::string description() const override {
    return "rewrite two-operand Einsums that are batched matrix products as Transpose + MatMul";
  }

  int run(Rewriter& rw, PassContext&) override {
    std::vector<Node*> order;
    for (const auto& n : rw.graph().nodes())
      if (n->is("Einsum")) order.push_back(n.get());
    int rewritten = 0;
    for (Node* n : order) {
      if (!rw.alive(n) || n->inputs.size() != 2 || !n->input(0) || !n->input(1) || !n->output(0)) continue;
      const DType dt = n->input(0)->dtype;
      if (!dtype_is_float(dt) || n->input(1)->dtype != dt) continue;  // MatMul's types; ints stay Einsum
      auto p = plan_for(n->attr_string("equation", ""));
      if (!p) continue;
      rw.set_insertion_point(n);
      auto transpose = [&](Value* v, const std::vector<int64_t>& perm, const std::string& hint) {
        if (perm.empty()) return v;
        return rw.create_node("", "Transpose", {v}, {Attribute::make_ints("perm", perm)}, 1, hint)->outputs[0];
      };
      Value* a = transpose(n->input(0), p->perm_a, n->name + "_a");
      Value* b = transpose(n->input(1), p->perm_b, n->name + "_b");
      Value* y = rw.create_node("", "MatMul", {a, b}, {}, 1, n->name + "_matmul")->outputs[0];
      y = transpose(y, p->perm_out, n->name + "_out");
      if (!rw.can_replace_all_uses(n->output(0), y)) continue;  // leaves the new nodes dead for dce
      rw.replace_all_uses(n->output(0), y);
      rw.erase_node(n);
      ++rewritten;
    }
    rw.set_insertion_point(nullptr);
    return rewritten;
  }
};

}  // namespace
// After identity_elim (200), before cse (300): the new Transposes of one operand used by
// several Einsums compare equal there.
FUSEOPT_REGISTER_PASS(EinsumToMatMul, PassCategory::Cleanup, 250);
}  // namespace fuseopt
