// Every real exported model in models/real, original and optimized (all
// passes), on the CUDA backend: fp32 within 1e-4 of ONNX Runtime's reference
// outputs; the run replayed from a captured CUDA graph is bit-identical to the
// eager run; fp16 within 1e-2. Skips with a notice where no GPU is usable.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "onnx_io/onnx_io.h"
#include "onnx_io/tensor_proto.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "runtime/session.h"
#include "support/cuda_generic_check.h"

using namespace fuseopt;
namespace fs = std::filesystem;

namespace {

Tensor read_pb(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  REQUIRE(proto.ParseFromString(bytes));
  return tensor_from_proto(proto, p.parent_path().string(), p.string());
}

struct ModelCase {
  std::string name;
  std::unique_ptr<Graph> original, optimized;
  std::map<std::string, Tensor> inputs;
  std::vector<Tensor> reference;
};

std::vector<ModelCase> load_models() {
  std::vector<ModelCase> r;
  const fs::path root = fs::path(FUSEOPT_SOURCE_DIR) / "models" / "real";
  if (!fs::is_directory(root)) return r;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const fs::path& d : dirs) {
    ModelCase m;
    m.name = d.filename().string();
    m.original = load_model((d / "model.onnx").string());
    m.optimized = load_model((d / "model.onnx").string());
    PassManager pm(PassManagerOptions{});
    FusionReport report;
    pm.run(*m.optimized, report);
    const fs::path data = d / "test_data_set_0";
    for (size_t i = 0; i < m.original->inputs.size(); ++i)
      m.inputs[m.original->inputs[i]->name] = read_pb(data / ("input_" + std::to_string(i) + ".pb"));
    for (size_t i = 0; i < m.original->outputs.size(); ++i)
      m.reference.push_back(read_pb(data / ("output_" + std::to_string(i) + ".pb")));
    r.push_back(std::move(m));
  }
  return r;
}

double rel_err(const Tensor& got, const Tensor& want) {
  bool finite = true;
  const double e = cuda_generic::norm_rel_error(got, want, &finite);
  return finite ? e : INFINITY;
}

}  // namespace

TEST_CASE("cuda: real models match ONNX Runtime; graph replay is bit-identical", "[cuda][e2e]") {
  if (!cuda_generic::gpu_ready()) return;
  std::vector<ModelCase> models = load_models();
  if (models.empty()) {
    WARN("no models under models/real");
    return;
  }
  for (ModelCase& m : models)
    for (int opt = 0; opt < 2; ++opt) {
      const Graph& g = opt ? *m.optimized : *m.original;
      INFO(m.name << (opt ? " (optimized)" : " (original)"));
      SessionOptions eager_o;
      eager_o.backend = Backend::CUDA;
      eager_o.cuda_graphs = false;
      SessionOptions graph_o;
      graph_o.backend = Backend::CUDA;
      std::vector<Tensor> eager, graphed;
      try {
        Session eager_s(g, eager_o);
        eager = eager_s.run(m.inputs);
        Session graph_s(g, graph_o);
        for (int rep = 0; rep < 3; ++rep) graphed = graph_s.run(m.inputs);  // eager, captured, replayed
        INFO("capture: " << (graph_s.profile().capture_possible ? "possible" : graph_s.profile().capture_disabled_reason));
        CHECK(graph_s.profile().graph_replays > 0);
      } catch (const std::exception& e) {
        FAIL_CHECK("fp32 run failed: " << e.what());
        continue;
      }
      REQUIRE(eager.size() == m.reference.size());
      for (size_t i = 0; i < eager.size(); ++i) {
        INFO("output " << i);
        const double err = rel_err(eager[i], m.reference[i]);
        INFO("fp32 relative error " << err);
        CHECK(err <= 1e-4);
        CHECK((graphed[i].dims == eager[i].dims && graphed[i].bytes == eager[i].bytes));
      }
      SessionOptions half_o;
      half_o.backend = Backend::CUDA;
      half_o.precision = Precision::FP16;
      try {
        Session half(g, half_o);
        const std::vector<Tensor> out = half.run(m.inputs);
        for (size_t i = 0; i < out.size(); ++i) {
          const double err = rel_err(out[i], m.reference[i]);
          INFO("fp16 output " << i << " relative error " << err);
          CHECK(err <= 1e-2);
        }
      } catch (const std::exception& e) {
        FAIL_CHECK("fp16 run failed: " << e.what());
      }
    }
}
