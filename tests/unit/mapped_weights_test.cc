// Memory-mapped weights (issue 13, big models): a view of a mapped file range
// is read-only (writing copies it: copy-on-write, the file never changes),
// lives as long as a tensor holds it (after the file is unlinked, after its
// Graph is gone), and gives back its pages on release. Loading external data
// maps it; optimizing reads it without copying; spilled constants sit in an
// unlinked scratch file; saving streams both into the output's side file
// with the same bytes as from memory.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/fusion_check.h"
#include "util/mapped_file.h"

using namespace fuseopt;
using namespace fuseopt::test;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("fuseopt_mapped_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

fs::path write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
  return p;
}

// Bytes 0, 1, 2, ... (mod 251): every offset has a value of its own.
std::string pattern(size_t n, int salt = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i + salt) % 251);
  return s;
}

// Resident kB of the mapping that holds p, from /proc/self/smaps (mincore
// would say whether the page cache has the pages, not whether this process
// maps them).
size_t mapping_rss_kb(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= a && a < hi;
      continue;
    }
    size_t kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %zu kB", &kb) == 1) return kb;
  }
  FAIL("no mapping holds the pointer");
  return 0;
}

Tensor view_tensor(const std::shared_ptr<MappedFile>& f, uint64_t offset, std::vector<int64_t> dims) {
  Tensor t;
  t.dtype = DType::Float;
  t.dims = std::move(dims);
  t.bytes = TensorBytes::view(f->map(offset, static_cast<size_t>(t.numel()) * 4));
  return t;
}

// Three projections of one input (QkvPack concatenates their weights), a
// gated MLP and a residual: every weight 128 KiB, past the mapping threshold.
std::unique_ptr<Graph> projection_model() {
  GraphBuilder b(17);
  Value* x = b.input("x", DType::Float, {1, 3, 128});
  Value* q = b.op("MatMul", {x, b.constant("Wq", rand_tensor({128, 256}, 1))});
  Value* k = b.op("MatMul", {x, b.constant("Wk", rand_tensor({128, 256}, 2))});
  Value* v = b.op("MatMul", {x, b.constant("Wv", rand_tensor({128, 256}, 3))});
  Value* gate = b.op("MatMul", {x, b.constant("Wg", rand_tensor({128, 256}, 4))});
  Value* up = b.op("MatMul", {x, b.constant("Wu", rand_tensor({128, 256}, 5))});
  Value* act = b.op("Mul", {b.op("Mul", {gate, b.op("Sigmoid", {gate})}), up});
  b.output(b.op("Add", {b.op("Add", {q, k}), b.op("Add", {v, act})}));
  return b.release();
}

std::map<std::string, Tensor> feeds() { return {{"x", rand_tensor({1, 3, 128}, 9)}}; }

}  // namespace

TEST_CASE("mapped weights: a view reads the file in place and is never written", "[mapped]") {
  TempDir tmp;
  const std::string content = pattern(3 * 4096 + 100);
  const fs::path path = write_file(tmp.path / "w.bin", content);
  auto file = MappedFile::open(path.string());
  // An offset that is not page-aligned: the view starts inside a page.
  Tensor t = view_tensor(file, 4100, {1000});
  REQUIRE(t.bytes.is_view());
  const Tensor& ct = t;
  CHECK(ct.bytes.data() == t.bytes.span()->data());
  CHECK(std::memcmp(ct.bytes.data(), content.data() + 4100, 4000) == 0);
  CHECK(ct.bytes.size() == 4000);
  // The pages themselves are read-only: a write that bypasses the API faults
  // (in a child process, so the test survives it).
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // not Catch's handler: just die of it
    std::signal(SIGBUS, SIG_DFL);
    const_cast<uint8_t*>(ct.bytes.data())[0] = 1;
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK((WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS));
  const uint64_t copies = tensor_view_copies();
  const Tensor reader = t;  // a copy shares the view
  CHECK(reader.bytes.data() == ct.bytes.data());
  CHECK(tensor_view_copies() == copies);
  CHECK(reader.as_double(3) == ct.as_double(3));
  CHECK(tensor_view_copies() == copies);  // reading never copies
  // Writing copies first: the file and every other holder keep the old bytes.
  t.data<uint8_t>()[0] = 42;
  CHECK(tensor_view_copies() == copies + 1);
  CHECK_FALSE(t.bytes.is_view());
  CHECK(t.bytes[0] == 42);
  CHECK(std::memcmp(t.bytes.data() + 1, content.data() + 4101, 3999) == 0);
  CHECK(reader.bytes.is_view());
  CHECK(reader.bytes[0] == static_cast<uint8_t>(content[4100]));
  CHECK(file_bytes(path) == content);
}

