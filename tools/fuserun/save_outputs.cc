#include "tools/fuserun/save_outputs.h"

#include <onnx/onnx_pb.h>

#include <filesystem>

#include "onnx_io/tensor_proto.h"
#include "util/error.h"
#include "util/file.h"

namespace fs = std::filesystem;

namespace fuseopt::fuserun {

namespace {

void write_tensor(const fs::path& path, const std::string& name, const Tensor& t) {
  onnx::TensorProto p;
  tensor_to_proto(t, name, &p);
  std::string bytes;
  FUSE_CHECK(p.SerializeToString(&bytes), "--save-outputs: cannot serialize '" << name << "'");
  AtomicFile f(path.string());
  f.write(bytes);
  f.commit();
}

}  // namespace

void save_check_dir(const std::string& dir, const Graph& g, const std::map<std::string, Tensor>& inputs,
                    const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  FUSE_CHECK(fs::is_directory(dir, ec), "--save-outputs " << dir << ": cannot create the folder");
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const std::string& name = g.inputs[i]->name;
    auto it = inputs.find(name);
    FUSE_CHECK(it != inputs.end(), "--save-outputs: no value for input '" << name << "'");
    write_tensor(fs::path(dir) / ("input_" + std::to_string(i) + ".pb"), name, it->second);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    write_tensor(fs::path(dir) / ("output_" + std::to_string(i) + ".pb"), output_names.at(i), outputs[i]);
  // A stale output_N.pb past these would make --check refuse the folder (more references than outputs).
  for (size_t i = outputs.size();; ++i) {
    fs::path extra = fs::path(dir) / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(extra, ec)) break;
    fs::remove(extra, ec);
  }
}

}  // namespace fuseopt::fuserun
