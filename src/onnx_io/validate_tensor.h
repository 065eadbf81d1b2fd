// Well-formedness of onnx::TensorProto (initializers, Constant values, tensor
// attributes) before anything reads its data: the rules of ONNX's checker
// (one value field, the field that matches data_type, no data in a
// 0-element or externally stored tensor), plus a data size that matches the
// dims, which the checker leaves to the runtimes.
#pragma once
#include <string>

namespace onnx {
class TensorProto;
class SparseTensorProto;
}  // namespace onnx

namespace fuseopt {

// The highest TensorProto.DataType value ONNX defines (FLOAT6E3M2 = 28 in ONNX 1.23).
constexpr int kMaxOnnxDataType = 28;

// "" when `t` is well-formed; otherwise what is wrong with it, as a phrase
// that follows the tensor's name ("has two value fields: raw_data and
// float_data"). External data is checked here only for a location; reading
// it (file, offset, length) is tensor_proto.cc's job.
std::string tensor_proto_problem(const onnx::TensorProto& t);
std::string sparse_tensor_proto_problem(const onnx::SparseTensorProto& t);

// ONNX's name of a data type ("FLOAT", "INT64", ...); "data type N" when unknown.
std::string onnx_dtype_name(int data_type);

}  // namespace fuseopt
