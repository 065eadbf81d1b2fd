// What an optimization run did: nodes and op counts before/after, per pass
// what it changed (and how long it took), per fusion pattern how many
// candidates matched and how many were rejected, with the reasons.
// Printed as a table (fuseopt's stdout) and as one JSON object (--report).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

// The "schema" value of FusionReport::to_json (docs/report_schema.md); the
// number goes up when a field changes meaning or goes away.
inline constexpr const char* kReportSchema = "fuseopt.report/1";

struct PatternStats {
  std::string pattern;
  int matched = 0;
  int rejected = 0;  // distinct (root node, reason) pairs
  // "Relu 'r1': rule 1: value 'a' of Add 'add1' is also read by Mul 'm'", each once.
  std::vector<std::string> reasons;
};

struct PassStats {
  std::string pass;
  std::string category;  // "cleanup" / "fusion"
  int runs = 0;          // sweeps over the graph
  int rewrites = 0;      // what run() returned, summed
  ChangeCounts changes;  // what the rewriter recorded, summed
  double millis = 0;     // wall time, summed (never used to decide anything)
};

// What `--emit standard` (onnx_io/emit_standard.h) did with one fuseopt op type.
struct EmitStats {
  std::string op;           // the fuseopt op
  std::string standard_as;  // what its standard form is written as ("" when it has none)
  int standard = 0;         // nodes written in standard form
  int fuseopt = 0;          // nodes kept as fuseopt ops (with their function bodies)
  std::vector<std::string> reasons;  // why nodes stayed fuseopt, each once
};

class FusionReport {
 public:
  void set_model(const std::string& input, const std::string& output);
  void begin(const Graph& g);  // nodes and op counts before
  void end(const Graph& g);    // nodes and op counts after

  // Fusion drivers call these.
  void record_match(const std::string& pattern, const Node& root);
  void record_rejection(const std::string& pattern, const Node& root, const std::string& reason);
  // Drops every rejection recorded at the node named `root_name` (a diagnostic that no longer
  // stands: the node was fused by a later round).
  void withdraw_rejections(const std::string& pattern, const std::string& root_name);
  // Makes a pattern appear in the report even with zero candidates.
  void touch_pattern(const std::string& pattern);
  // The PassManager calls this after every run of a pass.
  void record_pass_run(const std::string& pass, const std::string& category, int rewrites,
                       const ChangeCounts& changes, double millis);
  void set_iterations(int n, bool reached_fixed_point);
  // Adds what a run over a control-flow body did (subgraph_fusion.h): its pattern and pass
  // records join these, each rejection reason prefixed with `where` (e.g. "If 'x'
  // then_branch"). Node and op counts stay the top-level graph's (docs/report_schema.md).
  void add_subgraph(const FusionReport& body, const std::string& where);
  // Called after every record_pass_run with the pass name (fuseopt's progress
  // line); never changes what is recorded.
  void set_pass_observer(std::function<void(const std::string& pass)> f) { pass_observer_ = std::move(f); }
  // The output form (--emit): mode and default-domain opset before/after; then one
  // record per fused node; notes are whole-model remarks (an opset upgrade refused).
  void set_emit(const std::string& mode, int64_t opset_before, int64_t opset_after);
  void record_emit(const std::string& op, const std::string& standard_as, bool standard,
                   const std::string& reason = "");
  void add_emit_note(const std::string& note);

  const std::vector<PatternStats>& patterns() const { return patterns_; }
  const PatternStats* pattern(const std::string& name) const;
  const std::vector<PassStats>& passes() const { return passes_; }
  const PassStats* pass(const std::string& name) const;
  int nodes_before() const { return nodes_before_; }
  int nodes_after() const { return nodes_after_; }
  const std::map<std::string, int>& ops_before() const { return ops_before_; }
  const std::map<std::string, int>& ops_after() const { return ops_after_; }
  int iterations() const { return iterations_; }
  bool fixed_point() const { return fixed_point_; }
  const std::string& emit_mode() const { return emit_mode_; }  // "" until set_emit
  int64_t emit_opset_before() const { return emit_opset_before_; }
  int64_t emit_opset_after() const { return emit_opset_after_; }
  const std::vector<EmitStats>& emit_ops() const { return emit_; }
  const EmitStats* emit_op(const std::string& op) const;
  const std::vector<std::string>& emit_notes() const { return emit_notes_; }

  // Human-readable table; `verbose` lists every rejection reason (else the first few).
  std::string to_table(bool verbose = false) const;
  // One JSON object (nlohmann-json; schema "fuseopt.report/1", every field in
  // docs/report_schema.md): {"schema","input","output","nodes_before","nodes_after","iterations",
  // "fixed_point","ops_before":{op:n},"ops_after":{op:n},"passes":[{"name","category",
  // "runs","rewrites","nodes_created","nodes_erased","constants_added",
  // "constants_removed","millis"}],"patterns":[{"name","matched","rejected","reasons":[...]}],
  // "emit":{"mode","opset_before","opset_after","ops":[{"op","standard_as","standard",
  // "fuseopt","reasons":[...]}],"notes":[...]}}  ("emit" only after set_emit)
  std::string to_json() const;

 private:
  PatternStats& stats_for(const std::string& pattern);
  std::string input_, output_;
  int nodes_before_ = 0, nodes_after_ = 0;
  std::map<std::string, int> ops_before_, ops_after_;
  std::vector<PatternStats> patterns_;
  std::vector<PassStats> passes_;
  std::map<std::string, std::vector<std::string>> seen_rejections_;  // pattern -> keys
  int iterations_ = 0;
  bool fixed_point_ = false;
  std::string emit_mode_;
  int64_t emit_opset_before_ = 0, emit_opset_after_ = 0;
  std::vector<EmitStats> emit_;
  std::vector<std::string> emit_notes_;
  std::function<void(const std::string&)> pass_observer_;
};

// JSON string literal (nlohmann-json's escapes; invalid UTF-8 bytes become '?').
std::string json_quote(const std::string& s);

}  // namespace fuseopt
