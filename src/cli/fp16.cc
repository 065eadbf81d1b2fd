#include "cli/fp16.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "ir/shape_inference.h"
#include "onnx_io/onnx_io.h"
#include "onnx_io/subgraph_load.h"
#include "runtime/parameter_inputs.h"
#include "util/error.h"

namespace fuseopt::cli {

namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10;

bool default_domain(const Node* n) { return n->domain.empty() || n->domain == "ai.onnx"; }

// Standard ops whose statistics, softmax or sums must be computed in fp32.
bool computes_fp32(const Node* n) {
  static const std::set<std::string> ops = {
      "LayerNormalization", "RMSNormalization", "Softmax",         "LogSoftmax", "ReduceMean",
      "ReduceSum",          "ReduceSumSquare",  "ReduceL2",        "ReduceLogSumExp",
      "GroupNormalization", "InstanceNormalization"};
  return default_domain(n) && ops.count(n->op_type);
}

// The session's rule: a float constant read only as a host-side parameter.
bool parameter_only(const Value* v) {
  if (!v || v->uses.empty()) return false;
  for (const Use& u : v->uses) {
    const std::vector<int>& params =
        default_domain(u.node) ? fp32_parameter_inputs(u.node->op_type) : std::vector<int>{};
    if (std::find(params.begin(), params.end(), u.index) == params.end()) return false;
  }
  return true;
}

// Read only by ops that compute in fp32 (their gamma/beta, axes, ...).
bool only_fp32_consumers(const Value* v) {
  if (!v || v->uses.empty()) return false;
  for (const Use& u : v->uses)
    if (u.index < 0 || !computes_fp32(u.node)) return false;
  return true;
}

Tensor to_half(const Tensor& t) {
  Tensor h(DType::Float16, t.dims);
  const float* src = t.data<float>();
  uint16_t* dst = h.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = float_to_half_finite(src[i]);
  return h;
}

// Inserts Cast(v, to) read by the caller; returns its output (dtype/shape set).
Value* add_cast(Graph& g, Value* v, DType to, const std::string& suffix, Fp16Result& r) {
  Node* c = g.add_node("Cast", "", {v}, {g.unique_name(v->name + suffix)}, v->name + suffix);
  c->set_attr(Attribute::make_int("to", to == DType::Float ? kOnnxFloat : kOnnxFloat16));
  Value* out = c->output(0);
  out->dtype = to;
  out->shape = v->shape;
  r.casts_inserted++;
  return out;
}

// Cast after v: every reader of v (and the graph-output position, with v's
// name) moves to the Cast's output, which is returned. `take_name`: the Cast's
// output takes v's name (v is renamed): If branches read outer values by name.
Value* cast_after(Graph& g, Value* v, DType to, const std::string& suffix, Fp16Result& r, bool take_name = false) {
  Value* out = add_cast(g, v, to, suffix, r);
  Node* cast = out->producer;
  g.replace_all_uses(v, out);  // also takes the Cast's own read: restore it
  g.set_input(cast, 0, v);
  if (take_name) {
    const std::string name = v->name;
    const std::string tmp = g.unique_name(name + "_pre_cast");
    g.rename_value(v, tmp);
    g.rename_value(out, name);
  }
  return out;
}

// The outer-scope names the If branches of g read.
std::set<std::string> branch_reads(const Graph& g) {
  std::set<std::string> names;
  for (const auto& n : g.nodes())
    for (const Attribute& a : n->attrs)
      for (std::string& name : subgraph_outer_reads(a)) names.insert(std::move(name));
  return names;
}

// `frozen`: values whose final dtype is given (a branch's outer reads: as the converted outer
// graph has them), typed as before the conversion until the graph's own floats are converted;
// `before`: the outer values' dtypes before the conversion (for this graph's branches);
// `top`: the model's own graph.
using DTypes = std::map<const Value*, DType>;
void convert_graph(Graph& g, const Fp16Options& opts, const DTypes& frozen, Fp16Result& r, bool top = false);

// One If branch: loaded as a Graph whose inputs are the outer values it reads (typed as the
// converted outer graph has them, and left so: `frozen`; a float32 one is cast to float16 inside),
// converted like the outer graph (its outputs become float16 as the If's outputs did), written
// back reading the outer values by name.
void convert_branch(Graph& g, Node* n, size_t attr_index, const std::map<std::string, DType>& before,
                    Fp16Result& r) {
  const Attribute attr = n->attrs[attr_index];
  const std::string where = n->label() + " " + attr.name;
  LoadedSubgraph ls = load_subgraph(attr, g, where);
  Graph& body = *ls.graph;
  DTypes frozen;
  for (const std::string& name : ls.outer_refs) {
    Value* ov = g.find(name);
    Value* bv = body.find(name);
    FUSE_CHECK(ov && bv, "--fp16: " << where << " reads '" << name << "', which is not defined");
    auto it = before.find(name);
    bv->dtype = it != before.end() ? it->second : ov->dtype;  // as the body was written, for its inference
    bv->shape = ov->shape;
    frozen[bv] = ov->dtype;  // as the outer graph has it now
  }
  convert_graph(body, Fp16Options{}, frozen, r, false);
  const std::set<std::string> outer(ls.outer_refs.begin(), ls.outer_refs.end());
  n->attrs[attr_index] = subgraph_attribute(body, attr.name, outer, g.functions, g.ir_version);
}

}  // namespace

