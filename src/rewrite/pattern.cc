#include "rewrite/pattern.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/error.h"

namespace fuseopt {

struct PatternNode {
  enum class Kind { AnyValue, ConstValue, AbsentValue, Op, Alternatives };
  Kind kind = Kind::AnyValue;
  std::string capture;
  bool capture_value = true;  // false after as_node()
  std::vector<std::pair<std::function<bool(const Value&)>, std::string>> value_preds;

  // Op
  std::vector<std::string> op_types;
  std::string domain;
  std::vector<Pattern> inputs;
  bool commutative = false;
  bool optional = false;
  int through = 0;
  int out = 0;  // -1 = any output
  bool extra_inputs = false;
  bool single_use = false;
  std::vector<std::pair<std::function<bool(const Node&)>, std::string>> node_preds;

  // Alternatives
  std::vector<Pattern> alts;
};

namespace {

std::vector<std::string> split_types(const std::string& s) {
  std::vector<std::string> r;
  std::string cur;
  for (char c : s) {
    if (c == '|') {
      if (!cur.empty()) r.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) r.push_back(cur);
  return r;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string r;
  for (size_t i = 0; i < v.size(); ++i) r += (i ? sep : "") + v[i];
  return r;
}

std::shared_ptr<PatternNode> make(PatternNode::Kind k, const std::string& capture) {
  auto n = std::make_shared<PatternNode>();
  n->kind = k;
  n->capture = capture;
  return n;
}

bool domain_matches(const std::string& want, const std::string& have) {
  auto norm = [](const std::string& d) { return d == "ai.onnx" ? std::string() : d; };
  return norm(want) == norm(have);
}

std::string value_desc(const Value* v) {
  if (!v) return "an omitted input";
  std::string r = "'" + v->name + "'";
  if (v->producer) return r + " (from " + v->producer->label() + ")";
  if (v->is_const()) return r + " (a constant)";
  if (v->is_graph_input) return r + " (a graph input)";
  return r;
}

}  // namespace

// ---- Pattern -----------------------------------------------------------------------

Pattern::Pattern() : node_(make(PatternNode::Kind::AnyValue, "")) {}
Pattern::Pattern(const char* capture_name) : node_(make(PatternNode::Kind::AnyValue, capture_name)) {}
Pattern::Pattern(const std::string& capture_name) : node_(make(PatternNode::Kind::AnyValue, capture_name)) {}

// Copy-on-write: patterns have value semantics even though sub-patterns are shared.
PatternNode& Pattern::mut() {
  if (node_.use_count() > 1) node_ = std::make_shared<PatternNode>(*node_);
  return *node_;
}

Pattern& Pattern::where(std::function<bool(const Value&)> pred, std::string what) {
  mut().value_preds.emplace_back(std::move(pred), std::move(what));
  return *this;
}

Pattern& Pattern::scalar() {
  return where([](const Value& v) {
    if (v.const_data) return v.const_data->numel() == 1;
    if (!v.shape) return false;
    for (const Dim& d : *v.shape)
      if (d.value != 1) return false;
    return true;
  }, "a single element");
}

Pattern& Pattern::equals(double x, double tol) {
  std::ostringstream os;
  os << "a constant equal to " << x << " (within its dtype's precision)";
  return where([x, tol](const Value& v) { return const_all_equal(&v, x, tol); }, os.str());
}

Pattern& Pattern::dtype(DType t) {
  return where([t](const Value& v) { return v.dtype == t; }, std::string("of dtype ") + dtype_name(t));
}

static void require_op(const PatternNode& n, const char* what) {
  FUSE_CHECK(n.kind == PatternNode::Kind::Op, "internal: pattern ." << what << "() applies to Op patterns only");
}

Pattern& Pattern::as(const std::string& name) {
  auto& n = mut();
  require_op(n, "as");
  n.capture = name;
  n.capture_value = true;
  return *this;
}
Pattern& Pattern::as_node(const std::string& name) {
  auto& n = mut();
  require_op(n, "as_node");
  n.capture = name;
  n.capture_value = false;
  return *this;
}
Pattern& Pattern::commutative() {
  auto& n = mut();
  require_op(n, "commutative");
  FUSE_CHECK(n.inputs.size() == 2, "internal: commutative() needs a two-input Op pattern");
  n.commutative = true;
  return *this;
}
Pattern& Pattern::optional() { return optional_through(0); }
Pattern& Pattern::optional_through(int i) {
  auto& n = mut();
  require_op(n, "optional");
  FUSE_CHECK(i >= 0 && i < static_cast<int>(n.inputs.size()), "internal: optional_through(" << i << ") out of range");
  n.optional = true;
  n.through = i;
  return *this;
}
Pattern& Pattern::domain(const std::string& d) {
  auto& n = mut();
  require_op(n, "domain");
  n.domain = d;
  return *this;
}
Pattern& Pattern::out(int i) {
  auto& n = mut();
  require_op(n, "out");
  n.out = i;
  return *this;
}
Pattern& Pattern::any_out() { return out(-1); }
Pattern& Pattern::allow_extra_inputs() {
  auto& n = mut();
  require_op(n, "allow_extra_inputs");
  n.extra_inputs = true;
  return *this;
}
Pattern& Pattern::attr_is(const std::string& name, int64_t v, std::optional<int64_t> dflt) {
  std::ostringstream os;
  os << name << "=" << v;
  return where_node([=](const Node& n) {
    const Attribute* a = n.attr(name);
    if (!a) return dflt.has_value() && *dflt == v;
    return a->kind == Attribute::Kind::Int && a->i == v;
  }, os.str());
}
Pattern& Pattern::attr_is(const std::string& name, double v, std::optional<double> dflt) {
  std::ostringstream os;
  os << name << "=" << v;
  return where_node([=](const Node& n) {
    const Attribute* a = n.attr(name);
    if (!a) return dflt.has_value() && *dflt == v;
    return a->kind == Attribute::Kind::Float && static_cast<double>(a->f) == static_cast<double>(static_cast<float>(v));
  }, os.str());
}
Pattern& Pattern::attr_is(const std::string& name, std::vector<int64_t> v) {
  std::ostringstream os;
  os << name << "=[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return where_node([=](const Node& n) {
    const Attribute* a = n.attr(name);
    return a && a->kind == Attribute::Kind::Ints && a->ints == v;
  }, os.str());
}
Pattern& Pattern::where_node(std::function<bool(const Node&)> pred, std::string what) {
  auto& n = mut();
  require_op(n, "where_node");
  n.node_preds.emplace_back(std::move(pred), std::move(what));
  return *this;
}
Pattern& Pattern::single_use() {
  auto& n = mut();
  require_op(n, "single_use");
  n.single_use = true;
  return *this;
}

