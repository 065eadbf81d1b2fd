// The --emit driver (emit_standard.h): classify every fuseopt node, pick the opset the
// standard forms need, upgrade the other nodes (opset_upgrade.h), rewrite, report.
// The per-op mappings register themselves from emit_standard_ops.cc and
// emit_standard_attention.cc.
#include "onnx_io/emit_standard.h"
#include "onnx_io/subgraph_load.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "ir/shape_inference.h"
#include "onnx_io/opset_upgrade.h"
#include "pass/fusion_report.h"
#include "util/error.h"

namespace fuseopt {

namespace {
std::map<std::string, StandardEmitter>& emitters() {
  static std::map<std::string, StandardEmitter> r;
  return r;
}
}  // namespace

void register_standard_emitter(StandardEmitter e) {
  std::string op = e.op;
  emitters()[op] = std::move(e);
}

const StandardEmitter* find_standard_emitter(const std::string& op) {
  auto it = emitters().find(op);
  return it == emitters().end() ? nullptr : &it->second;
}

const std::map<std::string, std::string>& fuseopt_only_ops() {
  static const std::map<std::string, std::string> m = {
      {"AddRelu", "no standard ONNX op; its function body is Add + Relu, which a runtime inlines"},
  };
  return m;
}

EmitMode parse_emit_mode(const std::string& s) {
  if (s == "fuseopt") return EmitMode::Fuseopt;
  if (s == "standard") return EmitMode::Standard;
  throw Error("--emit: unknown value '" + s + "' (expected 'fuseopt' or 'standard')");
}

const char* emit_mode_name(EmitMode m) { return m == EmitMode::Standard ? "standard" : "fuseopt"; }

// ---- EmitContext helpers ----------------------------------------------------------------

Value* EmitContext::int64s(const std::vector<int64_t>& v, const std::string& hint) {
  std::string key = "ints";
  for (int64_t x : v) key += "," + std::to_string(x);
  if (auto it = shared.find(key); it != shared.end()) return it->second;
  return shared[key] = rw.add_int64s(hint, v);
}

Value* EmitContext::scalar(DType dt, double v, const std::string& hint) {
  std::ostringstream key;
  key.precision(17);
  key << "scalar," << static_cast<int>(dt) << "," << v;
  if (auto it = shared.find(key.str()); it != shared.end()) return it->second;
  return shared[key.str()] = rw.add_scalar(hint, dt, v);
}

Node* EmitContext::node(const std::string& op, const std::vector<Value*>& in, std::vector<Attribute> attrs, int outs,
                        const std::string& hint) {
  return rw.create_node("", op, in, std::move(attrs), outs, hint.empty() ? op : hint);
}

Value* EmitContext::dim_1d(Value* x, int64_t axis) {
  if (x->shape && axis < static_cast<int64_t>(x->shape->size()) && (*x->shape)[axis].known())
    return int64s({(*x->shape)[axis].value}, "emit_dim");
  std::string key = "dim1d," + x->name + "," + std::to_string(axis);
  if (auto it = shared.find(key); it != shared.end()) return it->second;
  Node* s = node("Shape", {x}, {Attribute::make_int("start", axis), Attribute::make_int("end", axis + 1)}, 1,
                 x->name + "_dim" + std::to_string(axis));
  rw.set_type(s->output(0), DType::Int64, Shape{Dim::of(1)});
  return shared[key] = s->output(0);
}

Value* EmitContext::dim_0d(Value* x, int64_t axis) {
  if (x->shape && axis < static_cast<int64_t>(x->shape->size()) && (*x->shape)[axis].known())
    return scalar(DType::Int64, static_cast<double>((*x->shape)[axis].value), "emit_dim");
  std::string key = "dim0d," + x->name + "," + std::to_string(axis);
  if (auto it = shared.find(key); it != shared.end()) return it->second;
  Node* s = node("Squeeze", {dim_1d(x, axis), int64s({0})}, {}, 1, x->name + "_dim" + std::to_string(axis));
  rw.set_type(s->output(0), DType::Int64, Shape{});
  return shared[key] = s->output(0);
}

void EmitContext::take_over(Value* from, Value* to) {
  if (!from) return;
  to->dtype = from->dtype;
  to->shape = from->shape;
  to->has_value_info = from->has_value_info;
  rw.replace_all_uses(from, to);
}

// ---- the driver -------------------------------------------------------------------------

namespace {

struct Candidate {
  Node* n;
  const StandardEmitter* e;
  int64_t opset;
};

}  // namespace

void apply_emit(Graph& g, const EmitOptions& opts, FusionReport* report) {
  if (opts.mode == EmitMode::Fuseopt) return;
  const int64_t before = g.opset("");
  {
    Rewriter fresh(g);  // dtypes and shapes the checks read (non-strict: never throws)
    fresh.infer_shapes();
  }

  // Fused ops inside If branches (subgraph_fusion.h) are not rewritten: said, not hidden.
  if (report) {
    int branches = 0;
    for (const auto& np : g.nodes())
      for (const Attribute& a : np->attrs)
        if (subgraph_has_domain(a, "fuseopt")) ++branches;
    if (branches > 0)
      report->add_emit_note(std::to_string(branches) +
                            " If branch(es) hold fused ops: they stay fuseopt ops with their function bodies "
                            "(--emit standard rewrites the top-level graph only)");
  }

  // 1. Which fused nodes have an exact standard form.
  std::vector<Candidate> cands;
  std::vector<std::pair<Node*, std::string>> kept;  // node, reason
  int fused = 0;
  for (const auto& np : g.nodes()) {
    Node* n = np.get();
    if (n->domain != "fuseopt") continue;
    ++fused;
    const StandardEmitter* e = find_standard_emitter(n->op_type);
    if (!e) {
      auto it = fuseopt_only_ops().find(n->op_type);
      kept.emplace_back(n, it != fuseopt_only_ops().end() ? it->second : "no standard form is mapped for this op");
      continue;
    }
    std::string why = e->check(g, *n);
    if (!why.empty()) {
      kept.emplace_back(n, why);
      continue;
    }
    cands.push_back({n, e, e->opset(g, *n)});
  }

  // 2. The opset they need; when the other nodes cannot be upgraded that far, the forms
  // that need more than what can be reached stay fuseopt.
  std::set<int64_t, std::greater<>> levels;
  for (const auto& c : cands)
    if (c.opset > before) levels.insert(c.opset);
  int64_t target = before;
  std::string refused;
  for (int64_t level : levels) {
    std::string why = opset_upgrade_blocker(g, level);
    if (why.empty()) {
      target = level;
      break;
    }
    if (refused.empty()) refused = why;
  }
  std::vector<Candidate> go;
  for (const auto& c : cands) {
    if (c.opset <= target) {
      go.push_back(c);
    } else {
      kept.emplace_back(c.n, "its standard form needs opset " + std::to_string(c.opset) +
                                 " and the model cannot be upgraded: " + refused);
    }
  }

  // A model written by an earlier --emit standard (its Attention / RMSNormalization /
  // RotaryEmbedding already standard) is not refused when what is left has no standard form.
  bool already_standard = false;
  for (const auto& np : g.nodes())
    already_standard |= np->is("Attention") || np->is("RMSNormalization") || np->is("RotaryEmbedding");
  if (fused > 0 && go.empty() && !already_standard) {
    std::map<std::string, std::pair<int, std::string>> by_op;
    for (const auto& [n, why] : kept) {
      auto& e = by_op[n->op_type];
      e.first++;
      if (e.second.empty()) e.second = why;
    }
    std::ostringstream os;
    os << "--emit standard: none of the " << fused << " fused ops has an exact standard ONNX form (";
    bool first = true;
    for (const auto& [op, e] : by_op) {
      os << (first ? "" : "; ") << op << " x" << e.first << ": " << e.second;
      first = false;
    }
    os << "); write this model with --emit fuseopt";
    throw Error(os.str());
  }

  // 3. Upgrade, 4. rewrite.
  EmitContext ctx(g);
  ctx.opset = target;
  if (target > before) {
    upgrade_opset(g, ctx.rw, target);
    // Opset 23 came with IR version 11 (ONNX 1.18).
    const int64_t ir = target >= 23 ? 11 : target >= 21 ? 10 : target >= 19 ? 9 : 8;
    g.ir_version = std::max<int64_t>(g.ir_version, ir);
  }
  if (report) report->set_emit(emit_mode_name(opts.mode), before, target);
  for (const auto& c : go) {
    const std::string op = c.n->op_type;
    ctx.rw.set_insertion_point(c.n);
    c.e->rewrite(ctx, c.n);
    if (report) report->record_emit(op, c.e->standard, true);
  }
  ctx.rw.set_insertion_point(nullptr);
  if (report) {
    for (const auto& [n, why] : kept) {
      const StandardEmitter* e = find_standard_emitter(n->op_type);
      report->record_emit(n->op_type, e ? e->standard : "", false, why);
    }
    if (!refused.empty()) report->add_emit_note("opset upgrade refused: " + refused);
  }

  // 5. Tidy: the fuseopt domain goes when no fuseopt node is left (If branches included);
  // order, check, shapes.
  bool any_fuseopt = false;
  for (const auto& np : g.nodes()) {
    any_fuseopt |= np->domain == "fuseopt";
    for (const Attribute& a : np->attrs) any_fuseopt |= subgraph_has_domain(a, "fuseopt");
  }
  if (!any_fuseopt) g.opset_imports.erase("fuseopt");
  ctx.rw.topo_sort();
  ctx.rw.verify();
  ctx.rw.infer_shapes();
  std::set<const StandardEmitter*> used;
  for (const auto& c : go) used.insert(c.e);
  for (const StandardEmitter* e : used)
    if (e->finish) e->finish(ctx);
  if (report) report->end(g);
}

}  // namespace fuseopt
