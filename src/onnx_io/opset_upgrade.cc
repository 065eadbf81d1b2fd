// The opset upgrader (see opset_upgrade.h). One function per incompatible op change,
// each named after the opset where the op changed; the table below lists them. The
// list follows the ONNX changelog from opset 12 to 23: every other op change in that
// range only added types or optional inputs/attributes whose defaults keep the old
// behaviour (Pad-18 `axes`, Pad-19 `wrap`, Resize-18/19 `antialias`, `axes`,
// `keep_aspect_ratio_policy`, `half_pixel_symmetric`, Scatter*-16/18 `reduction`,
// Cast-19 `saturate` (float8 only), Shape-15 `start`/`end`, AveragePool-19
// `dilations`, LpPool-18 `ceil_mode` default 0, ...), so those nodes are valid as
// they are at the new opset.
#include "onnx_io/opset_upgrade.h"

#include <onnx/onnx_pb.h>

#include <set>
#include <sstream>

#include "util/error.h"

namespace fuseopt {
namespace {

// ---- one function per op change ---------------------------------------------------------

// Opset 13: Squeeze, Unsqueeze and ReduceSum take `axes` as an int64 input instead of an
// attribute. Opset 18: the same for ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
// ReduceMax, ReduceMean, ReduceMin, ReduceProd, ReduceSumSquare. A node without the
// attribute keeps reducing/squeezing every axis (no input = the old default).
std::string axes_attribute_to_input_check(const Graph&, const Node& n) {
  if (n.has_attr("axes") && n.input(1))
    return "has both an 'axes' attribute and a second input";
  return "";
}
void axes_attribute_to_input(Rewriter& rw, Node& n) {
  const Attribute* a = n.attr("axes");
  if (!a) return;
  Value* axes = rw.add_int64s(n.name + "_axes", a->ints);
  rw.remove_attr(&n, "axes");
  rw.set_input(&n, 1, axes);
}

// Opset 13: Split takes the piece sizes `split` as an int64 input instead of an attribute.
std::string split_13_check(const Graph&, const Node& n) {
  if (n.has_attr("split") && n.input(1)) return "has both a 'split' attribute and a second input";
  return "";
}
void split_13(Rewriter& rw, Node& n) {
  const Attribute* a = n.attr("split");
  if (!a) return;
  Value* split = rw.add_int64s(n.name + "_split", a->ints);
  rw.remove_attr(&n, "split");
  rw.set_input(&n, 1, split);
}

// Opset 18: a Split without the `split` input must say `num_outputs` (before 18 the
// output count gave equal pieces; 18 requires one of the two).
void split_18(Rewriter& rw, Node& n) {
  if (n.input(1) || n.has_attr("num_outputs")) return;
  rw.set_attr(&n, Attribute::make_int("num_outputs", static_cast<int64_t>(n.outputs.size())));
}

// Opset 13: Softmax, LogSoftmax and Hardmax normalise along the one axis `axis` (default
// -1) instead of over the input flattened to 2-D at `axis` (default 1). The two agree
// only when `axis` is the last axis; the rank must be known to tell.
std::string softmax_13_check(const Graph&, const Node& n) {
  const Value* x = n.input(0);
  const int64_t axis = n.attr_int("axis", 1);
  if (!x || !x->shape) return "input rank unknown: the opset-13 axis change cannot be proven harmless";
  const int64_t r = static_cast<int64_t>(x->shape->size());
  if (axis == -1 || axis == r - 1) return "";
  return "axis " + std::to_string(axis) + " of a rank-" + std::to_string(r) +
         " input: opset 13 normalises that axis alone, not the flattened trailing axes";
}
void softmax_13(Rewriter& rw, Node& n) { rw.set_attr(&n, Attribute::make_int("axis", -1)); }

// Opset 20: GridSample's `mode` values `bilinear` / `bicubic` are spelled `linear` / `cubic`.
void grid_sample_20(Rewriter& rw, Node& n) {
  const std::string m = n.attr_string("mode", "bilinear");
  if (m == "bilinear") rw.set_attr(&n, Attribute::make_string("mode", "linear"));
  if (m == "bicubic") rw.set_attr(&n, Attribute::make_string("mode", "cubic"));
}

// Opset 20: DFT's `axis` attribute (default 1) becomes the optional third input (whose
// default is -2): written explicitly so the meaning stays.
void dft_20(Rewriter& rw, Node& n) {
  const int64_t axis = n.attr_int("axis", 1);
  Tensor t(DType::Int64, {});
  t.data<int64_t>()[0] = axis;
  Value* a = rw.add_constant(n.name + "_axis", std::move(t));
  rw.remove_attr(&n, "axis");
  rw.set_input(&n, 2, a);
}

// Opset 21: GroupNormalization's scale and bias are per channel [C] instead of per group
// [G]; the old per-group values are repeated C/G times (numpy.repeat). Needs the channel
// count known.
std::string group_norm_21_check(const Graph&, const Node& n) {
  const Value* x = n.input(0);
  const int64_t groups = n.attr_int("num_groups", 0);
  if (!x || !x->shape || x->shape->size() < 2 || !(*x->shape)[1].known())
    return "channel count unknown: the opset-21 per-channel scale cannot be built";
  if (groups <= 0 || (*x->shape)[1].value % groups != 0) return "num_groups does not divide the channels";
  return "";
}
void group_norm_21(Rewriter& rw, Node& n) {
  const int64_t groups = n.attr_int("num_groups", 0);
  const int64_t per = (*n.input(0)->shape)[1].value / groups;
  for (size_t slot : {size_t(1), size_t(2)}) {
    Value* s = n.input(slot);
    if (!s) continue;
    Node* r0 = rw.create_node("", "Reshape", {s, rw.add_int64s(n.name + "_g1", {-1, 1})}, {}, 1, n.name + "_gn21");
    Node* e = rw.create_node("", "Expand", {r0->output(0), rw.add_int64s(n.name + "_gexp", {1, per})}, {}, 1,
                             n.name + "_gn21");
    Node* r1 = rw.create_node("", "Reshape", {e->output(0), rw.add_int64s(n.name + "_gc", {-1})}, {}, 1,
                              n.name + "_gn21");
    rw.set_type(r1->output(0), s->dtype, Shape{Dim::of(groups * per)});
    rw.set_input(&n, slot, r1->output(0));
  }
}

// ---- the table -------------------------------------------------------------------------

struct OpChange {
  const char* op;
  int64_t since;  // the opset in which the op changed
  std::string (*check)(const Graph&, const Node&);  // nullptr: always exact
  void (*apply)(Rewriter&, Node&);                   // nullptr: refuse (no exact rewrite)
  const char* why_refused;                           // when apply is nullptr
};
// (A change with no exact rewrite is listed with apply = nullptr and the sentence the
// refusal gives; none of the 12 -> 23 changes needs one today.)

const std::vector<OpChange>& changes() {
  static const std::vector<OpChange> c = {
      {"Squeeze", 13, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"Unsqueeze", 13, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceSum", 13, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"Split", 13, split_13_check, split_13, ""},
      {"Softmax", 13, softmax_13_check, softmax_13, ""},
      {"LogSoftmax", 13, softmax_13_check, softmax_13, ""},
      {"Hardmax", 13, softmax_13_check, softmax_13, ""},
      {"ReduceL1", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceL2", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceLogSum", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceLogSumExp", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceMax", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceMean", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceMin", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceProd", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"ReduceSumSquare", 18, axes_attribute_to_input_check, axes_attribute_to_input, ""},
      {"Split", 18, nullptr, split_18, ""},
      {"GridSample", 20, nullptr, grid_sample_20, ""},
      {"DFT", 20, nullptr, dft_20, ""},
      {"GroupNormalization", 21, group_norm_21_check, group_norm_21, ""},
  };
  return c;
}

bool default_domain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Op types read anywhere inside a serialized GraphProto (recursively).
void subgraph_ops(const onnx::GraphProto& g, std::set<std::string>& ops) {
  for (const auto& n : g.node()) {
    if (n.domain().empty() || n.domain() == "ai.onnx") ops.insert(n.op_type());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) subgraph_ops(a.g(), ops);
      for (const auto& sg : a.graphs()) subgraph_ops(sg, ops);
    }
  }
}

std::string where(const Node& n) { return n.label() + ": "; }

}  // namespace

std::string opset_upgrade_blocker(const Graph& g, int64_t target) {
  const int64_t from = g.opset("");
  if (target <= from) return "";
  std::ostringstream range;
  range << " (opset " << from << " -> " << target << ")";
  if (from < kMinUpgradableOpset)
    return "model opset " + std::to_string(from) + " is below " + std::to_string(kMinUpgradableOpset) +
           ", where the upgrader starts" + range.str();
  for (const auto& np : g.nodes()) {
    const Node& n = *np;
    if (!default_domain(n)) continue;
    for (const OpChange& c : changes()) {
      if (n.op_type != c.op || c.since <= from || c.since > target) continue;
      if (!c.apply) return where(n) + c.why_refused + range.str();
      if (c.check) {
        std::string why = c.check(g, n);
        if (!why.empty())
          return where(n) + "cannot be upgraded past its opset-" + std::to_string(c.since) +
                 " change: " + why + range.str();
      }
    }
    // Subgraph bodies (If/Loop/Scan) are kept byte-exact: refuse when one holds an op
    // that changed in the range.
    for (const Attribute& a : n.attrs) {
      if (a.kind != Attribute::Kind::Graph || a.opaque.empty()) continue;
      onnx::AttributeProto ap;
      if (!ap.ParseFromString(a.opaque)) continue;
      std::set<std::string> ops;
      if (ap.has_g()) subgraph_ops(ap.g(), ops);
      for (const auto& sg : ap.graphs()) subgraph_ops(sg, ops);
      for (const OpChange& c : changes())
        if (ops.count(c.op) && c.since > from && c.since <= target)
          return where(n) + "its subgraph '" + a.name + "' holds " + c.op +
                 ", which changed at opset " + std::to_string(c.since) + " (subgraphs are not upgraded)" +
                 range.str();
    }
  }
  return "";
}

int upgrade_opset(Graph& g, Rewriter& rw, int64_t target) {
  const int64_t from = g.opset("");
  if (target <= from) return 0;
  if (std::string why = opset_upgrade_blocker(g, target); !why.empty()) throw Error(why);
  std::vector<Node*> nodes;
  for (const auto& np : g.nodes())
    if (default_domain(*np)) nodes.push_back(np.get());
  int changed = 0;
  for (Node* n : nodes) {
    bool touched = false;
    for (const OpChange& c : changes()) {  // in opset order: 13 before 18 (Split)
      if (n->op_type != c.op || c.since <= from || c.since > target) continue;
      c.apply(rw, *n);
      touched = true;
    }
    changed += touched;
  }
  g.opset_imports[""] = target;
  return changed;
}

}  // namespace fuseopt