std::string Pattern::str() const {
  const PatternNode& n = *node_;
  switch (n.kind) {
    case PatternNode::Kind::AnyValue: return n.capture.empty() ? "_" : n.capture;
    case PatternNode::Kind::ConstValue: return "Const(" + n.capture + ")";
    case PatternNode::Kind::AbsentValue: return "Absent";
    case PatternNode::Kind::Alternatives: {
      std::vector<std::string> parts;
      for (const auto& a : n.alts) parts.push_back(a.str());
      return "AnyOf(" + join(parts, " | ") + ")";
    }
    case PatternNode::Kind::Op: {
      std::vector<std::string> parts;
      for (const auto& a : n.inputs) parts.push_back(a.str());
      std::string r = join(n.op_types, "|") + "(" + join(parts, ", ") + ")";
      if (n.optional) r += "?";
      return r;
    }
  }
  return "?";
}

Pattern Any(const std::string& name) { return Pattern(make(PatternNode::Kind::AnyValue, name)); }
Pattern Const(const std::string& name) { return Pattern(make(PatternNode::Kind::ConstValue, name)); }
Pattern Absent() { return Pattern(make(PatternNode::Kind::AbsentValue, "")); }
Pattern AnyOf(std::vector<Pattern> alternatives) {
  FUSE_CHECK(!alternatives.empty(), "internal: AnyOf() needs alternatives");
  auto n = make(PatternNode::Kind::Alternatives, "");
  n->alts = std::move(alternatives);
  return Pattern(n);
}
Pattern OpN(const std::string& types, std::vector<Pattern> inputs) {
  auto n = make(PatternNode::Kind::Op, "");
  n->op_types = split_types(types);
  FUSE_CHECK(!n->op_types.empty(), "internal: Op pattern with no op type");
  n->inputs = std::move(inputs);
  return Pattern(n);
}

// ---- Match ---------------------------------------------------------------------------

Node* Match::node(const std::string& name) const {
  auto it = nodes.find(name);
  return it == nodes.end() ? nullptr : it->second;
}
Value* Match::value(const std::string& name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : it->second;
}
const Tensor* Match::constant(const std::string& name) const {
  Value* v = value(name);
  return v && v->const_data ? v->const_data.get() : nullptr;
}
bool Match::covers(const Node* n) const { return std::find(matched.begin(), matched.end(), n) != matched.end(); }
std::string Match::node_names() const {
  std::string r;
  for (size_t i = 0; i < matched.size(); ++i) r += (i ? ", '" : "'") + matched[i]->name + "'";
  return r;
}

// ---- the matcher -------------------------------------------------------------------------
// Continuation-passing: each step calls `k` with the state extended by what it
// matched; returning false makes the caller try its next alternative. States
// are copied at every choice point (patterns and captures are small).