Fp16Result convert_to_fp16(Graph& g, const Fp16Options& opts) {
  Fp16Result r;
  convert_graph(g, opts, DTypes{}, r, true);
  return r;
}

namespace {

void convert_graph(Graph& g, const Fp16Options& opts, const DTypes& frozen, Fp16Result& r, bool top) {
  for (const auto& n : g.nodes())
    FUSE_CHECK(!n->has_subgraph() || n->is("If"),
               "--fp16: " << n->label() << " has a Loop/Scan body, which --fp16 does not convert (If branches it does)");
  const std::set<std::string> read_by_branches = branch_reads(g);

  infer_shapes(g);  // every value's dtype (--passes none leaves them as loaded)
  std::map<std::string, DType> before;  // what this graph's branches read, as they were written
  for (const std::string& name : read_by_branches)
    if (const Value* v = g.find(name)) before[name] = v->dtype;

  // 1. Which float constants stay fp32.
  auto keep_fp32 = [](const Value* v) { return parameter_only(v) || only_fp32_consumers(v); };
  std::set<const Value*> kept;
  for (Value* v : g.initializers) {
    if (!v->const_data || v->const_data->dtype != DType::Float) continue;
    if (keep_fp32(v)) {
      kept.insert(v);
      r.constants_kept_fp32++;
      continue;
    }
    v->const_data = g.store_constant(to_half(*v->const_data));  // spilled like any new constant
    v->dtype = DType::Float16;
    r.constants_converted++;
  }

  // 2. Nodes that produce float by attribute.
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (Node* n : nodes) {
    if (!default_domain(n)) continue;
    Value* out = n->output(0);
    if (n->op_type == "Constant" && out) {
      if (keep_fp32(out)) {
        if (out->dtype == DType::Float) kept.insert(out), r.constants_kept_fp32++;
        continue;
      }
      if (const Attribute* a = n->attr("value"); a && a->t && a->t->dtype == DType::Float) {
        n->set_attr(Attribute::make_tensor("value", to_half(*a->t)));
        r.constants_converted++;
      } else if (const Attribute* a = n->attr("value_float")) {
        Tensor t(DType::Float, {});
        t.data<float>()[0] = a->f;
        n->attrs.erase(std::remove_if(n->attrs.begin(), n->attrs.end(),
                                      [](const Attribute& x) { return x.name == "value_float"; }),
                       n->attrs.end());
        n->set_attr(Attribute::make_tensor("value", to_half(t)));
        r.constants_converted++;
      } else if (const Attribute* a = n->attr("value_floats")) {
        Tensor t(DType::Float, {static_cast<int64_t>(a->floats.size())});
        std::copy(a->floats.begin(), a->floats.end(), t.data<float>());
        n->attrs.erase(std::remove_if(n->attrs.begin(), n->attrs.end(),
                                      [](const Attribute& x) { return x.name == "value_floats"; }),
                       n->attrs.end());
        n->set_attr(Attribute::make_tensor("value", to_half(t)));
        r.constants_converted++;
      }
    } else if (n->op_type == "Cast" && n->attr_int("to", 0) == kOnnxFloat) {
      n->set_attr(Attribute::make_int("to", kOnnxFloat16));
    } else if (n->op_type == "ConstantOfShape" && out && out->dtype == DType::Float) {
      const Attribute* a = n->attr("value");
      Tensor t(DType::Float, {1});
      t.data<float>()[0] = a && a->t && a->t->numel() == 1 ? static_cast<float>(a->t->as_double(0)) : 0.f;
      n->set_attr(Attribute::make_tensor("value", to_half(t)));
    } else if ((n->op_type == "EyeLike" || n->op_type.rfind("Random", 0) == 0) &&
               n->attr_int("dtype", -1) == kOnnxFloat) {
      n->set_attr(Attribute::make_int("dtype", kOnnxFloat16));
    }
  }

  // 3. Every other float value becomes float16 (inputs, outputs, intermediates).
  std::map<const Value*, bool> was_float_io;
  for (Value* v : g.all_values()) {
    if (v->dtype != DType::Float || kept.count(v) || frozen.count(v)) continue;
    if (v->is_graph_input || v->is_graph_output) was_float_io[v] = true;
    v->dtype = DType::Float16;
  }
  // A branch's outer reads take the outer graph's dtypes; one that stayed float32 there (an input
  // kept by --keep-io-types) is cast to float16 for the branch's readers.
  for (auto [cv, dt] : frozen) {
    Value* v = const_cast<Value*>(cv);
    v->dtype = dt;
    if (dt == DType::Float && !v->uses.empty()) cast_after(g, v, DType::Float16, "_fp16", r);
  }

  // 4. Standard ops that compute in fp32: Casts around them.
  std::map<const Value*, Value*> as_fp32;  // one Cast per value, shared
  for (Node* n : nodes) {
    if (!computes_fp32(n)) continue;
    bool any = false;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* v = n->inputs[i];
      if (!v || v->dtype != DType::Float16) continue;
      auto it = as_fp32.find(v);
      Value* f = it != as_fp32.end() ? it->second : (as_fp32[v] = add_cast(g, v, DType::Float, "_fp32", r));
      g.set_input(n, i, f);
      any = true;
    }
    for (Value* v : n->outputs) {
      if (!v || v->dtype != DType::Float16) continue;
      v->dtype = DType::Float;  // computed in fp32
      any = true;
      if (opts.keep_io_types && v->is_graph_output && v->uses.empty()) continue;  // a float output already
      cast_after(g, v, DType::Float16, "_fp16", r, read_by_branches.count(v->name) > 0);
    }
    if (any) r.fp32_nodes++;
  }

