// The persisted GEMM tuning cache (kernels/cuda/gemm_tune_cache.h): entries
// survive a reload byte for byte, the last line of a key wins, unreadable
// lines are skipped, and an unwritable location only turns persistence off.
// No GPU needed: the algorithm is an opaque 64-byte value here.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cuda/gemm_tune_cache.h"

using namespace fuseopt::cuda_fused;

namespace {

tune_cache::Entry entry(uint64_t seed, size_t ws) {
  tune_cache::Entry e{};
  uint64_t words[sizeof(e.algo) / 8];
  for (size_t i = 0; i < sizeof(words) / 8; ++i) words[i] = seed * 0x9E3779B97F4A7C15ull + i;
  std::memcpy(&e.algo, words, sizeof(words));
  e.workspace = ws;
  e.workspace_request = ws * 2;
  return e;
}

bool same(const tune_cache::Entry& a, const tune_cache::Entry& b) {
  return std::memcmp(&a.algo, &b.algo, sizeof(a.algo)) == 0 && a.workspace == b.workspace &&
         a.workspace_request == b.workspace_request;
}

}  // namespace

TEST_CASE("GEMM tuning cache round-trips through its file", "[gemm][tune_cache]") {
  const auto dir = std::filesystem::temp_directory_path() / "fuseopt_tune_cache_test";
  std::filesystem::remove_all(dir);
  const std::string file = (dir / "sub" / "gemm_algos.txt").string();
  tune_cache::use_file(file);
  REQUIRE(tune_cache::path() == file);
  tune_cache::store("H200|sm90|lt130000|1,0,128,768,2304", entry(1, 0));
  tune_cache::store("H200|sm90|lt130000|1,0,128,768,768", entry(2, 4096));
  tune_cache::store("H200|sm90|lt130000|1,0,128,768,2304", entry(3, 1 << 20));  // re-tuned: last wins
  {
    std::ofstream garbage(file, std::ios::app);
    garbage << "not a line of this cache\n";
  }
  tune_cache::use_file(file);  // a new process, in effect
  tune_cache::Entry got{};
  REQUIRE(tune_cache::lookup("H200|sm90|lt130000|1,0,128,768,2304", &got));
  CHECK(same(got, entry(3, 1 << 20)));
  REQUIRE(tune_cache::lookup("H200|sm90|lt130000|1,0,128,768,768", &got));
  CHECK(same(got, entry(2, 4096)));
  CHECK_FALSE(tune_cache::lookup("H200|sm90|lt130000|1,0,128,768,3072", &got));
  std::filesystem::remove_all(dir);
  tune_cache::use_file("");
}

TEST_CASE("GEMM tuning cache in an unwritable place stays in memory", "[gemm][tune_cache]") {
  // A regular file where the folder should be: create_directories and open fail.
  const auto blocker = std::filesystem::temp_directory_path() / "fuseopt_tune_cache_blocker";
  std::filesystem::remove_all(blocker);
  { std::ofstream(blocker) << "x"; }
  tune_cache::use_file((blocker / "gemm_algos.txt").string());
  tune_cache::store("k", entry(5, 0));
  CHECK(tune_cache::path().empty());  // persistence off after the failed write
  tune_cache::Entry got{};
  REQUIRE(tune_cache::lookup("k", &got));  // still served in this process
  CHECK(same(got, entry(5, 0)));
  std::filesystem::remove(blocker);
  tune_cache::use_file("");
}
