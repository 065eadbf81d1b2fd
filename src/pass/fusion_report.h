// What an optimization run did: nodes and op counts before/after, per pass
// what it changed (and how long it took), per fusion pattern how many
// candidates matched and how many were rejected, with the reasons.
// Printed as a table (fuseopt's stdout) and as one JSON object (--report).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

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

class FusionReport {
 public:
  void set_model(const std::string& input, const std::string& output);
  void begin(const Graph& g);  // nodes and op counts before
  void end(const Graph& g);    // nodes and op counts after

  // Fusion drivers call these.
  void record_match(const std::string& pattern, const Node& root);
  void record_rejection(const std::string& pattern, const Node& root, const std::string& reason);
  // Makes a pattern appear in the report even with zero candidates.
  void touch_pattern(const std::string& pattern);
  // The PassManager calls this after every run of a pass.
  void record_pass_run(const std::string& pass, const std::string& category, int rewrites,
                       const ChangeCounts& changes, double millis);
  void set_iterations(int n, bool reached_fixed_point);

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

  // Human-readable table; `verbose` lists every rejection reason (else the first few).
  std::string to_table(bool verbose = false) const;
  // One JSON object: {"input","output","nodes_before","nodes_after","iterations",
  // "fixed_point","ops_before":{op:n},"ops_after":{op:n},"passes":[{"name","category",
  // "runs","rewrites","nodes_created","nodes_erased","constants_added",
  // "constants_removed","millis"}],"patterns":[{"name","matched","rejected","reasons":[...]}]}
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
};

// JSON string literal with escapes (shared by the report and the CLI).
std::string json_quote(const std::string& s);

}  // namespace fuseopt