TEST_CASE("mapped weights: copy-on-write on every writing path", "[mapped]") {
  TempDir tmp;
  const std::string content = pattern(8192);
  const fs::path path = write_file(tmp.path / "w.bin", content);
  auto file = MappedFile::open(path.string());
  const Tensor base = view_tensor(file, 0, {2048});
  SECTION("resize") {
    Tensor t = base;
    t.bytes.resize(16);
    CHECK(t.bytes.size() == 16);
    CHECK(std::memcmp(t.bytes.data(), content.data(), 16) == 0);
  }
  SECTION("begin/end through std::copy") {
    Tensor t = base;
    std::fill(t.bytes.begin(), t.bytes.begin() + 4, uint8_t(7));
    CHECK(t.bytes[3] == 7);
  }
  SECTION("operator[]") {
    Tensor t = base;
    t.bytes[5] = 9;
    CHECK(t.bytes[5] == 9);
  }
  CHECK(base.bytes.is_view());
  CHECK(std::memcmp(base.bytes.data(), content.data(), 8192) == 0);
  CHECK(file_bytes(path) == content);
  // Owned bytes are copied as a vector is: the copy is independent.
  Tensor owned = Tensor::from_floats({1, 2, 3}, {3});
  Tensor other = owned;
  other.data<float>()[0] = 5;
  CHECK(owned.data<float>()[0] == 1);
  CHECK(owned.bytes != other.bytes);
  CHECK(base.bytes == view_tensor(file, 0, {2048}).bytes);
}

TEST_CASE("mapped weights: a view outlives its file's name, its MappedFile handle and its Graph", "[mapped]") {
  TempDir tmp;
  const std::string content = pattern(10000, 3);
  const fs::path path = write_file(tmp.path / "w.bin", content);
  TensorPtr kept;
  {
    auto g = std::make_unique<Graph>();
    auto file = MappedFile::open(path.string());
    g->weight_files.push_back(file);
    Value* w = g->add_initializer("w", view_tensor(file, 0, {2500}));
    kept = w->const_data;
    fs::remove(path);  // unlinked: the open descriptor and the mapping keep the bytes
  }                    // the Graph and the handle go
  REQUIRE(kept->bytes.is_view());
  CHECK(std::memcmp(kept->bytes.data(), content.data(), 10000) == 0);
  CHECK(kept->bytes.span()->file().path() == path.string());
}

TEST_CASE("mapped weights: release_resident drops the pages read, the bytes stay readable", "[mapped]") {
  TempDir tmp;
  const size_t n = 64 * 4096;
  const std::string content = pattern(n, 5);
  const fs::path path = write_file(tmp.path / "w.bin", content);
  auto file = MappedFile::open(path.string());
  Tensor t = view_tensor(file, 0, {static_cast<int64_t>(n / 4)});
  const Tensor& ct = t;
  volatile uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum = sum + ct.bytes.data()[i];  // touch every page
  const size_t all_kb = n / 1024;
  CHECK(mapping_rss_kb(ct.bytes.data()) == all_kb);
  ct.bytes.release_resident();
  CHECK(mapping_rss_kb(ct.bytes.data()) == 0);
  CHECK(std::memcmp(ct.bytes.data(), content.data(), n) == 0);  // read again from the file
  CHECK(mapping_rss_kb(ct.bytes.data()) == all_kb);
  file->release_resident();  // every live span of the file
  CHECK(mapping_rss_kb(ct.bytes.data()) == 0);
}

TEST_CASE("mapped weights: external data loads as views, small tensors and inline data as memory", "[mapped]") {
  TempDir tmp;
  auto g = projection_model();
  g->add_initializer("small", rand_tensor({4, 4}, 11));  // 64 B: inline
  g->add_initializer("medium", rand_tensor({64, 64}, 12));  // 16 KiB: external, read into memory
  SaveOptions so;
  so.external = SaveOptions::External::Always;
  save_model(*g, (tmp.path / "m.onnx").string(), so);
  auto loaded = load_model((tmp.path / "m.onnx").string());
  REQUIRE(loaded->weight_files.size() == 1);
  CHECK(loaded->weight_files[0]->path() == (tmp.path / "m.onnx.data").lexically_normal().string());
  for (const char* name : {"Wq", "Wk", "Wv", "Wg", "Wu"}) {
    INFO(name);
    const Value* v = loaded->find(name);
    REQUIRE(v);
    CHECK(v->const_data->bytes.is_view());
    CHECK(v->const_data->bytes == g->find(name)->const_data->bytes);
  }
  CHECK_FALSE(loaded->find("small")->const_data->bytes.is_view());
  CHECK_FALSE(loaded->find("medium")->const_data->bytes.is_view());
  CHECK(loaded->find("medium")->const_data->bytes == g->find("medium")->const_data->bytes);
  // An inline model has no mapped weights at all.
  save_model(*g, (tmp.path / "inline.onnx").string());
  auto inl = load_model((tmp.path / "inline.onnx").string());
  CHECK(inl->weight_files.empty());
  CHECK_FALSE(inl->find("Wq")->const_data->bytes.is_view());
}

