// What form the optimized model is written in (`fuseopt --emit`):
//   fuseopt  : fused ops in domain `fuseopt` with model-local function bodies (default)
//   standard : fused subgraphs as standard ONNX operators wherever the semantics coincide
//              exactly (Attention, RMSNormalization, RotaryEmbedding at opset 23,
//              LayerNormalization at 17), the model's opset raised as needed (the other
//              nodes upgraded by onnx_io/opset_upgrade.h); what has no exact standard form
//              stays a fuseopt op with its function body. docs/fused_ops.md lists per op
//              what each mode writes.
//
// Library use (the CLI and the Python binding do the same):
//   PassManager pm(pmo);
//   pm.run(g, report);
//   apply_emit(g, EmitOptions{parse_emit_mode("standard")}, &report);   // before save
//   save_model(g, path, so);   // or serialize_model(g)
//
// Adding a mapping: one StandardEmitter registered with EmitterRegistrar (see
// emit_standard_ops.cc and emit_standard_attention.cc); nothing central changes.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "rewrite/rewriter.h"

namespace fuseopt {

class FusionReport;

enum class EmitMode { Fuseopt, Standard };

struct EmitOptions {
  EmitMode mode = EmitMode::Fuseopt;
};

// "fuseopt" / "standard"; anything else throws Error with one line.
EmitMode parse_emit_mode(const std::string& s);
const char* emit_mode_name(EmitMode m);

// Rewrites `g` in place for the chosen form. Fuseopt: nothing. Standard: every fuseopt
// node with an exact standard form is replaced by it, the default-domain opset is raised
// to what those forms need (when every other node can be upgraded exactly; otherwise the
// forms that need the higher opset stay fuseopt and the report says why), and the report
// (may be null) gets one line per op: how many went standard, how many stayed, why.
// Throws Error (one line) when the graph has fused ops and none of them has a standard
// form: the caller asked for a standard model and would get the fuseopt one.
void apply_emit(Graph& g, const EmitOptions& opts, FusionReport* report);

// ---- the mapping registry ---------------------------------------------------------------

// Shared state of one apply_emit run: the rewriter, and values built once per model
// (attention masks, expanded rotary caches, shape pieces) keyed by what they depend on.
struct EmitContext {
  explicit EmitContext(Graph& g) : g(g), rw(g) {}
  Graph& g;
  Rewriter rw;
  std::map<std::string, Value*> shared;  // key -> value built once
  int64_t opset = 0;                     // the default-domain opset being written

  // Helpers for the mappings.
  Value* int64s(const std::vector<int64_t>& v, const std::string& hint = "emit_ints");
  Value* scalar(DType dt, double v, const std::string& hint = "emit_scalar");
  // dim `axis` of `x` as a 1-D int64 [1] tensor: a constant when known, else Shape(start, end).
  Value* dim_1d(Value* x, int64_t axis);
  // dim `axis` of `x` as a rank-0 int64 (for Range).
  Value* dim_0d(Value* x, int64_t axis);
  Node* node(const std::string& op, const std::vector<Value*>& in, std::vector<Attribute> attrs = {},
             int outs = 1, const std::string& hint = "");
  // `to` takes over every use of `from` (dtype, shape and value_info copied).
  void take_over(Value* from, Value* to);
};

struct StandardEmitter {
  std::string op;        // fuseopt op type
  std::string standard;  // what it is written as, for the report ("RMSNormalization")
  // The default-domain opset the standard form needs for this node.
  std::function<int64_t(const Graph&, const Node&)> opset;
  // "" when this node has an exact standard form, else the reason it stays fuseopt.
  std::function<std::string(const Graph&, const Node&)> check;
  // Builds the standard form and erases `n` (called only after check() gave "").
  std::function<void(EmitContext&, Node* n)> rewrite;
  // Optional: runs once after every rewrite and the final shape inference.
  std::function<void(EmitContext&)> finish = nullptr;
};

void register_standard_emitter(StandardEmitter e);
const StandardEmitter* find_standard_emitter(const std::string& op);

struct EmitterRegistrar {
  explicit EmitterRegistrar(StandardEmitter e) { register_standard_emitter(std::move(e)); }
};

// Ops with no exact standard form, with the sentence the report gives for each.
const std::map<std::string, std::string>& fuseopt_only_ops();

}  // namespace fuseopt
