// Shape inference on real exports: every model in models/ gets its outputs' and
// value_info's shapes, the TorchScript BERT attention reshapes, optimized models fully
// shaped, and two hidden dump helpers ([.shape_dump], [.shape_tsv]). The op-level cases
// are in shape_inference_test.cc.
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "ir/shape_inference.h"
#include "ir/sym_expr.h"
#include "onnx_io/onnx_io.h"
#include "pass/pass_manager.h"
#include "support/shape_check.h"
#include "util/error.h"

using namespace fuseopt;
using fuseopt::test::shape::sh;

namespace {

std::vector<std::filesystem::path> model_files() {
  std::vector<std::filesystem::path> files;
  const std::filesystem::path root = FUSEOPT_SOURCE_DIR;
  for (const char* dir : {"models/real", "models/exported", "models/synthetic"}) {
    if (!std::filesystem::exists(root / dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(root / dir))
      if (std::filesystem::exists(e.path() / "model.onnx")) files.push_back(e.path() / "model.onnx");
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Known dims of `want` must be known and equal in `got`.
bool known_dims_agree(const Shape& got, const Shape& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (want[i].known() && (!got[i].known() || got[i].value != want[i].value)) return false;
  return true;
}

}  // namespace

TEST_CASE("shape inference: every exported model gets its outputs' and value_info's shapes") {
  const auto files = model_files();
  REQUIRE(files.size() >= 6);
  for (const auto& path : files) {
    const std::string name = path.parent_path().filename().string();
    INFO(name);
    auto g = load_model(path.string());
    // What the exporter declared: graph outputs and (dynamo) value_info.
    std::map<const Value*, Shape> declared;
    std::map<const Value*, DType> declared_dtype;
    for (Value* v : g->all_values())
      if (v->producer && (v->has_value_info || v->is_graph_output) && v->shape) {
        declared[v] = *v->shape;
        declared_dtype[v] = v->dtype;
      }
    // On top of what the exporter declared: no contradiction.
    REQUIRE_NOTHROW(infer_shapes(*g));
    ShapeInferenceOptions o;
    o.reset = true;  // forget every declared node-output shape, infer from the inputs
    ShapeInferenceResult si;
    REQUIRE_NOTHROW(si = infer_shapes(*g, o));
    // A second run changes nothing.
    {
      std::map<const Value*, std::string> first;
      for (const Value* v : g->all_values()) first[v] = sh(v);
      infer_shapes(*g);
      int changed = 0;
      for (const Value* v : g->all_values()) changed += first[v] != sh(v);
      CHECK(changed == 0);
    }
    CHECK(si.unknown_ops.empty());
    for (const Value* out : g->outputs) {
      INFO("output " << out->name);
      REQUIRE(out->shape.has_value());
      REQUIRE(declared.count(out));
      CHECK(known_dims_agree(*out->shape, declared[out]));
      // Symbols the exporter named (batch, seq) come out by the same name.
      for (size_t i = 0; i < out->shape->size(); ++i) {
        const Dim& want = declared[out][i];
        if (!want.known() && (want.symbol == "batch" || want.symbol == "seq")) CHECK((*out->shape)[i].symbol == want.symbol);
      }
    }
    int compared = 0, missing = 0, symbol_mismatch = 0;
    for (const auto& [v, want] : declared) {
      if (v->is_graph_output) continue;
      if (!v->shape) {
        ++missing;
        UNSCOPED_INFO("no shape inferred for " << v->name << " (declared " << shape_str(want) << ")");
        continue;
      }
      ++compared;
      INFO("value " << v->name << " inferred " << shape_str(*v->shape) << " declared " << shape_str(want));
      CHECK(known_dims_agree(*v->shape, want));
      CHECK(v->dtype == declared_dtype[v]);
      for (size_t i = 0; i < want.size() && i < v->shape->size(); ++i)
        if (!want[i].known() && !want[i].symbol.empty() && !dims_equal((*v->shape)[i], want[i])) {
          // A floor division the exporter wrote ("((s43*s53)//s56)", the dynamo exporter at opset
          // 23 for a Reshape's -1) is not modelled: inferred as an unnamed dim, which is not a
          // contradiction. Any other difference is.
          const Dim& got = (*v->shape)[i];
          if (!got.known() && got.symbol.empty() && want[i].symbol.find("//") != std::string::npos) continue;
          // Nor the piecewise min / max the exporter writes for a clamped Slice ("1 - Max(0, 1 - seq)":
          // x[:seq] of a size-1 axis): test_shape_inference_ort.py checks those sizes against ONNX Runtime.
          if (want[i].symbol.find("Max(") != std::string::npos || want[i].symbol.find("Min(") != std::string::npos) continue;
          ++symbol_mismatch;
          std::cout << "[shape inference] " << name << ": " << v->name << " inferred " << shape_str(*v->shape)
                    << " declared " << shape_str(want) << "\n";
        }
    }
    CHECK(missing == 0);
    // Every node output gets a shape.
    int unshaped = 0;
    for (const auto& n : g->nodes())
      for (const Value* v : n->outputs)
        if (v && !v->shape) {
          ++unshaped;
          UNSCOPED_INFO("unshaped: " << v->name << " from " << n->label());
        }
    CHECK(unshaped == 0);
    std::cout << "[shape inference] " << name << ": " << si.outputs_with_shape << "/" << si.outputs_total
              << " node outputs shaped, " << compared << " value_info compared, " << symbol_mismatch
              << " symbolic dims named differently\n";
    if (!declared.empty()) CHECK(symbol_mismatch == 0);
  }
}

TEST_CASE("shape inference: TorchScript BERT attention reshapes are [batch, seq, 4, 32]") {
  const std::filesystem::path path = std::filesystem::path(FUSEOPT_SOURCE_DIR) / "models/real/bert_eager_op17_ts/model.onnx";
  if (!std::filesystem::exists(path)) return;
  auto g = load_model(path.string());
  ShapeInferenceOptions o;
  o.reset = true;
  infer_shapes(*g, o);
  int split_heads = 0, merge_heads = 0;
  for (const auto& n : g->nodes()) {
    if (!n->is("Reshape")) continue;
    const std::string s = sh(n->outputs[0]);
    if (s == "[batch,seq,4,32]") ++split_heads;
    if (s == "[batch,seq,128]") ++merge_heads;
    if (split_heads + merge_heads <= 4) std::cout << "[shape inference] bert_ts " << n->label() << " -> " << s << "\n";
  }
  CHECK(split_heads == 6);  // Q, K, V in each of the 2 layers
  CHECK(merge_heads == 2);
}

// Debug aid (hidden): FUSEOPT_DUMP_MODEL=path bin/test_unit "[.shape_dump]"
TEST_CASE("shape inference: dump a model's inferred shapes", "[.shape_dump]") {
  const char* path = std::getenv("FUSEOPT_DUMP_MODEL");
  if (!path) return;
  auto g = load_model(path);
  ShapeInferenceOptions o;
  o.reset = true;
  o.strict = false;
  auto si = infer_shapes(*g, o);
  for (const auto& c : si.conflicts) std::cout << "conflict: " << c << "\n";
  for (const auto& n : g->nodes()) {
    std::cout << n->label() << " ->";
    for (const Value* v : n->outputs) {
      if (!v) continue;
      std::cout << " " << v->name << ":" << dtype_name(v->dtype) << sh(v);
      if (auto c = si.symbolic_value(v)) std::cout << "=" << shape_str(*c);
    }
    std::cout << "\n";
  }
}

// The optimizer's output (fused ops in domain fuseopt) is shaped as completely
// as its input: every fused op's shape function agrees with the graph around it.
TEST_CASE("shape inference: optimized models are fully shaped, fused ops included") {
  const auto files = model_files();
  REQUIRE(files.size() >= 6);
  std::map<std::string, int> fused_seen;
  for (const auto& path : files) {
    const std::string name = path.parent_path().filename().string();
    INFO(name);
    auto g = load_model(path.string());
    // Keyed by name: the passes replace values, and a freed Value's address may come back as
    // another output's (a pointer key then compared present_value with the hidden state's shape
    // in one binary layout of session 9).
    std::map<std::string, Shape> declared;
    for (const Value* v : g->outputs)
      if (v->shape) declared[v->name] = *v->shape;
    FusionReport report;
    PassManager pm(PassManagerOptions{});
    pm.run(*g, report);
    ShapeInferenceOptions o;
    o.reset = true;
    ShapeInferenceResult si;
    REQUIRE_NOTHROW(si = infer_shapes(*g, o));
    CHECK(si.unknown_ops.empty());
    for (const auto& n : g->nodes()) {
      if (n->domain == "fuseopt") ++fused_seen[n->op_type];
      for (const Value* v : n->outputs) {
        INFO(n->label() << " output " << (v ? v->name : ""));
        if (v) CHECK(v->shape.has_value());
      }
    }
    for (const Value* out : g->outputs) {
      INFO("output " << out->name);
      REQUIRE(out->shape.has_value());
      if (declared.count(out->name)) CHECK(known_dims_agree(*out->shape, declared[out->name]));
    }
  }
  for (const auto& [op, n] : fused_seen) std::cout << "[shape inference] fused " << op << ": " << n << " nodes shaped\n";
}

// Machine-readable dump for tests/py/test_shape_inference_ort.py (hidden):
// one line per node output: "SHAPE\t<value>\t<dtype enum>\t<dim,dim,...>" ("-" = rank unknown).
TEST_CASE("shape inference: tab-separated shapes of a model", "[.shape_tsv]") {
  const char* path = std::getenv("FUSEOPT_DUMP_MODEL");
  if (!path) return;
  auto g = load_model(path);
  ShapeInferenceOptions o;
  o.reset = true;
  infer_shapes(*g, o);
  for (const auto& n : g->nodes())
    for (const Value* v : n->outputs) {
      if (!v) continue;
      std::cout << "SHAPE\t" << v->name << "\t" << static_cast<int>(v->dtype) << "\t";
      if (!v->shape) std::cout << "-";
      for (size_t i = 0; v->shape && i < v->shape->size(); ++i) std::cout << (i ? "," : "") << (*v->shape)[i].str();
      std::cout << "\n";
    }
}