TEST_CASE("mapped weights: save from the mapping is byte-identical to save from memory", "[mapped]") {
  TempDir tmp;
  auto g = projection_model();
  SaveOptions so;
  so.external = SaveOptions::External::Always;
  save_model(*g, (tmp.path / "mem.onnx").string(), so);
  auto loaded = load_model((tmp.path / "mem.onnx").string());
  save_model(*loaded, (tmp.path / "mapped.onnx").string(), so);
  // The side file's name is inside the model, so compare the model through a
  // save under the same name in another folder.
  fs::create_directories(tmp.path / "again");
  save_model(*g, (tmp.path / "again" / "mapped.onnx").string(), so);
  CHECK(file_bytes(tmp.path / "mapped.onnx") == file_bytes(tmp.path / "again" / "mapped.onnx"));
  CHECK(file_bytes(tmp.path / "mapped.onnx.data") == file_bytes(tmp.path / "mem.onnx.data"));
  // A mapped model saved inline carries the same bytes as the original inline save.
  save_model(*g, (tmp.path / "inline_mem.onnx").string());
  save_model(*loaded, (tmp.path / "inline_mapped.onnx").string(),
             SaveOptions{SaveOptions::External::Never, 1024, ""});
  CHECK(file_bytes(tmp.path / "inline_mem.onnx") == file_bytes(tmp.path / "inline_mapped.onnx"));
}

TEST_CASE("mapped weights: optimizing reads them without a copy; spilled constants keep the output's bytes",
          "[mapped]") {
  TempDir tmp;
  auto original = projection_model();
  SaveOptions so;
  so.external = SaveOptions::External::Always;
  save_model(*original, (tmp.path / "in.onnx").string(), so);

  // Reference: all in memory (the inline model), default passes, saved with a side file.
  auto in_memory = load_model_from_bytes(serialize_model(*original), tmp.path.string(), "in-memory");
  FusionReport r0;
  PassManager(PassManagerOptions{}).run(*in_memory, r0);
  fs::create_directories(tmp.path / "ref");
  save_model(*in_memory, (tmp.path / "ref" / "out.onnx").string(), so);

  // The same from the mapped side file, every new constant spilled.
  auto mapped = load_model((tmp.path / "in.onnx").string());
  fs::create_directories(tmp.path / "out");
  mapped->spill_constants_to((tmp.path / "out").string(), 0);
  const uint64_t copies = tensor_view_copies();
  FusionReport r1;
  PassManager(PassManagerOptions{}).run(*mapped, r1);
  CHECK(tensor_view_copies() == copies);  // no mapped weight was copied to be read
  CHECK(matched(r1, "QkvPack") >= 1);
  int spilled = 0;
  for (const Value* v : mapped->initializers) {
    if (!v->const_data->bytes.is_view()) continue;
    if (&v->const_data->bytes.span()->file() == mapped->weight_files.back().get()) ++spilled;
  }
  CHECK(spilled >= 1);  // the packed weight lives in the scratch file
  require_same_outputs(*original, *mapped, feeds());
  save_model(*mapped, (tmp.path / "out" / "out.onnx").string(), so);
  CHECK(file_bytes(tmp.path / "out" / "out.onnx") == file_bytes(tmp.path / "ref" / "out.onnx"));
  CHECK(file_bytes(tmp.path / "out" / "out.onnx.data") == file_bytes(tmp.path / "ref" / "out.onnx.data"));
  // The scratch file never shows in the folder.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tmp.path / "out")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"out.onnx", "out.onnx.data"});
}

TEST_CASE("mapped weights: copy_file_bytes copies a range file to file", "[mapped]") {
  TempDir tmp;
  const std::string content = pattern(100000, 7);
  const fs::path src = write_file(tmp.path / "src.bin", content);
  int in = ::open(src.c_str(), O_RDONLY);
  int out = ::open((tmp.path / "dst.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(in >= 0);
  REQUIRE(out >= 0);
  REQUIRE(::write(out, "head", 4) == 4);
  CHECK(copy_file_bytes(in, 12345, 50000, out));
  CHECK(copy_file_bytes(in, 0, 0, out));
  CHECK_FALSE(copy_file_bytes(in, 99990, 100, out));  // past the end: an error, not a short file passed off
  ::close(in);
  ::close(out);
  const std::string got = file_bytes(tmp.path / "dst.bin");
  REQUIRE(got.size() >= 4 + 50000);
  CHECK(got.substr(0, 4) == "head");
  CHECK(got.substr(4, 50000) == content.substr(12345, 50000));
}
