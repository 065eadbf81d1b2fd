// External data (issue 2 item 3). Save: when save_model writes a side file,
// where, with which location, and the decision logic that keeps models over
// 2 GiB loadable (tested on the decision function: no 2 GiB file is built).
// Load: malformed external-data entries and shapes whose byte size overflows
// or exceeds the data are one-line errors, never a crash or a huge allocation.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <fstream>
#include <unistd.h>

#include "ir/graph.h"
#include "onnx_io/onnx_io.h"
#include "util/error.h"
#include "util/file.h"

using namespace fuseopt;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("fuseopt_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// y = x * w + b with a 64x32 float weight (8 KiB: external) and a [32] bias (128 B: inline).
std::unique_ptr<Graph> small_model() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* x = g->create_value("x");
  x->dtype = DType::Float;
  x->shape = Shape{Dim::sym("n"), Dim::of(64)};
  x->is_graph_input = true;
  x->has_value_info = true;
  g->inputs.push_back(x);
  std::vector<float> w(64 * 32), b(32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i) * 0.5f;
  Value* wv = g->add_initializer("w", Tensor::from_floats(w, {64, 32}));
  Value* bv = g->add_initializer("b", Tensor::from_floats(b, {32}));
  Node* mm = g->add_node("MatMul", "", {x, wv}, {"m"}, "mm");
  Node* add = g->add_node("Add", "", {mm->outputs[0], bv}, {"y"}, "add");
  add->outputs[0]->is_graph_output = true;
  add->outputs[0]->dtype = DType::Float;
  g->outputs.push_back(add->outputs[0]);
  return g;
}

onnx::ModelProto read_proto(const fs::path& p) {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(read_file(p.string())));
  return m;
}

// key -> value of a tensor's external_data entries ("" when inline).
std::string external_entry(const onnx::TensorProto& t, const std::string& key) {
  for (const auto& e : t.external_data())
    if (e.key() == key) return e.value();
  return "";
}

const onnx::TensorProto& initializer(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  FAIL("no initializer " << name);
  throw 0;
}

}  // namespace

TEST_CASE("onnx_io: the external-data decision keeps models over 2 GiB loadable") {
  using E = SaveOptions::External;
  const size_t two_gib = size_t(2) << 30;
  // A protobuf message cannot exceed 2 GiB: Auto must switch before that, with room for the graph.
  CHECK(kAutoExternalDataBytes < two_gib);
  CHECK(kAutoExternalDataBytes >= (size_t(1) << 30));
  CHECK_FALSE(use_external_data(E::Auto, false, 0));
  CHECK_FALSE(use_external_data(E::Auto, false, size_t(1) << 30));
  CHECK_FALSE(use_external_data(E::Auto, false, kAutoExternalDataBytes));
  CHECK(use_external_data(E::Auto, false, kAutoExternalDataBytes + 1));
  CHECK(use_external_data(E::Auto, false, two_gib - 1));  // 2 GiB - 1 inline would not leave room for the graph
  CHECK(use_external_data(E::Auto, false, two_gib + (size_t(1) << 28)));  // 2.25 GiB
  CHECK(use_external_data(E::Auto, false, size_t(40) << 30));
  CHECK(use_external_data(E::Auto, true, 16));  // the input had a side file: keep that layout
  CHECK(use_external_data(E::Always, false, 0));
  CHECK_FALSE(use_external_data(E::Never, true, 16));
}

