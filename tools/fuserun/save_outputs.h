// fuserun --save-outputs DIR: the run's inputs and outputs in the ONNX
// backend-test layout that --check reads (input_N.pb / output_N.pb, named),
// so that one model's outputs become the reference of another:
//   fuserun orig.onnx --save-outputs ref/ && fuserun opt.onnx --check ref/
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fuseopt::fuserun {

// Creates `dir` if needed; inputs in the graph's input order, outputs in its
// output order. Throws Error naming the file on failure.
void save_check_dir(const std::string& dir, const Graph& g, const std::map<std::string, Tensor>& inputs,
                    const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs);

}  // namespace fuseopt::fuserun
