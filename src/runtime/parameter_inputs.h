// Float inputs an op reads on the host as parameters that set output shapes
// (Resize's roi and scales: floor(len * scale)). A session keeps such
// constants in fp32 whatever the compute precision -- fp16(0.3) = 0.2998
// would change an output length. Ops declare theirs where their kernels
// live (FUSEOPT_FP32_PARAMETER_INPUTS); the session asks by op type.
#pragma once
#include <string>
#include <vector>

namespace fuseopt {

void register_fp32_parameter_inputs(const std::string& op, std::vector<int> inputs);
// Input indices of `op` (ONNX domain) that are fp32 parameters; empty if none.
const std::vector<int>& fp32_parameter_inputs(const std::string& op);

struct Fp32ParameterInputsRegistrar {
  Fp32ParameterInputsRegistrar(const std::string& op, std::vector<int> inputs) {
    register_fp32_parameter_inputs(op, std::move(inputs));
  }
};

}  // namespace fuseopt

#define FUSEOPT_FP32_PARAMETER_INPUTS(ID, OP, ...) \
  static ::fuseopt::Fp32ParameterInputsRegistrar ID##_fp32_params(OP, std::vector<int> __VA_ARGS__)
