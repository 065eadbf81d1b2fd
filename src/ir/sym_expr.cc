#include "ir/sym_expr.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <string>

namespace fuseopt {
namespace {

// Wrapping arithmetic: shape sizes never get near 2^63, and wrapping keeps a
// hostile model from triggering undefined behaviour.
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':'; }
bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), is_ident_char);
}
bool is_integer(const std::string& s) {
  return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Atom text as it appears inside a compound expression.
std::string atom_text(const std::string& a) { return is_identifier(a) ? a : "(" + a + ")"; }

// Recursive descent over the space-normalized text; every failure is nullopt.
struct ExprParser {
  const std::string& s;
  size_t pos = 0;

  bool at(const char* tok) const { return s.compare(pos, std::char_traits<char>::length(tok), tok) == 0; }

  std::optional<SymExpr> parse_all() {
    auto e = expr();
    if (!e || pos != s.size()) return std::nullopt;
    return e;
  }
  // expr := ['-'|'+'] term (('+'|'-') term)*
  std::optional<SymExpr> expr() {
    bool negate = false;
    if (pos < s.size() && (s[pos] == '-' || s[pos] == '+')) negate = s[pos++] == '-';
    auto first = term();
    if (!first) return std::nullopt;
    SymExpr r = negate ? SymExpr() - *first : *first;
    while (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
      const char op = s[pos++];
      auto t = term();
      if (!t) return std::nullopt;
      r = op == '+' ? r + *t : r - *t;
    }
    return r;
  }
  // term := power (('*' | '//') power)*
  std::optional<SymExpr> term() {
    auto r = power();
    if (!r) return std::nullopt;
    while (pos < s.size()) {
      if (at("//")) {
        pos += 2;
        auto d = power();
        if (!d) return std::nullopt;
        auto q = r->exact_div(*d);
        if (!q) return std::nullopt;
        r = q;
      } else if (s[pos] == '*' && !at("**")) {
        ++pos;
        auto f = power();
        if (!f) return std::nullopt;
        r = *r * *f;
      } else {
        break;
      }
    }
    return r;
  }
  // power := primary ['**' integer], exponent 0..16
  std::optional<SymExpr> power() {
    auto b = primary();
    if (!b) return std::nullopt;
    if (!at("**")) return b;
    pos += 2;
    size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
    const std::string digits = s.substr(start, pos - start);
    if (!is_integer(digits) || std::stoll(digits) > 16) return std::nullopt;
    SymExpr r = SymExpr::constant(1);
    for (int64_t i = 0; i < std::stoll(digits); ++i) r = r * *b;
    return r;
  }
  // primary := integer | identifier | '(' text ')'
  std::optional<SymExpr> primary() {
    if (pos >= s.size()) return std::nullopt;
    if (s[pos] == '(') {
      int depth = 0, deepest = 0;
      size_t i = pos;
      for (; i < s.size(); ++i) {
        if (s[i] == '(') deepest = std::max(deepest, ++depth);
        if (s[i] == ')' && --depth == 0) break;
      }
      // Deep nesting (a hostile dim_param) stays an atom instead of recursing.
      if (i >= s.size() || deepest > 32) return std::nullopt;
      const std::string inner = s.substr(pos + 1, i - pos - 1);
      pos = i + 1;
      if (inner.empty()) return std::nullopt;
      return SymExpr::parse(inner);
    }
    size_t start = pos;
    while (pos < s.size() && is_ident_char(s[pos])) ++pos;
    const std::string tok = s.substr(start, pos - start);
    if (is_integer(tok)) return SymExpr::constant(std::stoll(tok));
    if (is_identifier(tok)) return SymExpr::symbol(tok);
    return std::nullopt;
  }
};

}  // namespace

void SymExpr::add_term(const Monomial& m, int64_t c) {
  if (c == 0) return;
  int64_t& slot = terms_[m];
  slot = wrap_add(slot, c);
  if (slot == 0) terms_.erase(m);
}

SymExpr SymExpr::constant(int64_t c) {
  SymExpr e;
  e.add_term({}, c);
  return e;
}

SymExpr SymExpr::symbol(const std::string& name) {
  SymExpr e;
  e.add_term({name}, 1);
  return e;
}

SymExpr SymExpr::parse(const std::string& raw) {
  // Spaces around operators ("s0 + 1", as some exporters write) are dropped;
  // other spaces are part of an opaque name ("sequence length").
  std::string text;
  auto is_op = [](char c) { return c == '+' || c == '-' || c == '*' || c == '/' || c == '(' || c == ')'; };
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != ' ') {
      text += raw[i];
      continue;
    }
    size_t next = raw.find_first_not_of(' ', i);
    const bool before_op = next != std::string::npos && is_op(raw[next]);
    const bool after_op = !text.empty() && is_op(text.back());
    if (!before_op && !after_op && !text.empty() && next != std::string::npos) text += ' ';
  }
  if (is_identifier(text) || text.empty()) return symbol(raw);
  if (is_integer(text)) return constant(std::stoll(text));
  // Python/sympy syntax, as torch.export writes dims ("2*batch", "s0 + 1",
  // "((seq**2)//seq)"): + - * with the usual precedence, "**" with a small
  // constant exponent, "//" when the division is exact as polynomials (then
  // floor division and exact division agree), a unary minus only at the start
  // of an expression. Anything else is one opaque atom (the whole text), and
  // a parenthesised part that does not parse is an atom of its inner text.
  ExprParser p{text};
  if (auto e = p.parse_all()) return *e;
  return symbol(raw);
}

std::optional<SymExpr> SymExpr::from_dim(const Dim& d) {
  if (d.known()) return constant(d.value);
  if (d.symbol.empty()) return std::nullopt;
  return parse(d.symbol);
}

