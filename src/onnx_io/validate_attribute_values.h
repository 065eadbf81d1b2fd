// String attributes whose values ONNX enumerates (Pad's mode, the convolutions' and pools'
// auto_pad, Resize's modes, ...): a value outside the list is refused on load, as ONNX Runtime
// refuses it when it builds the kernel ("Invalid 'mode' attribute value": mutate_models.py seed
// 34 m537, Pad mode = ''), where fuseopt would otherwise write the model back unchanged.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>

namespace fuseopt::validation {

// "" when every enumerated string attribute of the default-domain node `n` holds a value some
// version of its operator defines; else what is wrong, naming the attribute, the value and the list.
std::string enum_attribute_problem(const onnx::NodeProto& n);

}  // namespace fuseopt::validation
