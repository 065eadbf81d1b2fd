// parallel_for covers every index once, rethrows worker exceptions, and runs
// nested calls serially instead of deadlocking.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "runtime/parallel.h"

using namespace fuseopt;

TEST_CASE("parallel_for visits every index exactly once", "[parallel]") {
  for (int threads : {1, 2, 4, 7}) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 5, 1000, 4097}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) REQUIRE(hits[i] == 1);
    }
  }
  set_num_threads(0);
}

TEST_CASE("parallel_for rethrows and survives", "[parallel]") {
  set_num_threads(4);
  REQUIRE_THROWS_AS(parallel_for(100, 1, [](int64_t b, int64_t) {
                      if (b > 0) throw std::runtime_error("boom");
                    }),
                    std::runtime_error);
  std::atomic<int64_t> sum{0};
  parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK(sum == 4950);
  set_num_threads(0);
}

TEST_CASE("nested parallel_for runs serially", "[parallel]") {
  set_num_threads(4);
  std::atomic<int64_t> count{0};
  parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallel_for(10, 1, [&](int64_t b2, int64_t e2) { count += e2 - b2; });
  });
  CHECK(count == 80);
  set_num_threads(0);
}