TEST_CASE("onnx_io: External::Always writes OUT.data next to the output with a relative location") {
  TempDir tmp;
  fs::create_directories(tmp.path / "sub");
  const fs::path out = tmp.path / "sub" / "model_out.onnx";
  auto g = small_model();
  SaveOptions so;
  so.external = SaveOptions::External::Always;
  save_model(*g, out.string(), so);

  const fs::path side = tmp.path / "sub" / "model_out.onnx.data";
  REQUIRE(fs::exists(side));
  onnx::ModelProto m = read_proto(out);
  const auto& w = initializer(m, "w");
  CHECK(w.data_location() == onnx::TensorProto::EXTERNAL);
  CHECK(external_entry(w, "location") == "model_out.onnx.data");  // relative to the model's folder
  CHECK(w.raw_data().empty());
  const size_t offset = std::stoull(external_entry(w, "offset"));
  CHECK(external_entry(w, "length") == std::to_string(64 * 32 * 4));
  CHECK(fs::file_size(side) >= offset + 64 * 32 * 4);
  // Under the threshold (1 KiB) a tensor stays inline.
  const auto& b = initializer(m, "b");
  CHECK(b.data_location() != onnx::TensorProto::EXTERNAL);
  CHECK(b.raw_data().size() == 32 * 4);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path / "sub")) files += e.is_regular_file();
  CHECK(files == 2);

  // Reloading reads the same bytes back, and remembers the layout.
  auto back = load_model(out.string());
  CHECK(back->had_external_data);
  CHECK(back->find("w")->const_data->bytes == g->find("w")->const_data->bytes);
  CHECK(back->find("b")->const_data->bytes == g->find("b")->const_data->bytes);

  // Auto on a model that had external data keeps it external, in a new side file
  // next to the new output (another folder: the old side file is not referenced).
  fs::create_directories(tmp.path / "other");
  const fs::path out2 = tmp.path / "other" / "again.onnx";
  save_model(*back, out2.string());
  REQUIRE(fs::exists(tmp.path / "other" / "again.onnx.data"));
  CHECK(external_entry(initializer(read_proto(out2), "w"), "location") == "again.onnx.data");
  auto back2 = load_model(out2.string());
  CHECK(back2->find("w")->const_data->bytes == g->find("w")->const_data->bytes);
  // Saving twice (same file name, another folder) gives identical bytes, model and side file.
  fs::create_directories(tmp.path / "third");
  const fs::path out3 = tmp.path / "third" / "again.onnx";
  save_model(*back, out3.string());
  CHECK(read_file(out2.string()) == read_file(out3.string()));
  CHECK(read_file((tmp.path / "other" / "again.onnx.data").string()) ==
        read_file((tmp.path / "third" / "again.onnx.data").string()));
}

TEST_CASE("onnx_io: External::Never and the default write one self-contained file") {
  TempDir tmp;
  auto g = small_model();
  const fs::path out = tmp.path / "inline.onnx";
  save_model(*g, out.string());  // Auto, small, no external input
  CHECK_FALSE(fs::exists(tmp.path / "inline.onnx.data"));
  CHECK(initializer(read_proto(out), "w").raw_data().size() == 64 * 32 * 4);

  g->had_external_data = true;
  SaveOptions never;
  never.external = SaveOptions::External::Never;
  const fs::path out2 = tmp.path / "never.onnx";
  save_model(*g, out2.string(), never);
  CHECK_FALSE(fs::exists(tmp.path / "never.onnx.data"));
  const onnx::ModelProto written = read_proto(out2);  // w refers into it: it must outlive w
  const auto& w = initializer(written, "w");
  CHECK(w.data_location() != onnx::TensorProto::EXTERNAL);
  CHECK(load_model(out2.string())->find("w")->const_data->bytes == g->find("w")->const_data->bytes);
}

