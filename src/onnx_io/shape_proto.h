// A TensorShapeProto as fuseopt's Shape: dim_value -> a known dim, dim_param -> a symbol,
// neither -> unknown. One reading for the model's value infos (onnx_io.cc) and for the
// declared outputs of If/Loop bodies (subgraph_shapes.cc).
#pragma once
#include <onnx/onnx_pb.h>

#include "ir/graph.h"

namespace fuseopt {

inline Shape shape_from_proto(const onnx::TensorShapeProto& p) {
  Shape s;
  for (const auto& d : p.dim()) {
    if (d.has_dim_value()) s.push_back(Dim::of(d.dim_value()));
    else if (d.has_dim_param()) s.push_back(Dim::sym(d.dim_param()));
    else s.push_back(Dim::unknown());
  }
  return s;
}

}  // namespace fuseopt
