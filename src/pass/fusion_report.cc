#include "pass/fusion_report.h"

#include "util/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

namespace fuseopt {

namespace {
}  // namespace

std::string json_quote(const std::string& raw) { return nlohmann::json(valid_utf8(raw)).dump(); }

void FusionReport::set_model(const std::string& input, const std::string& output) {
  input_ = input;
  output_ = output;
}

void FusionReport::begin(const Graph& g) {
  nodes_before_ = static_cast<int>(g.num_nodes());
  ops_before_ = g.op_counts();
}

void FusionReport::end(const Graph& g) {
  nodes_after_ = static_cast<int>(g.num_nodes());
  ops_after_ = g.op_counts();
}

PatternStats& FusionReport::stats_for(const std::string& pattern) {
  for (auto& p : patterns_)
    if (p.pattern == pattern) return p;
  PatternStats s;
  s.pattern = pattern;
  patterns_.push_back(std::move(s));
  return patterns_.back();
}

void FusionReport::touch_pattern(const std::string& pattern) { stats_for(pattern); }

void FusionReport::record_match(const std::string& pattern, const Node& root) {
  stats_for(pattern).matched++;
  // A candidate rejected in an earlier iteration that now fuses (another
  // fusion changed its surroundings) is no longer a rejection.
  withdraw_rejections(pattern, root.name);
}

void FusionReport::withdraw_rejections(const std::string& pattern, const std::string& root_name) {
  PatternStats& s = stats_for(pattern);
  auto& seen = seen_rejections_[pattern];
  const std::string prefix = root_name + "\x1f";
  for (size_t i = 0; i < seen.size();) {
    if (seen[i].rfind(prefix, 0) == 0) {
      seen.erase(seen.begin() + i);
      s.reasons.erase(s.reasons.begin() + i);
      s.rejected--;
    } else {
      ++i;
    }
  }
}

void FusionReport::record_rejection(const std::string& pattern, const Node& root, const std::string& reason) {
  // The fixed-point loop meets the same candidate again every iteration: count it once.
  std::string key = root.name + "\x1f" + reason;
  auto& seen = seen_rejections_[pattern];
  if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
  seen.push_back(key);
  PatternStats& s = stats_for(pattern);
  s.rejected++;
  s.reasons.push_back(root.label() + ": " + reason);
}

void FusionReport::add_subgraph(const FusionReport& body, const std::string& where) {
  for (const PatternStats& b : body.patterns_) {
    PatternStats& s = stats_for(b.pattern);
    s.matched += b.matched;
    s.rejected += b.rejected;
    for (const std::string& r : b.reasons) s.reasons.push_back(where + ": " + r);
  }
  for (const PassStats& b : body.passes_) {
    PassStats* s = nullptr;
    for (auto& p : passes_)
      if (p.pass == b.pass) s = &p;
    if (!s) {
      PassStats fresh;
      fresh.pass = b.pass;
      fresh.category = b.category;
      passes_.push_back(std::move(fresh));
      s = &passes_.back();
    }
    s->runs += b.runs;
    s->rewrites += b.rewrites;
    s->changes += b.changes;
    s->millis += b.millis;
  }
}

void FusionReport::record_pass_run(const std::string& pass, const std::string& category, int rewrites,
                                   const ChangeCounts& changes, double millis) {
  PassStats* s = nullptr;
  for (auto& p : passes_)
    if (p.pass == pass) s = &p;
  if (!s) {
    PassStats fresh;
    fresh.pass = pass;
    fresh.category = category;
    passes_.push_back(std::move(fresh));
    s = &passes_.back();
  }
  s->runs++;
  s->rewrites += rewrites;
  s->changes += changes;
  s->millis += millis;
  if (pass_observer_) pass_observer_(pass);
}

void FusionReport::set_iterations(int n, bool reached_fixed_point) {
  iterations_ = n;
  fixed_point_ = reached_fixed_point;
}

void FusionReport::set_emit(const std::string& mode, int64_t opset_before, int64_t opset_after) {
  emit_mode_ = mode;
  emit_opset_before_ = opset_before;
  emit_opset_after_ = opset_after;
}

void FusionReport::record_emit(const std::string& op, const std::string& standard_as, bool standard,
                               const std::string& reason) {
  EmitStats* s = nullptr;
  for (auto& e : emit_)
    if (e.op == op) s = &e;
  if (!s) {
    emit_.push_back(EmitStats{op, standard_as, 0, 0, {}});
    s = &emit_.back();
  }
  if (s->standard_as.empty()) s->standard_as = standard_as;
  (standard ? s->standard : s->fuseopt)++;
  if (!reason.empty() && std::find(s->reasons.begin(), s->reasons.end(), reason) == s->reasons.end())
    s->reasons.push_back(reason);
}

void FusionReport::add_emit_note(const std::string& note) { emit_notes_.push_back(note); }

const EmitStats* FusionReport::emit_op(const std::string& op) const {
  for (const auto& e : emit_)
    if (e.op == op) return &e;
  return nullptr;
}

const PatternStats* FusionReport::pattern(const std::string& name) const {
  for (const auto& p : patterns_)
    if (p.pattern == name) return &p;
  return nullptr;
}

const PassStats* FusionReport::pass(const std::string& name) const {
  for (const auto& p : passes_)
    if (p.pass == name) return &p;
  return nullptr;
}

namespace {

std::string pad(const std::string& s, size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::string FusionReport::to_table(bool verbose) const {
  std::ostringstream os;
  if (!input_.empty()) os << "model: " << input_ << (output_.empty() ? "" : " -> " + output_) << "\n";
  os << "nodes: " << nodes_before_ << " -> " << nodes_after_ << "  (" << iterations_
     << (iterations_ == 1 ? " iteration" : " iterations") << (fixed_point_ ? ", fixed point" : ", iteration cap reached")
     << ")\n";

  std::set<std::string> ops;
  size_t w = 2;
  for (const auto& [op, n] : ops_before_) ops.insert(op);
  for (const auto& [op, n] : ops_after_) ops.insert(op);
  for (const auto& op : ops) w = std::max(w, op.size());
  os << "\n" << pad("op", w + 2) << pad("before", 8, true) << pad("after", 8, true) << "\n";
  for (const auto& op : ops) {
    auto b = ops_before_.count(op) ? ops_before_.at(op) : 0;
    auto a = ops_after_.count(op) ? ops_after_.at(op) : 0;
    os << "  " << pad(op, w) << pad(std::to_string(b), 8, true) << pad(std::to_string(a), 8, true)
       << (a != b ? "  *" : "") << "\n";
  }

  if (!passes_.empty()) {
    size_t pw = 4;
    for (const auto& p : passes_) pw = std::max(pw, p.pass.size());
    os << "\n" << pad("pass", pw + 4) << pad("category", 10) << pad("runs", 6, true) << pad("rewrites", 10, true)
       << pad("created", 9, true) << pad("erased", 8, true) << pad("consts+", 9, true) << pad("consts-", 9, true)
       << pad("ms", 10, true) << "\n";
    for (const auto& p : passes_) {
      os << "  " << pad(p.pass, pw + 2) << pad(p.category, 10) << pad(std::to_string(p.runs), 6, true)
         << pad(std::to_string(p.rewrites), 10, true) << pad(std::to_string(p.changes.nodes_created), 9, true)
         << pad(std::to_string(p.changes.nodes_erased), 8, true)
         << pad(std::to_string(p.changes.constants_added), 9, true)
         << pad(std::to_string(p.changes.constants_removed), 9, true) << pad(fixed(p.millis, 2), 10, true) << "\n";
    }
  }

  if (!patterns_.empty()) {
    size_t fw = 7;
    for (const auto& p : patterns_) fw = std::max(fw, p.pattern.size());
    os << "\n" << pad("fusion", fw + 2) << pad("matched", 9, true) << pad("rejected", 10, true) << "\n";
    for (const auto& p : patterns_) {
      os << "  " << pad(p.pattern, fw) << pad(std::to_string(p.matched), 9, true)
         << pad(std::to_string(p.rejected), 10, true) << "\n";
      size_t shown = 0;
      for (const auto& r : p.reasons) {
        if (!verbose && shown == 5) {
          os << "      ... " << (p.reasons.size() - shown) << " more (use -v or --report)\n";
          break;
        }
        os << "      rejected " << r << "\n";
        ++shown;
      }
    }
  }
  if (!emit_mode_.empty() && emit_mode_ != "fuseopt") {
    const std::string title = "emit " + emit_mode_ + " (opset " + std::to_string(emit_opset_before_) + " -> " +
                              std::to_string(emit_opset_after_) + ")";
    size_t ew = title.size() > 2 ? title.size() - 2 : 0;
    for (const auto& e : emit_) ew = std::max(ew, e.op.size() + (e.standard_as.empty() ? 0 : 4 + e.standard_as.size()));
    os << "\n" << pad(title, ew + 2) << pad("standard", 10, true) << pad("fuseopt", 9, true) << "\n";
    for (const auto& e : emit_) {
      os << "  " << pad(e.op + (e.standard_as.empty() ? "" : " -> " + e.standard_as), ew)
         << pad(std::to_string(e.standard), 10, true) << pad(std::to_string(e.fuseopt), 9, true) << "\n";
      for (const auto& r : e.reasons) os << "      kept fuseopt." << e.op << ": " << r << "\n";
    }
    for (const auto& n : emit_notes_) os << "  note: " << n << "\n";
  }
  return os.str();
}

std::string FusionReport::to_json() const {
  // Insertion-ordered, so the keys come out in the documented order
  // (docs/report_schema.md). Strings pass valid_utf8 first: nlohmann's dump
  // throws on invalid UTF-8, and a name from a corrupted file must not stop
  // the report.
  using json = nlohmann::ordered_json;
  auto str = [](const std::string& s) { return json(valid_utf8(s)); };
  auto strs = [&](const std::vector<std::string>& v) {
    json a = json::array();
    for (const auto& s : v) a.push_back(str(s));
    return a;
  };
  auto counts = [&](const std::map<std::string, int>& m) {
    json o = json::object();
    for (const auto& [op, n] : m) o[valid_utf8(op)] = n;
    return o;
  };
  json j;
  j["schema"] = kReportSchema;
  j["input"] = str(input_);
  j["output"] = str(output_);
  j["nodes_before"] = nodes_before_;
  j["nodes_after"] = nodes_after_;
  j["iterations"] = iterations_;
  j["fixed_point"] = fixed_point_;
  j["ops_before"] = counts(ops_before_);
  j["ops_after"] = counts(ops_after_);
  j["passes"] = json::array();
  for (const auto& p : passes_) {
    json e;
    e["name"] = str(p.pass);
    e["category"] = str(p.category);
    e["runs"] = p.runs;
    e["rewrites"] = p.rewrites;
    e["nodes_created"] = p.changes.nodes_created;
    e["nodes_erased"] = p.changes.nodes_erased;
    e["constants_added"] = p.changes.constants_added;
    e["constants_removed"] = p.changes.constants_removed;
    e["millis"] = std::round(p.millis * 1000.0) / 1000.0;  // 3 decimals, as the table
    j["passes"].push_back(std::move(e));
  }
  j["patterns"] = json::array();
  for (const auto& p : patterns_) {
    json e;
    e["name"] = str(p.pattern);
    e["matched"] = p.matched;
    e["rejected"] = p.rejected;
    e["reasons"] = strs(p.reasons);
    j["patterns"].push_back(std::move(e));
  }
  if (!emit_mode_.empty()) {
    json em;
    em["mode"] = str(emit_mode_);
    em["opset_before"] = emit_opset_before_;
    em["opset_after"] = emit_opset_after_;
    em["ops"] = json::array();
    for (const auto& e : emit_) {
      json o;
      o["op"] = str(e.op);
      o["standard_as"] = str(e.standard_as);
      o["standard"] = e.standard;
      o["fuseopt"] = e.fuseopt;
      o["reasons"] = strs(e.reasons);
      em["ops"].push_back(std::move(o));
    }
    em["notes"] = strs(emit_notes_);
    j["emit"] = std::move(em);
  }
  return j.dump(2) + "\n";
}

}  // namespace fuseopt
