// fuserun --compare-cpu: finds the kernel that makes a backend disagree with
// the CPU reference. Every node output becomes a graph output, the graph runs
// once on each backend with the same inputs, and the node outputs are
// compared in graph order: the first one over tolerance names the culprit
// (later ones usually only inherit its error).
#pragma once
#include <map>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/session.h"

namespace fuseopt::fuserun {

// Prints the comparison; returns the number of node outputs over tolerance.
// `g` is modified (its intermediates become graph outputs). `device` holds
// the backend and precision to test; the reference always runs on the CPU
// in fp32.
int compare_with_cpu(Graph& g, const std::map<std::string, Tensor>& inputs, const SessionOptions& device, double rtol,
                     int max_listed);

}  // namespace fuseopt::fuserun
