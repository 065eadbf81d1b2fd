// Runs one node with the CPU kernels on host Tensors. Used by constant
// folding (passes) and by op tests (tests/support/op_test.h).
#pragma once
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fuseopt {

// inputs[i] may be nullptr for an omitted optional input. Returns one Tensor
// per declared output (an omitted output gives an empty, Undefined Tensor).
// Throws Error when no CPU kernel exists or the kernel rejects the inputs.
std::vector<Tensor> eval_node_cpu(const Node& n, const std::vector<const Tensor*>& inputs);

// True when a CPU kernel is registered for this node (dispatch dtype taken
// from the given inputs). A float16/bfloat16 node without a kernel of its own
// runs on the fp32 kernel, its float outputs rounded back (eval_node.cc).
bool has_cpu_kernel(const Node& n, const std::vector<const Tensor*>& inputs);

}  // namespace fuseopt
