#include "pass/pass_manager.h"

#include "pass/forced_dims.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "ir/shape_inference.h"
#include "pass/forced_dims.h"
#include "pass/op_arity.h"
#include "pass/subgraph_fusion.h"
#include "util/error.h"

namespace fuseopt {

std::vector<std::string> split_pass_list(const std::string& list) {
  std::vector<std::string> r;
  std::string cur;
  auto flush = [&] {
    size_t b = cur.find_first_not_of(" \t");
    size_t e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) r.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : list) {
    if (c == ',') flush();
    else cur += c;
  }
  flush();
  return r;
}

namespace {

// Expands a user list ("cleanup", "fusion", pass names) into pass names.
std::set<std::string> resolve(const std::vector<std::string>& names, const std::vector<const PassInfo*>& all,
                              const char* flag) {
  std::set<std::string> r;
  for (const std::string& n : names) {
    bool found = false;
    for (const PassInfo* p : all) {
      if (p->name == n || category_name(p->category) == n) {
        r.insert(p->name);
        found = true;
      }
    }
    FUSE_CHECK(found || n == "cleanup" || n == "fusion",
               flag << ": unknown pass '" << n << "' (fuseopt --list-passes shows the passes)");
  }
  return r;
}

}  // namespace

PassManager::PassManager(PassManagerOptions opts) : opts_(std::move(opts)) {
  auto all = registered_passes();
  bool none = opts_.only.size() == 1 && opts_.only[0] == "none";
  std::set<std::string> only;
  if (!opts_.only.empty() && !none) only = resolve(opts_.only, all, "--passes");
  std::set<std::string> disabled = resolve(opts_.disabled, all, "--disable");
  if (none) return;
  for (const PassInfo* p : all) {
    if (!only.empty() && !only.count(p->name)) continue;
    if (disabled.count(p->name)) continue;
    passes_.push_back(p->make());
    categories_.push_back(p->category);
  }
}

std::map<std::string, FusedOrigin> PassManager::run(Graph& g, FusionReport& report) {
  report.begin(g);
  // Passes (and the kernels const_fold runs) may read every required input.
  if (!passes_.empty()) check_op_arity(g);
  Rewriter rw(g);
  PassContext ctx{opts_.pass_options, report};
  // Fusion checks read shapes and dtypes: keep them fresh for every pass.
  if (!passes_.empty()) {
    if (opts_.check_shapes) {
      g.topo_sort();
      infer_shapes(g);  // strict: throws on a contradiction (PassManagerOptions::check_shapes)
    }
    rw.infer_shapes();
  }
  // Lengths the model's own Reshapes fix (TorchScript's baked view() targets) are bound for
  // the passes and the declared input/output shapes restored at the end (forced_dims.h).
  ForcedDimBinding forced;
  if (!passes_.empty() && forced.bind(g)) rw.infer_shapes();
  int iteration = 0;
  bool fixed_point = passes_.empty();
  while (!passes_.empty() && iteration < opts_.max_iterations) {
    ++iteration;
    bool changed = false;
    for (size_t i = 0; i < passes_.size(); ++i) {
      Pass& pass = *passes_[i];
      rw.reset_counts();
      auto t0 = std::chrono::steady_clock::now();
      int rewrites = 0;
      try {
        rewrites = pass.run(rw, ctx);
      } catch (const Error& e) {
        throw Error("pass " + pass.name() + ": " + e.what());
      } catch (const std::exception& e) {
        // A bug in a pass (std::out_of_range, bad_alloc...): still one line naming it.
        throw Error("pass " + pass.name() + ": internal error: " + e.what());
      }
      ChangeCounts c = rw.counts();
      if (rewrites > 0 || c.total() > 0) {
        changed = true;
        try {
          rw.topo_sort();
          if (opts_.verify_each) rw.verify();
        } catch (const Error& e) {
          throw Error("internal: pass " + pass.name() + " left an invalid graph: " + e.what());
        }
        rw.infer_shapes();
      }
      // Weights a pass read (to pack, fold or check them) need not stay resident.
      g.release_weight_pages();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      report.record_pass_run(pass.name(), category_name(categories_[i]), rewrites, c, ms);
      if (rewrites > 0 || c.total() > 0)
        spdlog::debug("iteration {}: {} made {} rewrites ({} nodes created, {} erased)", iteration, pass.name(),
                      rewrites, c.nodes_created, c.nodes_erased);
    }
    if (!changed) {
      fixed_point = true;
      break;
    }
  }
  if (!fixed_point)
    spdlog::warn("passes still changed the graph after {} iterations; stopping there", opts_.max_iterations);
  // The same passes inside If branches (Optimum's merged decoders: subgraph_fusion.h).
  std::vector<std::pair<std::string, FusionReport>> branches;
  if (!passes_.empty()) branches = fuse_if_branches(g, opts_);
  forced.restore(g);
  // Always leave a sorted, verified graph behind (also when no pass ran).
  rw.topo_sort();
  rw.verify();
  report.set_iterations(iteration, fixed_point);
  report.end(g);
  for (const auto& [where, r] : branches) report.add_subgraph(r, where);
  return rw.fused_origins();
}

}  // namespace fuseopt