TEST_CASE("onnx_io: external data in a subfolder of the model's folder loads, bad side files are one-line errors") {
  TempDir tmp;
  auto g = small_model();
  SaveOptions so;
  so.external = SaveOptions::External::Always;
  const fs::path out = tmp.path / "m.onnx";
  save_model(*g, out.string(), so);

  // Move the side file into weights/ and point the location there.
  fs::create_directories(tmp.path / "weights");
  fs::rename(tmp.path / "m.onnx.data", tmp.path / "weights" / "w.bin");
  onnx::ModelProto m = read_proto(out);
  for (auto& t : *m.mutable_graph()->mutable_initializer())
    for (auto& e : *t.mutable_external_data())
      if (e.key() == "location") e.set_value("weights/w.bin");
  const fs::path moved = tmp.path / "moved.onnx";
  {
    std::ofstream f(moved, std::ios::binary);
    f << m.SerializeAsString();
  }
  CHECK(load_model(moved.string())->find("w")->const_data->bytes == g->find("w")->const_data->bytes);

  // Side file too short (truncated): an error naming the file, no crash.
  fs::resize_file(tmp.path / "weights" / "w.bin", 100);
  try {
    load_model(moved.string());
    FAIL("a truncated side file was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("w.bin") != std::string::npos);
  }
  // Side file missing.
  fs::remove(tmp.path / "weights" / "w.bin");
  try {
    load_model(moved.string());
    FAIL("a missing side file was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("w.bin") != std::string::npos);
  }
}

namespace {

// y = x + w, with `w` described by the caller (external data, odd shapes...).
std::string model_with_weight(const std::function<void(onnx::TensorProto*)>& describe_w) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  describe_w(w);
  for (const char* io : {"x", "y"}) {
    auto* v = std::string(io) == "x" ? g->add_input() : g->add_output();
    v->set_name(io);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  }
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  return m.SerializeAsString();
}

void external(onnx::TensorProto* w, const std::string& location, const std::string& offset,
              const std::string& length = "") {
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  if (!offset.empty()) add("offset", offset);
  if (!length.empty()) add("length", length);
}

// The one-line message of loading these bytes (empty when it loads).
std::string load_error(const std::string& bytes, const std::string& dir) {
  try {
    load_model_from_bytes(bytes, dir, "bad.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("onnx_io: malformed external-data entries are one-line errors naming the file and tensor") {
  TempDir tmp;
  {
    std::ofstream f(tmp.path / "w.bin", std::ios::binary);
    f << std::string(8, '\0');
  }
  fs::create_directories(tmp.path / "folder");
  const std::string dir = tmp.path.string();
  CHECK(load_error(model_with_weight([](auto* w) { external(w, "w.bin", "0", "8"); }), dir).empty());
  struct Case {
    const char* what;
    std::string offset, length, location, must_say;
  };
  const std::vector<Case> cases = {
      {"offset not a number", "abc", "", "w.bin", "offset 'abc' is not a byte count"},
      {"negative offset", "-5", "", "w.bin", "offset '-5' is not a byte count"},
      {"offset past 2^64", "18446744073709551612", "", "w.bin", "not a byte count"},
      {"offset past the end", "999999999999999999", "", "w.bin", "too short"},
      {"offset + length past the end", "4", "", "w.bin", "too short"},
      {"negative length", "0", "-8", "w.bin", "length '-8' is not a byte count"},
      {"length not matching the shape", "0", "4", "w.bin", "does not match its shape"},
      {"location is a folder", "0", "", "folder", "not a regular file"},
      {"location missing", "0", "", "nowhere.bin", "nowhere.bin"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const std::string msg =
        load_error(model_with_weight([&](auto* w) { external(w, c.location, c.offset, c.length); }), dir);
    CHECK(msg.find(c.must_say) != std::string::npos);
    CHECK(msg.rfind("bad.onnx", 0) == 0);  // names the file first
    CHECK(msg.find("'w'") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("onnx_io: shapes whose size overflows or exceeds the data are refused before allocating") {
  TempDir tmp;
  const std::string dir = tmp.path.string();
  // 2^40 x 2^40 elements: the product overflows int64 (it used to wrap and load as an empty tensor).
  std::string msg = load_error(model_with_weight([](auto* w) {
                                 w->add_dims(int64_t(1) << 40);
                                 w->add_dims(int64_t(1) << 40);
                               }), dir);
  CHECK(msg.find("too many") != std::string::npos);
  CHECK(msg.find("'w'") != std::string::npos);
  // 4 TiB of floats declared, 8 bytes given: an error, not a 4 TiB allocation (std::bad_alloc).
  msg = load_error(model_with_weight([](auto* w) {
                     w->add_dims(int64_t(1) << 20);
                     w->add_dims(int64_t(1) << 20);
                     w->set_raw_data(std::string(8, '\0'));
                   }), dir);
  CHECK(msg.find("raw data is 8 bytes") != std::string::npos);
  msg = load_error(model_with_weight([](auto* w) {
                     w->add_dims(int64_t(1) << 20);
                     w->add_dims(int64_t(1) << 20);
                     w->add_float_data(1.0f);
                   }), dir);
  CHECK(msg.find("1 values") != std::string::npos);
  {
    std::ofstream f(tmp.path / "w.bin", std::ios::binary);
    f << std::string(8, '\0');
  }
  msg = load_error(model_with_weight([](auto* w) {
                     external(w, "w.bin", "0");
                     w->set_dims(0, int64_t(1) << 40);
                   }), dir);
  CHECK(msg.find("too short") != std::string::npos);
}