  // 5. --keep-io-types: float graph inputs/outputs stay FLOAT, Casts at the boundary.
  if (opts.keep_io_types) {
    for (Value* v : std::vector<Value*>(g.inputs)) {
      if (!was_float_io.count(v) || v->dtype != DType::Float16) continue;
      v->dtype = DType::Float;
      // Readers that compute in fp32 read the fp32 input itself.
      std::vector<Use> uses = v->uses;
      Value* h = add_cast(g, v, DType::Float16, "_fp16", r);
      for (const Use& u : uses) {
        if (u.index < 0) continue;
        g.set_input(u.node, u.index, h);
      }
    }
    for (Value* v : std::vector<Value*>(g.outputs)) {
      if (!v || v->dtype != DType::Float16 || !was_float_io.count(v) || v->is_graph_input) continue;
      cast_after(g, v, DType::Float, "_fp32", r);
    }
    // Casts to fp32 that now read a FLOAT input directly are no-ops: read the input.
    for (auto& [src, f] : as_fp32) {
      (void)src;
      Node* c = f->producer;
      Value* in = c ? c->input(0) : nullptr;
      if (!in || in->producer == nullptr || !in->producer->is("Cast")) continue;
      Value* orig = in->producer->input(0);
      if (orig && orig->is_graph_input && orig->dtype == DType::Float) {
        g.replace_all_uses(f, orig);
        g.erase_node(c);
        r.casts_inserted--;
      }
    }
  }

  // 6. If branches, converted the same way; the If nodes then read the outer values by name again.
  for (Node* n : nodes) {
    if (!n->is("If") || !n->has_subgraph()) continue;
    for (size_t i = 0; i < n->attrs.size(); ++i)
      if (n->attrs[i].kind == Attribute::Kind::Graph) convert_branch(g, n, i, before, r);
    rebind_outer_reads(g, n, "--fp16: ");
  }

  g.topo_sort();
  g.verify();
  infer_shapes(g);  // a dtype the conversion got wrong is a contradiction here

  // Known gap (src/onnx_io/functions): before opset 15 (no CastLike) the bodies of
  // fuseopt.Attention and fuseopt.LayerNormLinear are written for float32 only, so
  // ONNX Runtime / onnx.checker reject them in a float16 model; fuserun runs it.
  if (top && g.opset("") < 15) {
    std::set<std::string> ops;
    for (const auto& n : g.nodes())
      if (n->domain == "fuseopt" && (n->op_type == "Attention" || n->op_type == "LayerNormLinear")) ops.insert(n->op_type);
    std::string list;
    for (const auto& o : ops) list += (list.empty() ? "fuseopt." : ", fuseopt.") + o;
    if (!ops.empty())
      spdlog::warn("--fp16 at opset {}: the function bodies of {} are float32-only before opset 15, so ONNX Runtime "
                   "will not load this model (fuserun runs it); --emit standard or an opset >= 15 export avoids it",
                   g.opset(""), list);
  }
}

}  // namespace
}  // namespace fuseopt::cli
