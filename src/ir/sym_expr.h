// Symbolic integer expressions for dimensions: sums of integer-weighted
// products of named symbols ("batch*seq", "seq*4", "seq+1"). Used by shape
// inference to compute Reshape/Concat/Slice/Range sizes when dims are symbolic.
//
// Canonical text form (what Dim::symbol holds for a computed dim): terms sorted
// by degree (highest first), then by symbol names; symbols in a term sorted;
// the coefficient is written last ("batch*seq*4"); the constant term is last
// ("seq*2+1", "seq-1"). Two expressions that are equal as polynomials print
// the same text, so Dim::operator== (string compare) works on them.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace fuseopt {

class SymExpr {
 public:
  SymExpr() = default;  // the constant 0
  static SymExpr constant(int64_t c);
  static SymExpr symbol(const std::string& name);  // an atom, not parsed
  // Parses the canonical (or any "a*b*3+c-2"-style) text; a string that does
  // not parse becomes one opaque atom, so every dim_param is accepted.
  static SymExpr parse(const std::string& text);
  // Known dim -> constant; named symbol -> parse(symbol); anonymous -> nullopt.
  static std::optional<SymExpr> from_dim(const Dim& d);

  bool is_constant() const;
  // The value with every symbol given; nullopt when one is missing. A single-atom expression
  // (a plain dim name) is its own symbol.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& values) const;
  bool is_atom() const;  // one symbol with coefficient 1 (a plain dim name, or an unparsed one)
  std::optional<int64_t> constant_value() const;  // when is_constant()
  // A known dim (constant >= 0), a symbolic dim (canonical text), or
  // Dim::unknown() for a negative constant (not a valid size).
  Dim to_dim() const;
  std::string str() const;

  SymExpr operator+(const SymExpr& o) const;
  SymExpr operator-(const SymExpr& o) const;
  SymExpr operator*(const SymExpr& o) const;
  // Exact division only: every term divisible by a single-term divisor
  // (e.g. (batch*seq*128) / 128 = batch*seq); nullopt otherwise.
  std::optional<SymExpr> exact_div(const SymExpr& o) const;
  // Sign reasoning: every symbol stands for a dimension, so it is >= 0.
  // Returns +1 when provably > 0, -1 when provably < 0, 0 when provably == 0,
  // and nullopt when the sign cannot be decided (e.g. "seq-1").
  std::optional<int> sign() const;
  // The order of the value against 0 when every symbol is a dimension of at least 1 (a batch,
  // a sequence): +1 provably >= 0, -1 provably <= 0 (0 when it is the constant 0), nullopt
  // otherwise. "1 - seq" is <= 0 and "seq - 1" >= 0 here, which sign() cannot say. For the
  // exporters' min/max of sizes (torch.sym_max(0, 1 - seq) on a slice start).
  std::optional<int> order_for_dims_at_least_one() const;
  // Every coefficient is negative ("-seq", "-seq-1"): the value is <= 0.
  bool all_terms_negative() const;
  // For two single-term expressions c1·m1 and c2·m2: the one atom s and value v > 0 such
  // that *this == o exactly when s == v, once the factors both share cancel ("seq*batch*32"
  // against "batch*512": seq = 16); nullopt for anything else.
  std::optional<std::pair<std::string, int64_t>> solve_for_atom(const SymExpr& o) const;
  bool operator==(const SymExpr& o) const { return terms_ == o.terms_; }
  bool operator!=(const SymExpr& o) const { return !(*this == o); }

 private:
  using Monomial = std::vector<std::string>;  // sorted symbol names (with repeats)
  std::map<Monomial, int64_t> terms_;          // monomial -> nonzero coefficient
  void add_term(const Monomial& m, int64_t c);
};

}  // namespace fuseopt
