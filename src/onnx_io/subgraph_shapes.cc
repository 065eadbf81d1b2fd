// Shape functions of the control-flow ops If and Loop. Their bodies are kept
// as serialized AttributeProtos in the IR (Attribute::opaque), so reading the
// types a body declares for its outputs is protobuf work and lives here in
// onnx_io, registered like every other shape function.
#include <onnx/onnx_pb.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/shape_inference.h"
#include "onnx_io/shape_proto.h"
#include "onnx_io/subgraph_load.h"
#include "util/error.h"

namespace fuseopt {
namespace {

struct DeclaredType {
  DType dtype = DType::Undefined;
  std::optional<Shape> shape;
};

// The declared output types of the subgraph in attribute `name`; nullopt when
// the attribute is missing or not a graph.
std::optional<std::vector<DeclaredType>> body_outputs(const Node& n, const char* name) {
  const Attribute* a = n.attr(name);
  if (!a || a->kind != Attribute::Kind::Graph || a->opaque.empty()) return std::nullopt;
  onnx::AttributeProto proto;
  if (!proto.ParseFromString(a->opaque) || !proto.has_g()) return std::nullopt;
  std::vector<DeclaredType> out;
  for (const auto& o : proto.g().output()) {
    DeclaredType t;
    if (o.has_type() && o.type().has_tensor_type()) {
      const auto& tt = o.type().tensor_type();
      t.dtype = static_cast<DType>(tt.elem_type());
      if (tt.has_shape()) t.shape = shape_from_proto(tt.shape());
    }
    out.push_back(std::move(t));
  }
  return out;
}

// What both branches agree on: equal dims stay, different dims become unknown.
DeclaredType join(const DeclaredType& a, const DeclaredType& b) {
  DeclaredType r;
  r.dtype = a.dtype == b.dtype ? a.dtype : DType::Undefined;
  if (a.shape && b.shape && a.shape->size() == b.shape->size()) {
    Shape s;
    for (size_t i = 0; i < a.shape->size(); ++i)
      s.push_back(dims_equal((*a.shape)[i], (*b.shape)[i]) ? (*a.shape)[i] : Dim::unknown());
    r.shape = s;
  }
  return r;
}

// An If branch inferred as a graph of its own: its outer-scope reads become
// inputs carrying the outer values' dtype, shape, constant data and symbolic
// contents. Declared body types are not enough: TorchScript declares fresh
// names ("Identity525_dim_2") for what is the outer value's [seq, seq], and
// those names break everything downstream. nullopt when the body cannot be
// loaded (then only the declared types are used); a contradiction the body's
// inference finds fails the If.
struct BranchType {
  DType dtype = DType::Undefined;
  std::optional<Shape> shape;
  std::optional<SymbolicContents> contents;
};

std::optional<std::vector<BranchType>> infer_branch(const ShapeContext& c, const char* name) {
  const Graph* outer = c.graph();
  const Attribute* a = c.node().attr(name);
  if (!outer || !a) return std::nullopt;
  LoadedSubgraph sub;
  try {
    sub = load_subgraph(*a, *outer, c.node().label() + " " + name);
  } catch (const Error&) {
    return std::nullopt;
  }
  Graph& body = *sub.graph;
  ShapeInferenceOptions opts;
  opts.reset = true;    // the body's own value_info holds the exporter's fresh names
  opts.strict = false;  // a body we cannot follow is left unknown, not an error of the outer graph
  for (const std::string& ref : sub.outer_refs) {
    Value* in = body.find(ref);
    const Value* ov = nullptr;
    for (const Value* v : c.node().implicit_inputs)
      if (v && v->name == ref) ov = v;
    if (!in || !ov) continue;
    in->dtype = ov->dtype;
    in->shape = ov->shape;
    if (ov->const_data) {
      in->const_data = ov->const_data;
    } else if (const Tensor* t = c.value_const(ov); t && t->numel() <= 4096) {
      in->const_data = std::make_shared<Tensor>(*t);
    }
    if (const SymbolicContents* sc = c.value_contents(ov)) opts.seed_contents[in] = *sc;
  }
  ShapeInferenceResult r;
  try {
    r = infer_shapes(body, opts);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  // A contradiction inside the body (a Greater of float and int32 operands,
  // an outer initializer's type changed: mutate_models.py seed 30 m398) is one
  // ONNX's checker and ONNX Runtime refuse, as in the outer graph: refused,
  // naming the If, the branch and the body's node.
  if (!r.conflicts.empty()) {
    std::string why = r.conflicts.front();
    const std::string prefix = "shape inference: ";
    if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
    c.fail(std::string(name) + ": " + why);
  }
  std::vector<BranchType> out;
  for (const Value* o : body.outputs) {
    BranchType t;
    if (o) {
      t.dtype = o->dtype;
      t.shape = o->shape;
      if (auto it = r.contents.find(o); it != r.contents.end()) t.contents = it->second;
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Inferred beats declared; a dim inference leaves anonymous takes the declared
// one. A rank disagreement means one of them is wrong: the shape stays unknown.
DeclaredType combine(const std::optional<std::vector<BranchType>>& inferred, size_t i, const DeclaredType& declared) {
  if (!inferred || i >= inferred->size()) return declared;
  const BranchType& b = (*inferred)[i];
  DeclaredType r;
  r.dtype = b.dtype != DType::Undefined ? b.dtype : declared.dtype;
  if (b.shape && declared.shape && b.shape->size() != declared.shape->size()) return r;
  if (!b.shape) {
    r.shape = declared.shape;
    return r;
  }
  Shape s = *b.shape;
  if (declared.shape)
    for (size_t k = 0; k < s.size(); ++k)
      if (!s[k].known() && s[k].symbol.empty()) s[k] = (*declared.shape)[k];
  r.shape = s;
  return r;
}

void if_fn(ShapeContext& c) {
  auto then_out = body_outputs(c.node(), "then_branch");
  auto else_out = body_outputs(c.node(), "else_branch");
  if (!then_out || !else_out) return;
  if (then_out->size() != else_out->size())
    c.fail("then_branch has " + std::to_string(then_out->size()) + " outputs, else_branch " +
           std::to_string(else_out->size()));
  // A constant condition picks its branch; only that one is inferred.
  std::optional<bool> cond;
  if (auto v = c.input_ints(0); v && v->size() == 1) cond = (*v)[0] != 0;
  std::optional<std::vector<BranchType>> then_inf, else_inf;
  if (!cond || *cond) then_inf = infer_branch(c, "then_branch");
  if (!cond || !*cond) else_inf = infer_branch(c, "else_branch");
  // A body output whose declared rank is not the rank it computes: ONNX's checker refuses
  // the model ("Inferred shape and existing shape differ in rank"; mutate_models.py seed 17
  // m881, the outer input x one rank up, the bodies' outputs still declared [4]).
  auto check_ranks = [&](const char* which, const std::optional<std::vector<BranchType>>& inf,
                         const std::vector<DeclaredType>& declared) {
    if (!inf) return;
    for (size_t i = 0; i < inf->size() && i < declared.size(); ++i) {
      const auto& got = (*inf)[i].shape;
      const auto& want = declared[i].shape;
      if (got && want && got->size() != want->size())
        c.fail(std::string(which) + " output " + std::to_string(i) + " is declared " + shape_str(*want) +
               " but computes " + shape_str(*got));
    }
  };
  check_ranks("then_branch", then_inf, *then_out);
  check_ranks("else_branch", else_inf, *else_out);
  for (size_t i = 0; i < c.num_outputs() && i < then_out->size(); ++i) {
    const DeclaredType t = combine(then_inf, i, (*then_out)[i]);
    const DeclaredType e = combine(else_inf, i, (*else_out)[i]);
    const DeclaredType r = cond ? (*cond ? t : e) : join(t, e);
    c.set_output_dtype(i, r.dtype);
    if (r.shape) c.set_output_shape(i, *r.shape);
    // Symbolic contents pass through a branch the condition has chosen.
    const std::optional<std::vector<BranchType>>* taken = cond ? (*cond ? &then_inf : &else_inf) : nullptr;
    if (taken && *taken && i < (*taken)->size() && (**taken)[i].contents)
      c.set_output_contents(i, *(**taken)[i].contents);
  }
}

// Loop(M?, cond?, v_initial...) -> (v_final..., scan_outputs...). The body's
// outputs are (cond, carried..., scan...). Carried values keep their body
// type; scan outputs gain a leading dim of unknown length (early exit).
void loop_fn(ShapeContext& c) {
  auto body = body_outputs(c.node(), "body");
  const size_t carried = c.num_inputs() >= 2 ? c.num_inputs() - 2 : 0;
  for (size_t i = 0; i < carried && i < c.num_outputs(); ++i) {
    const DeclaredType* t = body && i + 1 < body->size() ? &(*body)[i + 1] : nullptr;
    c.set_output_dtype(i, t && t->dtype != DType::Undefined ? t->dtype : c.input_dtype(i + 2));
    if (t && t->shape) c.set_output_shape(i, *t->shape);
  }
  if (!body) return;
  for (size_t i = carried; i < c.num_outputs() && i + 1 < body->size(); ++i) {
    const DeclaredType& t = (*body)[i + 1];
    c.set_output_dtype(i, t.dtype);
    if (t.shape) {
      Shape s{Dim::unknown()};
      s.insert(s.end(), t.shape->begin(), t.shape->end());
      c.set_output_shape(i, s);
    }
  }
}

}  // namespace

FUSEOPT_SHAPE_FN("", "If", if_fn);
FUSEOPT_SHAPE_FN("", "Loop", loop_fn);

}  // namespace fuseopt
