// Shape functions of the control-flow ops If and Loop. Their bodies are kept
// as serialized AttributeProtos in the IR (Attribute::opaque), so reading the
// types a body declares for its outputs is protobuf work and lives here in
// onnx_io, registered like every other shape function.
#include <onnx/onnx_pb.h>

#include <optional>
#include <string>
#include <vector>

#include "ir/shape_inference.h"

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
      if (tt.has_shape()) {
        Shape s;
        for (const auto& d : tt.shape().dim()) {
          if (d.has_dim_value()) s.push_back(Dim::of(d.dim_value()));
          else if (d.has_dim_param()) s.push_back(Dim::sym(d.dim_param()));
          else s.push_back(Dim::unknown());
        }
        t.shape = s;
      }
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

void if_fn(ShapeContext& c) {
  auto then_out = body_outputs(c.node(), "then_branch");
  auto else_out = body_outputs(c.node(), "else_branch");
  if (!then_out || !else_out) return;
  if (then_out->size() != else_out->size())
    c.fail("then_branch has " + std::to_string(then_out->size()) + " outputs, else_branch " +
           std::to_string(else_out->size()));
  // A constant condition picks its branch.
  std::optional<bool> cond;
  if (auto v = c.input_ints(0); v && v->size() == 1) cond = (*v)[0] != 0;
  for (size_t i = 0; i < c.num_outputs() && i < then_out->size(); ++i) {
    const DeclaredType t = cond ? (*cond ? (*then_out)[i] : (*else_out)[i]) : join((*then_out)[i], (*else_out)[i]);
    c.set_output_dtype(i, t.dtype);
    if (t.shape) c.set_output_shape(i, *t.shape);
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
