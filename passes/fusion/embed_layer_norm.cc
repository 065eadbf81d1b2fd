// BERT-family embeddings: 2 or 3 embedding lookups summed, then a LayerNorm
//   E = Gather(T0, ids0) + Gather(T1, ids1) (+ Gather(T2, ids2))   (any Add tree)
//   Y = LayerNorm(E)
// => fuseopt.EmbedLayerNorm(gamma, beta?, T0, ids0, T1, ids1, T2?, ids2?) -> Y
//
// The norm is a LayerNormalization over the last axis, fuseopt.LayerNorm
// (opset < 17 exports) or, since SkipLayerNorm (200) runs first and takes the
// last Add, a fuseopt.SkipLayerNorm without bias or Sum output. The forms met
// in the exports: BERT (word + token type, then + position; position ids a
// Slice of a [1, max_pos] buffer), RoBERTa (position ids computed from
// input_ids, token types an Expand or GatherElements), DistilBERT (word +
// position) from both exporters. Each index tensor is any int64/int32 value:
// the fused op reads them as given and broadcasts them (numpy) to the output's
// leading dims, which is what the Adds of the lookups did.
//
// The lookups are summed in the order of the Add tree (the deeper subtree
// first, which is the original order up to commutativity: ((a + b) + c)), so
// fp32 models reproduce the original sums bit for bit before the norm.
//
// A constant term (with static shapes const_fold computes the position
// lookup, [1, S, D]) is kept as a lookup of its own rows: table = its rows
// [N, D], ids = 0..N-1 in its leading shape, which is exact.
//
// Legality: rule 1 (every Gather and Add output read only inside the match,
// checked by the driver, except a lookup read by whole-shape Shape nodes too,
// rewritten to read its ids); LayerNormalization's Mean/InvStdDev and
// SkipLayerNorm's Sum unused); rule 2 (tables constant, rank 2, width = the
// norm's D; gamma/beta constant [D]); rule 5 (tables, gamma, beta one float
// dtype; indices int64/int32); rule 6 (last axis only); Gather on axis 0; the
// index ranks known and their broadcast agreeing with the norm's leading dims
// wherever shape inference knows both.
#include <algorithm>

#include "pass/pass.h"
#include "passes/fusion/fusion_util.h"

namespace fuseopt {
namespace {

constexpr size_t kMaxLookups = 3;
// The CUDA kernel broadcasts the indices over at most this many leading dims.
constexpr size_t kMaxIndexRank = 6;

bool is_norm_root(const Node& n) {
  if (n.is("LayerNormalization")) return true;
  return n.domain == "fuseopt" && (n.op_type == "LayerNorm" || n.op_type == "SkipLayerNorm");
}

bool is_lookup(const Node* p) { return p && p->is("Gather") && p->inputs.size() == 2 && p->input(0) && p->input(1); }

// Collects the leaves of the Add tree under `v` (the Add child before the
// leaf, see the top): Gather outputs, and constants (a lookup that const_fold
// already did: with static shapes the position ids are a constant, and so is
// their Gather, [1, S, D]). False when a summand is something else, or there
// are too many leaves.
bool collect(Value* v, std::vector<Node*>& adds, std::vector<Value*>& leaves) {
  if (!v) return false;
  Node* p = v->producer;
  if ((v->const_data && !p) || is_lookup(p)) {
    if (std::find(leaves.begin(), leaves.end(), v) != leaves.end()) return false;  // x + x
    leaves.push_back(v);
    return leaves.size() <= kMaxLookups;
  }
  if (!p) return false;
  if (!p->is("Add") || p->inputs.size() != 2 || std::find(adds.begin(), adds.end(), p) != adds.end()) return false;
  adds.push_back(p);
  Value* a = p->input(0);
  Value* b = p->input(1);
  if (b && b->producer && b->producer->is("Add") && !(a && a->producer && a->producer->is("Add"))) std::swap(a, b);
  return collect(a, adds, leaves) && collect(b, adds, leaves);
}

// The summed values a norm root normalises (SkipLayerNorm: X and skip).
std::vector<Value*> summands(const Node& root) {
  if (root.op_type == "SkipLayerNorm") {
    Value* x = root.input(0);
    Value* s = root.input(1);
    if (s && s->producer && s->producer->is("Add") && !(x && x->producer && x->producer->is("Add"))) std::swap(x, s);
    return {x, s};
  }
  return {root.input(0)};
}

std::string leaf_key(size_t i) { return "leaf" + std::to_string(i); }
// The Gather of leaf i, or nullptr for a constant leaf.
const Node* lookup_of(const Match& m, size_t i) { return m.nodes.count(leaf_key(i)) ? m.node(leaf_key(i)) : nullptr; }

// A lookup whose result is also read by Shape nodes only (DistilBERT's
// TorchScript export takes seq_length = inputs_embeds.size(1), and its position
// ids come from that): the Shape of Gather(T [V, D], ids) is always
// Concat(Shape(ids), [D]), which the rewrite writes instead (not the fused
// output's shape: the position ids computed from it would make a cycle).
bool read_outside_by_shapes_only(const Match& m, const Value* v) {
  bool outside = false;
  for (const Use& u : v->uses) {
    if (m.covers(u.node)) continue;
    if (!u.node->is("Shape")) return false;
    outside = true;
  }
  return outside && !v->is_graph_output;
}

class EmbedLayerNormFusion : public FusionPass {
 public:
  std::string name() const override { return "EmbedLayerNorm"; }
  std::string description() const override {
    return "2-3 Gather(table, ids) summed -> LayerNorm/SkipLayerNorm => fuseopt.EmbedLayerNorm (BERT embeddings)";
  }

