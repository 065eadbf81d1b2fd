// Load and save .onnx files. The only part of fuseopt that touches the ONNX
// protobuf classes (plus function bodies in onnx_io/functions).
#pragma once
#include <memory>
#include <set>
#include <string>

#include "ir/graph.h"

namespace fuseopt {

// Highest default-domain opset this build understands; newer models are refused
// with a clear error rather than half-understood.
constexpr int64_t kMaxKnownOpset = 28;

struct LoadOptions {
  bool verify = true;  // topo-sort and check the graph (cycle, dangling inputs)
  // Check every node against its operator's schema and every tensor proto
  // before the Graph is built (validate_model.h); --no-validate turns it off.
  bool validate = true;
};

// Throws fuseopt::Error with a one-line message naming the file on any problem.
std::unique_ptr<Graph> load_model(const std::string& path, const LoadOptions& opts = {});
std::unique_ptr<Graph> load_model_from_bytes(const std::string& bytes, const std::string& base_dir,
                                             const std::string& label, const LoadOptions& opts = {});

struct SaveOptions {
  // External data: Auto = when the input had it or the weights exceed 1.8 GiB.
  enum class External { Auto, Always, Never } external = External::Auto;
  size_t external_threshold_bytes = 1024;  // smaller tensors stay inline
  std::string input_path;                  // refuse to overwrite this file
};

// Weights above this many bytes cannot share one protobuf with the graph (the
// 2 GiB message limit, with room left for the graph), so Auto saves them as
// external data.
constexpr size_t kAutoExternalDataBytes = (size_t(18) << 30) / 10;  // 1.8 GiB

// Whether save_model writes a side file: Always / Never as asked; Auto when the
// loaded model had external data or the weights exceed kAutoExternalDataBytes.
bool use_external_data(SaveOptions::External mode, bool had_external_data, size_t weight_bytes);

// Writes atomically: a temporary file in the target folder, then rename. The
// side file for external data is `<output file name>.data` next to it.
void save_model(const Graph& g, const std::string& path, const SaveOptions& opts = {});
std::string serialize_model(const Graph& g);  // inline data only

// A control-flow body (an If branch fuseopt rewrote) as the graph attribute `name`: `body`
// written as a GraphProto whose initializers are its own (callers hoist shared ones to the
// outer graph first) and whose inputs omit the names in `outer` (outer-scope reads, which
// load_subgraph had listed as inputs). The FunctionProtos of its fuseopt ops are appended
// to `functions` (serialized: the outer Graph's `functions`, written once per (domain, name,
// overload)); `ir_version` is raised to what the body needs.
Attribute subgraph_attribute(const Graph& body, const std::string& name, const std::set<std::string>& outer,
                             std::vector<std::string>& functions, int64_t& ir_version);

}  // namespace fuseopt
