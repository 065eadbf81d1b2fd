// Required-input counts of standard ONNX ops. Passes and CPU kernels read the
// inputs an op must have without checking; a malformed model (a Gather with
// one input) must be refused with a clear error before any pass or kernel
// sees it. Only the minimum is checked: optional trailing inputs vary by opset.
#pragma once
#include <optional>
#include <string>

#include "ir/graph.h"

namespace fuseopt {

// Minimum number of present inputs for a default-domain op at this opset;
// nullopt for ops this table does not know (they are not checked).
std::optional<int> min_inputs(const std::string& op, int64_t opset);

// Throws Error naming the first node that lacks a required input.
void check_op_arity(const Graph& g);

}  // namespace fuseopt
