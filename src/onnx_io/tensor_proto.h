// onnx::TensorProto <-> fuseopt::Tensor, including external data.
#pragma once
#include <string>

#include "ir/tensor.h"

namespace onnx { class TensorProto; }

namespace fuseopt {

// base_dir: folder that external-data locations are relative to. `label`
// names the model file in errors. Locations that are absolute or leave the
// model's folder are refused.
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& label = "");
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);
// dims, dtype and name only (for external data).
void tensor_to_proto_header(const Tensor& t, const std::string& name, onnx::TensorProto* p);

}  // namespace fuseopt