namespace {

struct State {
  std::map<std::string, Node*> nodes;
  std::map<std::string, Value*> values;
  std::vector<Node*> matched;
};

using Cont = std::function<bool(State&)>;

class Matcher {
 public:
  std::string failure;

  bool value(const PatternNode& p, Value* v, State& s, int depth, const Cont& k) {
    switch (p.kind) {
      case PatternNode::Kind::AbsentValue:
        if (v) return fail(depth, "expected an omitted input, found " + value_desc(v));
        return k(s);
      case PatternNode::Kind::AnyValue:
      case PatternNode::Kind::ConstValue: {
        if (!v) return fail(depth, "expected a value" + for_capture(p) + ", found an omitted input");
        if (p.kind == PatternNode::Kind::ConstValue && !v->is_const())
          return fail(depth, "expected a constant" + for_capture(p) + ", found " + value_desc(v));
        if (!value_preds(p, v, depth)) return false;
        State c = s;
        if (!capture_value(p.capture, v, c, depth)) return false;
        return k(c);
      }
      case PatternNode::Kind::Alternatives:
        for (const Pattern& alt : p.alts) {
          State c = s;
          if (value(alt.node(), v, c, depth, k)) return true;
        }
        return false;
      case PatternNode::Kind::Op: {
        if (present(p, v, s, depth, k)) return true;
        if (p.optional) return value(p.inputs[p.through].node(), v, s, depth, k);
        return false;
      }
    }
    return false;
  }

 private:
  int fail_depth_ = -1;

  bool fail(int depth, std::string why) {
    if (depth >= fail_depth_) {
      fail_depth_ = depth;
      failure = std::move(why);
    }
    return false;
  }

  static std::string for_capture(const PatternNode& p) { return p.capture.empty() ? "" : " for '" + p.capture + "'"; }

  bool value_preds(const PatternNode& p, Value* v, int depth) {
    for (const auto& [pred, what] : p.value_preds)
      if (!pred(*v)) return fail(depth, value_desc(v) + " is not " + what);
    return true;
  }

  bool capture_value(const std::string& name, Value* v, State& s, int depth) {
    if (name.empty()) return true;
    auto it = s.values.find(name);
    if (it != s.values.end() && it->second != v)
      return fail(depth, "'" + name + "' is bound to '" + it->second->name + "' and " + value_desc(v));
    s.values[name] = v;
    return true;
  }

  bool present(const PatternNode& p, Value* v, State& s, int depth, const Cont& k) {
    std::string want = join(p.op_types, "|");
    if (!v) return fail(depth, "expected " + want + ", found an omitted input");
    Node* n = v->producer;
    if (!n) return fail(depth, "expected " + want + ", found " + value_desc(v));
    if (!domain_matches(p.domain, n->domain) ||
        std::find(p.op_types.begin(), p.op_types.end(), n->op_type) == p.op_types.end())
      return fail(depth, "expected " + want + ", found " + n->label());
    if (p.out >= 0 && v->producer_output != p.out)
      return fail(depth, "'" + v->name + "' is output " + std::to_string(v->producer_output) + " of " + n->label() +
                             ", expected output " + std::to_string(p.out));
    size_t effective = n->inputs.size();
    while (effective > 0 && n->inputs[effective - 1] == nullptr) --effective;
    if (effective > p.inputs.size() && !p.extra_inputs)
      return fail(depth, n->label() + " has " + std::to_string(effective) + " inputs, pattern expects " +
                             std::to_string(p.inputs.size()));
    for (const auto& [pred, what] : p.node_preds)
      if (!pred(*n)) return fail(depth, n->label() + " does not have " + what);
    if (p.single_use && (v->consumers().size() != 1 || v->is_graph_output))
      return fail(depth, "'" + v->name + "' of " + n->label() + " has other uses");
    if (!value_preds(p, v, depth)) return false;

    State base = s;
    if (!p.capture.empty()) {
      auto it = base.nodes.find(p.capture);
      if (it != base.nodes.end() && it->second != n)
        return fail(depth, "'" + p.capture + "' is bound to " + it->second->label() + " and " + n->label());
      base.nodes[p.capture] = n;
      if (p.capture_value && !capture_value(p.capture, v, base, depth)) return false;
    }
    if (std::find(base.matched.begin(), base.matched.end(), n) == base.matched.end()) base.matched.push_back(n);

    std::vector<std::vector<int>> orders{{}};
    for (size_t i = 0; i < p.inputs.size(); ++i) orders[0].push_back(static_cast<int>(i));
    if (p.commutative) orders.push_back({1, 0});
    for (const auto& order : orders) {
      State c = base;
      if (inputs(p, n, order, 0, c, depth + 1, k)) return true;
    }
    return false;
  }

