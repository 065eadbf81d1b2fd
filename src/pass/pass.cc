#include "pass/pass.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "pass/fusion_report.h"
#include "util/error.h"

namespace fuseopt {

const char* category_name(PassCategory c) { return c == PassCategory::Cleanup ? "cleanup" : "fusion"; }

const PassOptions FusionPass::kDefaultOptions{};

const Pattern& FusionPass::built_pattern() const {
  if (!pattern_) pattern_ = pattern();
  return *pattern_;
}

int FusionPass::run(Rewriter& rw, PassContext& ctx) {
  options_ = &ctx.options;
  pattern_ = pattern();  // once per sweep, not per node
  const std::string pname = pattern_name();
  ctx.report.touch_pattern(pname);
  // Consumers first: the longest chain ending at a node is tried before a
  // shorter one rooted further up. Nodes erased by earlier rewrites are skipped.
  std::vector<Node*> order;
  for (const auto& n : rw.graph().nodes()) order.push_back(n.get());
  std::reverse(order.begin(), order.end());
  int rewrites = 0;
  for (Node* n : order) {
    if (!rw.alive(n)) continue;
    MatchResult r = match(rw.graph(), n);
    if (!r) {
      if (ctx.options.verbose >= 2) spdlog::trace("{}: {}", pname, r.reason);
      continue;
    }
    const Match& m = *r.match;
    Status s = check_interior_private(m, kept_outputs(m));
    if (s) s = check(rw.graph(), m);
    if (!s) {
      ctx.report.record_rejection(pname, *n, s.reason());
      spdlog::debug("{}: rejected at {}: {}", pname, n->label(), s.reason());
      continue;
    }
    ctx.report.record_match(pname, *n);
    spdlog::debug("{}: fusing {}", pname, m.node_names());
    rw.set_insertion_point(n);
    rewrite(m, rw);
    rw.set_insertion_point(nullptr);
    ++rewrites;
  }
  return rewrites;
}

// ---- registry ------------------------------------------------------------------

namespace {
std::vector<std::unique_ptr<PassInfo>>& registry() {
  static std::vector<std::unique_ptr<PassInfo>> r;
  return r;
}
}  // namespace

void register_pass(PassInfo info) { registry().push_back(std::make_unique<PassInfo>(std::move(info))); }

std::vector<const PassInfo*> registered_passes() {
  std::vector<const PassInfo*> r;
  std::map<std::string, int> names;
  for (const auto& p : registry()) {
    FUSE_CHECK(++names[p->name] == 1, "internal: two passes are registered as '" << p->name << "'");
    r.push_back(p.get());
  }
  std::sort(r.begin(), r.end(), [](const PassInfo* a, const PassInfo* b) {
    if (a->category != b->category) return a->category < b->category;
    if (a->order != b->order) return a->order < b->order;
    return a->name < b->name;
  });
  return r;
}

const PassInfo* find_pass(const std::string& name) {
  for (const auto& p : registry())
    if (p->name == name) return p.get();
  return nullptr;
}

PassRegistrar::PassRegistrar(std::function<std::unique_ptr<Pass>()> make, PassCategory category, int order) {
  std::unique_ptr<Pass> probe = make();
  PassInfo info;
  info.name = probe->name();
  info.description = probe->description();
  info.category = category;
  info.order = order;
  info.make = std::move(make);
  register_pass(std::move(info));
}

}  // namespace fuseopt
