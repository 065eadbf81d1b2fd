// See gemm_tune_cache.h.
#include "kernels/cuda/gemm_tune_cache.h"

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace fuseopt::cuda_fused::tune_cache {

namespace {

constexpr int kAlgoWords = sizeof(cublasLtMatmulAlgo_t) / sizeof(uint64_t);
static_assert(sizeof(cublasLtMatmulAlgo_t) % sizeof(uint64_t) == 0, "cublasLtMatmulAlgo_t is whole 64-bit words");

struct State {
  std::mutex mu;
  bool loaded = false;
  std::string file;  // "" = off
  std::map<std::string, Entry> entries;
};

State& state() {
  static State s;
  return s;
}

std::string default_path() {
  const char* e = std::getenv("FUSEOPT_GEMM_CACHE");
  if (e && *e) return std::strcmp(e, "off") == 0 ? std::string() : std::string(e);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/fuseopt/gemm_algos.txt";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/fuseopt/gemm_algos.txt";
  return {};
}

bool parse_line(const std::string& line, std::string* key, Entry* e) {
  std::istringstream in(line);
  if (!(in >> *key >> e->workspace >> e->workspace_request)) return false;
  uint64_t words[kAlgoWords];
  for (auto& w : words) {
    std::string hex;
    if (!(in >> hex) || hex.empty() || hex.size() > 16) return false;
    char* end = nullptr;
    w = std::strtoull(hex.c_str(), &end, 16);
    if (*end) return false;
  }
  std::memcpy(&e->algo, words, sizeof(words));
  return true;
}

// Loads the file once (lock held by the caller).
void ensure_loaded(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  s.file = default_path();
  if (s.file.empty()) return;
  std::ifstream in(s.file);
  std::string line, key;
  int bad = 0;
  while (std::getline(in, line)) {
    Entry e{};
    if (parse_line(line, &key, &e))
      s.entries[key] = e;
    else if (!line.empty())
      ++bad;
  }
  if (bad) spdlog::warn("GEMM tuning cache {}: {} unreadable line(s) ignored", s.file, bad);
}

}  // namespace

void use_file(const std::string& file) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.entries.clear();
  s.loaded = true;
  s.file = file;
  if (file.empty()) return;
  std::ifstream in(file);
  std::string line, key;
  while (std::getline(in, line)) {
    Entry e{};
    if (parse_line(line, &key, &e)) s.entries[key] = e;
  }
}

std::string path() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  return s.file;
}

bool lookup(const std::string& key, Entry* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  auto it = s.entries.find(key);
  if (it == s.entries.end()) return false;
  *out = it->second;
  return true;
}

void store(const std::string& key, const Entry& e) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ensure_loaded(s);
  s.entries[key] = e;
  if (s.file.empty()) return;
  uint64_t words[kAlgoWords];
  std::memcpy(words, &e.algo, sizeof(words));
  std::ostringstream line;
  line << key << ' ' << e.workspace << ' ' << e.workspace_request;
  char hex[24];
  for (uint64_t w : words) {
    std::snprintf(hex, sizeof hex, " %llx", static_cast<unsigned long long>(w));
    line << hex;
  }
  line << '\n';
  const std::string text = line.str();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(s.file).parent_path(), ec);
  // One write() of the whole line with O_APPEND: concurrent processes never
  // interleave inside a line.
  const int fd = ::open(s.file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  const bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0) ::close(fd);
  if (!ok) {
    spdlog::warn("GEMM tuning cache {}: cannot write ({}); tuned algorithms are kept for this process only",
                 s.file, std::strerror(errno));
    s.file.clear();
  }
}

std::string device_prefix(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "unknown";
  std::string name = p.name;
  for (char& c : name)
    if (c == ' ' || c == '|') c = '_';
  return name + "|sm" + std::to_string(p.major) + std::to_string(p.minor) + "|lt" +
         std::to_string(cublasLtGetVersion());
}

}  // namespace fuseopt::cuda_fused::tune_cache