  bool inputs(const PatternNode& p, Node* n, const std::vector<int>& order, size_t i, State& s, int depth,
              const Cont& k) {
    if (i == p.inputs.size()) return k(s);
    // Pattern input i matches node input order[i].
    return value(p.inputs[i].node(), n->input(order[i]), s, depth,
                 [&](State& s2) { return inputs(p, n, order, i + 1, s2, depth, k); });
  }
};

}  // namespace

MatchResult match_value(const Pattern& p, Value* v) {
  Matcher m;
  State s;
  std::optional<State> done;
  bool ok = m.value(p.node(), v, s, 0, [&](State& fin) {
    done = fin;
    return true;
  });
  MatchResult r;
  if (!ok) {
    r.reason = m.failure.empty() ? "no match" : m.failure;
    return r;
  }
  Match match;
  match.nodes = std::move(done->nodes);
  match.values = std::move(done->values);
  match.matched = std::move(done->matched);
  match.root = match.matched.empty() ? nullptr : match.matched.front();
  r.match = std::move(match);
  return r;
}

MatchResult match_pattern(const Pattern& p, Node* root) {
  MatchResult last;
  last.reason = root->label() + " has no outputs";
  for (Value* out : root->outputs) {
    if (!out) continue;
    Matcher m;
    State s;
    std::optional<State> done;
    // The root must be the producer of the top value: a pattern whose top is an
    // optional node that is absent still starts at `root` through its input.
    bool ok = m.value(p.node(), out, s, 0, [&](State& fin) {
      if (std::find(fin.matched.begin(), fin.matched.end(), root) == fin.matched.end()) return false;
      done = fin;
      return true;
    });
    if (!ok) {
      last.reason = root->label() + ": " + (m.failure.empty() ? "no match" : m.failure);
      continue;
    }
    Match match;
    match.nodes = std::move(done->nodes);
    match.values = std::move(done->values);
    match.matched = std::move(done->matched);
    auto it = std::find(match.matched.begin(), match.matched.end(), root);
    std::rotate(match.matched.begin(), it, it + 1);
    match.root = root;
    MatchResult r;
    r.match = std::move(match);
    return r;
  }
  return last;
}

// ---- legality helpers -----------------------------------------------------------------------

Status check_interior_private(const Match& m, const std::vector<const Value*>& kept) {
  for (const Node* n : m.matched) {
    if (n == m.root) continue;
    for (const Value* o : n->outputs) {
      if (!o || std::find(kept.begin(), kept.end(), o) != kept.end()) continue;
      if (o->is_graph_output)
        return Status::reject("rule 1: interior value '", o->name, "' of ", n->label(), " is a graph output");
      for (const Use& u : o->uses)
        if (!m.covers(u.node))
          return Status::reject("rule 1: interior value '", o->name, "' of ", n->label(), " is also read by ",
                                u.node->label(), " outside the match");
    }
  }
  return Status::ok();
}

bool is_scalar_const(const Value* v) { return v && v->const_data && v->const_data->numel() == 1; }

std::optional<double> scalar_value(const Value* v) {
  if (!is_scalar_const(v) || v->const_data->dtype == DType::String) return std::nullopt;
  return v->const_data->as_double(0);
}

double dtype_match_tolerance(double x, DType d) {
  int mantissa_bits = 0, min_exponent = 0;  // explicit mantissa bits; exponent of the smallest normal
  double held = x;                          // x rounded to d
  switch (d) {
    case DType::Float16:
      mantissa_bits = 10, min_exponent = -14, held = half_to_float(float_to_half(static_cast<float>(x)));
      break;
    case DType::BFloat16:
      mantissa_bits = 7, min_exponent = -126, held = bf16_to_float(float_to_bf16(static_cast<float>(x)));
      break;
    case DType::Float: mantissa_bits = 23, min_exponent = -126, held = static_cast<float>(x); break;
    default: return 0.0;  // double and integers: exact
  }
  if (!std::isfinite(x) || held == x) return 0.0;
  // One ulp of d at |x| (subnormals share the smallest normal's spacing).
  const int e = x == 0.0 ? min_exponent : std::max(static_cast<int>(std::floor(std::log2(std::fabs(x)))), min_exponent);
  return kConstMatchUlps * std::ldexp(1.0, e - mantissa_bits);
}

bool const_value_matches(double e, double x, double tol, DType d) {
  if (std::isnan(e)) return false;
  if (e == x) return true;
  return std::fabs(e - x) <= std::max(tol, dtype_match_tolerance(x, d));
}

bool const_all_equal(const Value* v, double x, double tol) {
  if (!v || !v->const_data || v->const_data->dtype == DType::String) return false;
  const Tensor& t = *v->const_data;
  if (t.numel() == 0) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!const_value_matches(t.as_double(i), x, tol, t.dtype)) return false;
  return true;
}

}  // namespace fuseopt
