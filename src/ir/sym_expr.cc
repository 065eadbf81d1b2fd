#include "ir/sym_expr.h"

#include <algorithm>
#include <cctype>

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

// Splits at top-level (parenthesis depth 0) separators; keeps the separator
// that precedes each piece (for + / -). Returns false on unbalanced parens.
bool split_top(const std::string& s, const std::string& seps, std::vector<std::pair<char, std::string>>& out) {
  int depth = 0;
  char sep = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return false;
    if (depth == 0 && seps.find(c) != std::string::npos) {
      out.emplace_back(sep, cur);
      cur.clear();
      sep = c;
      continue;
    }
    cur += c;
  }
  if (depth != 0) return false;
  out.emplace_back(sep, cur);
  return true;
}

// Atom text as it appears inside a compound expression.
std::string atom_text(const std::string& a) { return is_identifier(a) ? a : "(" + a + ")"; }

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
  auto is_op = [](char c) { return c == '+' || c == '-' || c == '*' || c == '(' || c == ')'; };
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

  std::vector<std::pair<char, std::string>> terms;
  if (!split_top(text, "+-", terms)) return symbol(raw);
  SymExpr result;
  for (size_t ti = 0; ti < terms.size(); ++ti) {
    const auto& [sign, body] = terms[ti];
    if (body.empty()) {
      if (ti == 0 && terms.size() > 1) continue;  // leading "-x"
      return symbol(raw);
    }
    std::vector<std::pair<char, std::string>> factors;
    if (!split_top(body, "*", factors)) return symbol(raw);
    SymExpr term = constant(sign == '-' ? -1 : 1);
    for (const auto& f : factors) {
      const std::string& t = f.second;
      if (is_integer(t)) term = term * constant(std::stoll(t));
      else if (is_identifier(t)) term = term * symbol(t);
      else if (t.size() >= 2 && t.front() == '(' && t.back() == ')') term = term * symbol(t.substr(1, t.size() - 2));
      else return symbol(raw);
    }
    result = result + term;
  }
  return result;
}

std::optional<SymExpr> SymExpr::from_dim(const Dim& d) {
  if (d.known()) return constant(d.value);
  if (d.symbol.empty()) return std::nullopt;
  return parse(d.symbol);
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

}  // namespace fuseopt
