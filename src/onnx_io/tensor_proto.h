// onnx::TensorProto <-> fuseopt::Tensor, including external data.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "ir/tensor.h"

namespace onnx { class TensorProto; }

namespace fuseopt {

class MappedFile;

// External-data tensors of at least this many bytes are memory-mapped
// read-only (never copied); smaller ones are read into memory. The
// environment variable FUSEOPT_MAP_MIN_BYTES overrides it (tests map every
// tensor with 0).
constexpr size_t kMapExternalMinBytes = size_t(64) << 10;
size_t map_external_min_bytes();

// The side files one model's tensors read: each opened once, its tensors
// mapped from that one descriptor.
struct ExternalFiles {
  std::map<std::string, std::shared_ptr<MappedFile>> by_path;
  size_t map_min_bytes = map_external_min_bytes();
};

// base_dir: folder that external-data locations are relative to. `label`
// names the model file in errors. Locations that are absolute or leave the
// model's folder are refused. `files`: where side files are kept open (a
// tensor of external data without one opens its file for itself).
Tensor tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& label = "",
                         ExternalFiles* files = nullptr);
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);
// dims, dtype and name only (for external data).
void tensor_to_proto_header(const Tensor& t, const std::string& name, onnx::TensorProto* p);

}  // namespace fuseopt