std::optional<int64_t> SymExpr::evaluate(const std::map<std::string, int64_t>& values) const {
  int64_t total = 0;
  for (const auto& [mono, coef] : terms_) {
    int64_t v = coef;
    for (const std::string& sym : mono) {
      auto it = values.find(sym);
      if (it == values.end()) return std::nullopt;
      v *= it->second;
    }
    total += v;
  }
  return total;
}

bool SymExpr::is_atom() const {
  return terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1;
}

bool SymExpr::is_constant() const { return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty()); }

std::optional<int64_t> SymExpr::constant_value() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty()) return terms_.begin()->second;
  return std::nullopt;
}

Dim SymExpr::to_dim() const {
  if (auto c = constant_value()) return *c >= 0 ? Dim::of(*c) : Dim::unknown();
  return Dim::sym(str());
}

std::string SymExpr::str() const {
  if (terms_.empty()) return "0";
  // A lone atom prints as itself, whatever characters it holds.
  if (terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1)
    return terms_.begin()->first[0];
  std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.first.size() != b.first.size()) return a.first.size() > b.first.size();
    return a.first < b.first;
  });
  std::string out;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [m, c] = order[i];
    uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (c < 0) out += "-";
    else if (i > 0) out += "+";
    std::string body;
    for (size_t k = 0; k < m.size(); ++k) body += (k ? "*" : "") + atom_text(m[k]);
    if (m.empty()) body = std::to_string(mag);
    else if (mag != 1) body += "*" + std::to_string(mag);
    out += body;
  }
  return out;
}

std::optional<int> SymExpr::sign() const {
  if (auto c = constant_value()) return *c > 0 ? 1 : (*c < 0 ? -1 : 0);
  bool all_pos = true, all_neg = true;
  for (const auto& [m, c] : terms_) {
    all_pos = all_pos && c > 0;
    all_neg = all_neg && c < 0;
  }
  auto k = terms_.find(Monomial{});
  const int64_t constant = k == terms_.end() ? 0 : k->second;
  // Symbolic terms are >= 0 (or <= 0), so only a strict constant decides.
  if (all_pos && constant > 0) return 1;
  if (all_neg && constant < 0) return -1;
  return std::nullopt;
}

std::optional<int> SymExpr::order_for_dims_at_least_one() const {
  if (auto c = constant_value()) return *c > 0 ? 1 : (*c < 0 ? -1 : 0);
  // Each monomial is >= 1 and grows with every symbol: with all symbolic coefficients of one
  // sign the value is monotone, its extreme at every symbol = 1 (the sum of all coefficients).
  bool nonneg = true, nonpos = true;
  int64_t at_one = 0;
  for (const auto& [m, c] : terms_) {
    at_one = wrap_add(at_one, c);
    if (m.empty()) continue;
    nonneg = nonneg && c > 0;
    nonpos = nonpos && c < 0;
  }
  if (nonneg && at_one >= 0) return 1;
  if (nonpos && at_one <= 0) return -1;
  return std::nullopt;
}

bool SymExpr::all_terms_negative() const {
  if (terms_.empty()) return false;
  for (const auto& [m, c] : terms_)
    if (c >= 0) return false;
  return true;
}

SymExpr SymExpr::operator+(const SymExpr& o) const {
  SymExpr r = *this;
  for (const auto& [m, c] : o.terms_) r.add_term(m, c);
  return r;
}

SymExpr SymExpr::operator-(const SymExpr& o) const {
  SymExpr r = *this;
  for (const auto& [m, c] : o.terms_) r.add_term(m, wrap_mul(c, -1));
  return r;
}

SymExpr SymExpr::operator*(const SymExpr& o) const {
  SymExpr r;
  for (const auto& [ma, ca] : terms_)
    for (const auto& [mb, cb] : o.terms_) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      r.add_term(m, wrap_mul(ca, cb));
    }
  return r;
}

std::optional<SymExpr> SymExpr::exact_div(const SymExpr& o) const {
  if (o.terms_.empty()) return std::nullopt;  // division by zero
  if (*this == o) return constant(1);
  if (o.terms_.size() != 1) return std::nullopt;
  const auto& [dm, dc] = *o.terms_.begin();
  SymExpr r;
  for (const auto& [m, c] : terms_) {
    if (c % dc != 0) return std::nullopt;
    Monomial rest = m;
    for (const std::string& s : dm) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end()) return std::nullopt;
      rest.erase(it);
    }
    r.add_term(rest, c / dc);
  }
  return r;
}

std::optional<std::pair<std::string, int64_t>> SymExpr::solve_for_atom(const SymExpr& o) const {
  if (terms_.size() != 1 || o.terms_.size() != 1) return std::nullopt;
  const auto& [ma, ca] = *terms_.begin();
  const auto& [mb, cb] = *o.terms_.begin();
  // The symbols of each side that the other lacks (monomials are sorted multisets).
  Monomial ra, rb;
  std::set_difference(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(ra));
  std::set_difference(mb.begin(), mb.end(), ma.begin(), ma.end(), std::back_inserter(rb));
  // c_sym · s == c_other with s alone on one side.
  auto solve = [](const Monomial& with_s, int64_t c_sym, const Monomial& rest, int64_t c_other)
      -> std::optional<std::pair<std::string, int64_t>> {
    if (with_s.size() != 1 || !rest.empty() || c_sym <= 0 || c_other <= 0 || c_other % c_sym != 0)
      return std::nullopt;
    return std::make_pair(with_s[0], c_other / c_sym);
  };
  if (auto r = solve(ra, ca, rb, cb)) return r;
  return solve(rb, cb, ra, ca);
}

}  // namespace fuseopt