  MatchResult match(const Graph&, Node* root) const override {
    MatchResult r;
    if (!is_norm_root(*root)) {
      r.reason = "not a LayerNormalization, fuseopt.LayerNorm or fuseopt.SkipLayerNorm";
      return r;
    }
    std::vector<Node*> adds;
    std::vector<Value*> leaves;
    for (Value* v : summands(*root))
      if (!collect(v, adds, leaves)) {
        r.reason = "the normalised sum is not an Add tree of at most 3 Gathers (or constants)";
        return r;
      }
    const size_t lookups = std::count_if(leaves.begin(), leaves.end(), [](Value* v) { return is_lookup(v->producer); });
    if (leaves.size() < 2 || lookups < 1) {
      r.reason = "fewer than 2 terms summed, or no Gather among them";
      return r;
    }
    Match m;
    m.root = root;
    m.nodes["norm"] = root;
    m.matched.push_back(root);
    for (Node* a : adds) m.matched.push_back(a);
    for (size_t i = 0; i < leaves.size(); ++i) {
      m.values[leaf_key(i)] = leaves[i];
      if (!is_lookup(leaves[i]->producer)) continue;
      m.nodes[leaf_key(i)] = leaves[i]->producer;
      m.matched.push_back(leaves[i]->producer);
    }
    r.match = std::move(m);
    return r;
  }

  std::vector<const Value*> kept_outputs(const Match& m) const override {
    std::vector<const Value*> kept;
    for (size_t i = 0; m.values.count(leaf_key(i)); ++i)
      if (lookup_of(m, i) && read_outside_by_shapes_only(m, m.value(leaf_key(i)))) kept.push_back(m.value(leaf_key(i)));
    return kept;
  }

  Status check(const Graph&, const Match& m) const override {
    const Node* ln = m.root;
    if (ln->op_type == "LayerNormalization") {
      const int64_t axis = ln->attr_int("axis", -1);
      const auto r = fusion::rank_of(ln->input(0));
      if (axis != -1 && !(r && axis == *r - 1))
        return Status::reject("rule 6: ", ln->label(), " normalises from axis ", axis, ", not the last axis only");
      for (size_t i = 1; i < ln->outputs.size(); ++i)
        if (ln->outputs[i] && (ln->outputs[i]->num_uses() || ln->outputs[i]->is_graph_output))
          return Status::reject("rule 1: ", ln->label(), " has its Mean/InvStdDev outputs in use");
    } else if (ln->op_type == "SkipLayerNorm") {
      if (ln->attr_int("rms", 0) != 0) return Status::reject(ln->label(), " is an RMS norm, not a LayerNorm");
      if (ln->input(4)) return Status::reject(ln->label(), " has a bias input, which EmbedLayerNorm has no slot for");
      if (const Value* sum = ln->output(1); sum && (sum->num_uses() || sum->is_graph_output))
        return Status::reject("rule 1: the Sum output of ", ln->label(), " is in use");
    }
    const bool skip = ln->op_type == "SkipLayerNorm";  // X, skip, gamma, beta? (, bias?)
    const Value* gamma = ln->input(skip ? 2 : 1);
    const Value* beta = ln->input(skip ? 3 : 2);
    if (Status s = fusion::const_last_axis_vector(gamma, "gamma", ln, -1); !s) return s;
    const int64_t d = gamma->const_data->dims.back();
    if (beta)
      if (Status s = fusion::const_last_axis_vector(beta, "beta", ln, d); !s) return s;

    std::vector<const Value*> floats{gamma, beta};
    std::optional<Shape> lead = Shape{};
    for (size_t i = 0; m.values.count(leaf_key(i)); ++i) {
      const Node* g = lookup_of(m, i);
      if (!g) {  // a constant [..., D]: its rows become a table, its leading dims the ids'
        const Value* c = m.value(leaf_key(i));
        const auto& cd = c->const_data->dims;
        if (cd.empty() || cd.back() != d)
          return Status::reject("rule 2: constant addend '", c->name, "' of ", ln->label(), " has shape ",
                                shape_str(cd), ", not [..., ", d, "]");
        if (cd.size() - 1 > kMaxIndexRank)
          return Status::reject("constant addend '", c->name, "' of ", ln->label(), " has rank ", cd.size());
        floats.push_back(c);
        Shape cs;
        for (size_t k = 0; k + 1 < cd.size(); ++k) cs.push_back(Dim::of(cd[k]));
        lead = broadcast_shapes(*lead, cs);
        if (!lead)
          return Status::reject("constant addend '", c->name, "' of ", ln->label(), " does not broadcast with the lookups");
        continue;
      }
      const Value* table = g->input(0);
      const Value* ids = g->input(1);
      if (!table->const_data)
        return Status::reject("rule 2: table '", table->name, "' of ", g->label(), " is not a constant");
      const auto& td = table->const_data->dims;
      if (td.size() != 2)
        return Status::reject("rule 2: table '", table->name, "' of ", g->label(), " has shape ", shape_str(td),
                              ", not [V, H]");
      const int64_t axis = g->attr_int("axis", 0);
      if (axis != 0 && axis != -2)
        return Status::reject(g->label(), " gathers along axis ", axis, ", not the table's rows (axis 0)");
      if (td[1] != d)
        return Status::reject("rule 2: table '", table->name, "' of ", g->label(), " has width ", td[1],
                              ", the norm's gamma has ", d);
      if (td[0] < 1) return Status::reject("rule 2: table '", table->name, "' of ", g->label(), " has no rows");
      floats.push_back(table);
      const DType it = ids->const_data ? ids->const_data->dtype : ids->dtype;
      if (it != DType::Int64 && it != DType::Int32)
        return Status::reject("rule 5: indices '", ids->name, "' of ", g->label(), " are ",
                              it == DType::Undefined ? "of unknown dtype" : dtype_name(it), ", not int64/int32");
      std::optional<Shape> is = ids->const_data ? std::optional<Shape>(Shape{}) : ids->shape;
      if (ids->const_data) {
        for (int64_t x : ids->const_data->dims) is->push_back(Dim::of(x));
      }
      if (!is)
        return Status::reject("indices '", ids->name, "' of ", g->label(),
                              " have an unknown rank: their broadcast with the other lookups cannot be proven");
      if (is->size() > kMaxIndexRank)
        return Status::reject("indices '", ids->name, "' of ", g->label(), " have rank ", is->size(), " > ",
                              kMaxIndexRank);
      lead = broadcast_shapes(*lead, *is);
      if (!lead)
        return Status::reject("indices '", ids->name, "' of ", g->label(), " do not broadcast with the other lookups'");
    }
    // A lookup read by Shape nodes too: whole shapes only (no start/end), which
    // the rewrite rebuilds from the ids.
    for (size_t i = 0; m.values.count(leaf_key(i)); ++i) {
      const Node* g = lookup_of(m, i);
      if (!g || !read_outside_by_shapes_only(m, g->output(0))) continue;
      for (const Use& u : g->output(0)->uses)
        if (!m.covers(u.node) && (u.node->has_attr("start") || u.node->has_attr("end")))
          return Status::reject("rule 1: '", g->output(0)->name, "' of ", g->label(), " is also read by ",
                                u.node->label(), ", a Shape with start/end");
    }
    // The norm's output is the broadcast of the lookups, [lead..., D]: where
    // shape inference knows it, it must agree (rank, and every dim known on both sides).
    if (const Value* y = ln->output(0); y && y->shape) {
      const Shape& ys = *y->shape;
      if (ys.size() != lead->size() + 1)
        return Status::reject(ln->label(), " output ", shape_str(ys), " is not the lookups' broadcast ",
                              shape_str(*lead), " + [", d, "]");
      for (size_t k = 0; k < lead->size(); ++k)
        if ((*lead)[k].known() && ys[k].known() && (*lead)[k].value != ys[k].value)
          return Status::reject(ln->label(), " output ", shape_str(ys), " differs from the lookups' broadcast ",
                                shape_str(*lead));
    }
    return fusion::same_float_dtype(floats, ln);
  }

  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* ln = m.root;
    const bool skip = ln->op_type == "SkipLayerNorm";
    auto vec = [&](Value* v) -> Value* {
      if (!v || v->const_data->dims.size() == 1) return v;
      return rw.add_constant(v->name, fusion::as_vector(*v->const_data));
    };
    Value* gamma = vec(ln->input(skip ? 2 : 1));
    Value* beta = vec(ln->input(skip ? 3 : 2));
    std::vector<Value*> ins{gamma, beta};
    for (size_t i = 0; m.values.count(leaf_key(i)); ++i) {
      if (const Node* g = lookup_of(m, i)) {
        ins.push_back(g->input(0));
        ins.push_back(g->input(1));
        continue;
      }
      // A constant C [..., D] is Gather(C as [N, D] rows, ids 0..N-1 shaped as C's leading dims): exact.
      const Value* c = m.value(leaf_key(i));
      Tensor rows = *c->const_data;
      const std::vector<int64_t> lead(rows.dims.begin(), rows.dims.end() - 1);
      const int64_t n = rows.numel() / rows.dims.back();
      rows.dims = {n, rows.dims.back()};
      std::vector<int64_t> iota(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) iota[static_cast<size_t>(k)] = k;
      ins.push_back(rw.add_constant(c->name + "_rows", std::move(rows)));
      ins.push_back(rw.add_constant(c->name + "_row_ids", Tensor::from_ints(iota, lead)));
    }
    const float eps = ln->attr_float("epsilon", 1e-5f);
    Node* f = rw.create_node("fuseopt", "EmbedLayerNorm", ins, {Attribute::make_float("epsilon", eps)}, 1, ln->name);
    // Shape(lookup) -> Concat(Shape(ids), [D]) (see read_outside_by_shapes_only).
    for (size_t i = 0; m.values.count(leaf_key(i)); ++i) {
      Value* v = m.value(leaf_key(i));
      const Node* g = lookup_of(m, i);
      if (!g || !read_outside_by_shapes_only(m, v)) continue;
      std::vector<Node*> readers;
      for (const Use& u : v->uses)
        if (!m.covers(u.node) && std::find(readers.begin(), readers.end(), u.node) == readers.end())
          readers.push_back(u.node);
      const int64_t d = g->input(0)->const_data->dims[1];
      for (Node* sh : readers) {
        Node* ids_shape = rw.create_node("", "Shape", {g->input(1)}, {}, 1, sh->name + "_ids");
        Node* cat = rw.create_node("", "Concat", {ids_shape->output(0), rw.add_int64s(sh->name + "_width", {d})},
                                   {Attribute::make_int("axis", 0)}, 1, sh->name);
        rw.replace_all_uses(sh->output(0), cat->output(0));
        rw.erase_node(sh);
      }
    }
    rw.replace_match(m, f, name(), {{ln->outputs[0], f->output(0)}});
  }
};

}  // namespace
// After SkipLayerNorm (200), which turns the last Add of the embeddings into a
// fuseopt.SkipLayerNorm this pass then takes whole, and after LayerNorm (100)
// for opset < 17 exports; before TiedEmbedding (which looks for the table's
// lookups, EmbedLayerNorm's included).
FUSEOPT_REGISTER_PASS(EmbedLayerNormFusion, PassCategory::Fusion, 210);
}  // namespace fuseopt
